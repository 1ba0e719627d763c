"""Every typed tool, through the real in-memory server path: schema-valid arguments are never
refused, mutated arguments are always INVALID_INPUT naming the field, and the server survives.

The tool list is taken from a built server (all toolsets, the fixtures, and `probe_kinds`, a
tool declared here with one field of each kind `find_issue` handles), so tools that later
toolsets register are covered without editing this file. Each example runs a fresh server
in its own `trio.run` (about 4 ms), which keeps examples independent. Handlers get a runtime
whose `sleep` returns at once: a valid `sleep(seconds=60)` is about validation, not waiting.
"""

from __future__ import annotations

import enum
import math
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import msgspec
import pytest
import trio
import trio.lowlevel
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import Meta

from specactor.actors.runtime import TrioRuntime
from specactor.app import build
from specactor.config import EmergentConfig, SessionLogConfig
from specactor.protocol.context import RequestContext
from specactor.protocol.registry import Registry
from specactor.protocol.schema import json_type
from specactor.testing import everything, open_memory_server
from specactor.wire.arguments import ToolInput
from tests.conftest import check_frames, fixture_config
from tests.schema_strategies import from_schema


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


class Owner(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, Meta(min_length=1)]
    age: Annotated[int, Meta(ge=0, le=150)] = 0


class KindsIn(ToolInput):
    title: Annotated[str, Meta(min_length=1, max_length=12, pattern="^[a-z ]+$")]
    count: Annotated[int, Meta(ge=1, le=100)]
    ratio: Annotated[float, Meta(gt=0.0, lt=1.0)] = 0.5
    done: bool = False
    mode: Literal["fast", "slow"] = "fast"
    size: Size = Size.SMALL
    tags: Annotated[list[str], Meta(max_length=3)] = []
    limits: dict[str, int] = {}
    note: str | None = None
    owner: Owner | None = None
    key: int | str = 0


def register_all(registry: Registry, services: Any) -> None:
    everything.register(registry, services)

    @registry.tool("probe_kinds", description="Echoes a value of every field kind.", input=KindsIn,
                   output=KindsIn, toolset="fixtures")
    async def probe(args: KindsIn, ctx: RequestContext) -> KindsIn:
        return args


class InstantRuntime(TrioRuntime):
    """The real worker pool, but a clock that never waits (no examples spent sleeping)."""

    async def sleep(self, seconds: float) -> None:
        await trio.lowlevel.checkpoint()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The graph toolset too, against an Emergent that refuses connections at once: its tools are fuzzed
# like the others, and answer PROVIDER_ERROR (never INVALID_INPUT) to valid arguments.
EMERGENT = EmergentConfig(url=f"http://127.0.0.1:{_closed_port()}", api_key="fuzz", max_retries=0)


def config(root: Path) -> Any:
    base = fixture_config(root, session_log=SessionLogConfig(enabled=False), emergent=EMERGENT)
    return msgspec.structs.replace(base, toolsets=[*base.toolsets, "graph"])


def typed_tools() -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        app = build(config(Path(tmp)), register_all)
    return {name: entry.tool.inputSchema for name, entry in sorted(app.registry.tools.items())
            if entry.input_type is not None}


TOOLS = typed_tools()
tools = pytest.mark.parametrize("tool", sorted(TOOLS))


def call(root: Path, tool: str, arguments: Any) -> dict[str, Any]:
    """`tools/call` through a fresh memory server; also checks a ping still answers afterwards."""

    async def go() -> dict[str, Any]:
        async with open_memory_server(config(root), register_all) as client:
            client.app.dispatcher.runtime = InstantRuntime(client.app.config.worker_threads)
            with trio.fail_after(10):
                await client.initialize()
                reply = await client.request("tools/call", {"name": tool, "arguments": arguments})
                assert (await client.request("ping"))["result"] == {}, "the server stopped answering"
            assert client.app.supervisor.restarts == {}, "an actor crashed"
            check_frames(client)
            return reply  # type: ignore[no-any-return]

    return trio.run(go)


def invalid_input(reply: dict[str, Any]) -> dict[str, Any]:
    result = reply["result"]
    error = result["structuredContent"]["error"]
    assert result["isError"] is True and error["code"] == "INVALID_INPUT", reply
    return error["details"]  # type: ignore[no-any-return]


def properties(tool: str) -> dict[str, dict[str, Any]]:
    return TOOLS[tool].get("properties", {})  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- JSON values by type

JSON_OF: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "integer": st.integers(),
    "number": st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    "string": st.text(max_size=8),
    "array": st.lists(st.integers(), max_size=3),
    "object": st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
}


def allowed_types(prop: dict[str, Any]) -> set[str]:
    """The JSON types a property accepts; empty when it accepts any."""
    types: set[str] = set()
    t = prop.get("type")
    types.update(t if isinstance(t, list) else [t] if isinstance(t, str) else [])
    for key in ("anyOf", "oneOf"):
        for option in prop.get(key, []):
            types |= allowed_types(option) or set(JSON_OF)
    for value in [*prop.get("enum", []), *([prop["const"]] if "const" in prop else [])]:
        types.add(json_type(value))
    if "number" in types:
        types.add("integer")
    return types


def wrong_type_fields(tool: str) -> list[str]:
    return [name for name, prop in properties(tool).items() if allowed_types(prop)]


def range_fields(tool: str) -> list[str]:
    keys = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
            "minItems", "maxItems")
    return [name for name, prop in properties(tool).items() if any(k in prop for k in keys)]


def out_of_range(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    options: list[st.SearchStrategy[Any]] = []
    integer = prop.get("type") == "integer"
    number = st.integers() if integer else st.floats(allow_nan=False, allow_infinity=False)
    if "minimum" in prop or "exclusiveMinimum" in prop:
        lo = prop.get("minimum", prop.get("exclusiveMinimum"))
        options.append(number.filter(lambda v: v < lo if "minimum" in prop else v <= lo))
    if "maximum" in prop or "exclusiveMaximum" in prop:
        hi = prop.get("maximum", prop.get("exclusiveMaximum"))
        options.append(number.filter(lambda v: v > hi if "maximum" in prop else v >= hi))
    if "minLength" in prop and prop["minLength"] > 0:
        options.append(st.text(max_size=prop["minLength"] - 1))
    if "maxLength" in prop:
        options.append(st.text(min_size=prop["maxLength"] + 1, max_size=prop["maxLength"] + 4))
    if "maxItems" in prop:
        item = prop.get("items") or {}
        options.append(st.lists(from_schema(item) if item else st.integers(), min_size=prop["maxItems"] + 1,
                                max_size=prop["maxItems"] + 3))
    if "minItems" in prop and prop["minItems"] > 0:
        options.append(st.lists(st.nothing(), max_size=0))
    return st.one_of(options)


def enum_fields(tool: str) -> list[str]:
    return [name for name, prop in properties(tool).items() if "enum" in prop]


# ---------------------------------------------------------------------- the cases
# Each case takes schema-valid arguments and returns the arguments to send and a check of
# the reply. `applicable` lists the cases a tool's schema allows (no enum, no enum case).

Case = tuple[Any, Callable[[dict[str, Any]], None]]


def refused_as(field: str, rule: str | None = None) -> Callable[[dict[str, Any]], None]:
    def check(reply: dict[str, Any]) -> None:
        details = invalid_input(reply)
        assert details["field"] == field, details
        if rule is not None:
            assert details["rule"] == rule, details

    return check


def accepted(tool: str) -> Callable[[dict[str, Any]], None]:
    def check(reply: dict[str, Any]) -> None:
        # A JSON-RPC error is allowed (e.g. -32021: the memory client declares no sampling),
        # but never the one for bad arguments.
        assert reply.get("error", {}).get("code") != -32602, reply
        content = reply.get("result", {}).get("structuredContent") or {}
        assert content.get("error", {}).get("code") != "INVALID_INPUT", content
        if content.get("success") and OUTPUT_SCHEMAS.get(tool):
            jsonschema.validate(content, OUTPUT_SCHEMAS[tool])

    return check


def case_valid(tool: str, args: dict[str, Any], data: st.DataObject) -> Case:
    return args, accepted(tool)


def case_missing(tool: str, args: dict[str, Any], data: st.DataObject) -> Case:
    field = data.draw(st.sampled_from(TOOLS[tool]["required"]), label="dropped")
    del args[field]
    return args, refused_as(field, "required")


def case_wrong_type(tool: str, args: dict[str, Any], data: st.DataObject) -> Case:
    field = data.draw(st.sampled_from(wrong_type_fields(tool)), label="field")
    wrong = sorted(set(JSON_OF) - allowed_types(properties(tool)[field]))
    args[field] = data.draw(st.sampled_from(wrong).flatmap(JSON_OF.__getitem__), label="value")
    return args, refused_as(field)


def case_enum(tool: str, args: dict[str, Any], data: st.DataObject) -> Case:
    field = data.draw(st.sampled_from(enum_fields(tool)), label="field")
    valid = properties(tool)[field]["enum"]
    kinds = sorted({json_type(v) for v in valid})
    args[field] = data.draw(st.sampled_from(kinds).flatmap(JSON_OF.__getitem__).filter(lambda v: v not in valid),
                            label="value")

    def check(reply: dict[str, Any]) -> None:
        refused_as(field, "enum")(reply)
        assert invalid_input(reply)["valid"] == valid

    return args, check


def case_range(tool: str, args: dict[str, Any], data: st.DataObject) -> Case:
    field = data.draw(st.sampled_from(range_fields(tool)), label="field")
    args[field] = data.draw(out_of_range(properties(tool)[field]), label="value")
    return args, refused_as(field, "range")


def case_unknown(tool: str, args: dict[str, Any], data: st.DataObject) -> Case:
    known = set(properties(tool))
    extra = data.draw(st.text(max_size=12).filter(lambda k: k not in known), label="extra")
    args[extra] = data.draw(st.one_of(*JSON_OF.values()), label="value")
    return args, refused_as(extra, "unknown")


def case_not_object(tool: str, args: dict[str, Any], data: st.DataObject) -> Case:
    value = data.draw(st.one_of(st.booleans(), st.integers(), st.text(max_size=5),
                                st.lists(st.integers(), max_size=2)), label="arguments")

    def check(reply: dict[str, Any]) -> None:  # refused by the protocol layer or the tool
        assert "error" in reply or invalid_input(reply)["expected"] == "object", reply

    return value, check


CASES: dict[str, Callable[[str, dict[str, Any], st.DataObject], Case]] = {
    "valid": case_valid, "missing": case_missing, "wrong_type": case_wrong_type, "enum": case_enum,
    "range": case_range, "unknown": case_unknown, "not_object": case_not_object}


def applicable(tool: str) -> list[str]:
    schema = TOOLS[tool]
    return [kind for kind, ok in (
        ("valid", True), ("missing", bool(schema.get("required"))), ("wrong_type", bool(wrong_type_fields(tool))),
        ("enum", bool(enum_fields(tool))), ("range", bool(range_fields(tool))),
        ("unknown", schema.get("additionalProperties") is False), ("not_object", True)) if ok]


def output_schemas() -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            async with open_memory_server(config(Path(tmp)), register_all) as client:
                with trio.fail_after(10):
                    await client.initialize()
                    listed = await client.request("tools/list")
        return {t["name"]: t.get("outputSchema") for t in listed["result"]["tools"]}

    return trio.run(go)


OUTPUT_SCHEMAS = output_schemas()
# A budget shared by every tool, so the default run stays short however many tools there are;
# the fuzz profile (SPECACTOR_FUZZ=1) raises it with its max_examples.
PER_TOOL = max(8, settings.default.max_examples * 8 // len(TOOLS))


@tools
def test_arguments_are_accepted_when_valid_and_refused_naming_the_field_when_not(tool: str,
                                                                                  tmp_path: Path) -> None:
    """Valid: never INVALID_INPUT (and a success fits the outputSchema). A dropped required field,
    a wrong JSON type, a value outside an enum or a bound, an unknown field: INVALID_INPUT whose
    details.field names it. Arguments that are no object: refused. After each: ping answers."""
    kinds = applicable(tool)

    @settings(max_examples=PER_TOOL)
    @given(kind=st.sampled_from(kinds), arguments=from_schema(TOOLS[tool]), data=st.data())
    def check(kind: str, arguments: dict[str, Any], data: st.DataObject) -> None:
        sent, expect = CASES[kind](tool, dict(arguments), data)
        expect(call(tmp_path, tool, sent))

    check()


def test_every_kind_of_case_is_exercised_by_some_tool() -> None:
    assert {kind for tool in TOOLS for kind in applicable(tool)} == set(CASES)


def test_a_result_json_cannot_carry_is_refused_not_sent_as_null(tmp_path: Path) -> None:
    async def go() -> tuple[Any, Any]:
        async with open_memory_server(config(tmp_path), register_all) as client:
            with trio.fail_after(10):
                await client.initialize()
                listed = await client.request("tools/list")
                reply = await client.request("tools/call", {"name": "add", "arguments": {"a": 1e308, "b": 1e308}})
        schema = next(t for t in listed["result"]["tools"] if t["name"] == "add")["outputSchema"]
        return reply["result"], schema

    result, schema = trio.run(go)
    assert math.isinf(1e308 + 1e308)
    jsonschema.validate(result["structuredContent"], schema)  # success or error, it fits the envelope
    if result.get("isError"):  # refusing the overflow is the right answer: JSON has no infinity
        assert result["structuredContent"]["error"]["code"] == "INTERNAL"
