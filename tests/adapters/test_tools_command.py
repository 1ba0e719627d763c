"""`specactor tools --format …`: the definitions validate as draft-07 and list what the server lists."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
import structlog
import trio

from specactor import logsetup
from specactor.adapters.definitions import DRAFT_07, draft07
from specactor.adapters.tools_command import tools_main
from specactor.config import SessionLogConfig, load
from specactor.testing import open_memory_server


@pytest.fixture(autouse=True)
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in [n for n in __import__("os").environ if n.startswith("SPECACTOR_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SPECACTOR_MEMORY_DB", str(tmp_path / "data" / "memory.db"))
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    yield tmp_path
    # the command sets the process's logging up (JSON on stderr), as a command should; the tests
    # after this one find logging as the suite has it
    logsetup._pending = None  # asked for by the command, not applied yet: not for the next test
    structlog.reset_defaults()
    root.setLevel(level)
    root.handlers[:] = handlers


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert tools_main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def closed(schema: Any) -> bool:
    """Whether every object schema with properties refuses others."""
    if isinstance(schema, list):
        return all(closed(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if "properties" in schema and schema.get("additionalProperties") is not False:
        return False
    return all(closed(v) for k, v in schema.items() if k not in ("enum", "const", "default", "examples"))


async def test_json_schema_definitions_are_closed_draft_07_documents_of_every_tool_the_server_lists(
        workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = run(capsys, "--format", "json-schema")
    config = msgspec.structs.replace(load({"root": str(workspace)}), session_log=SessionLogConfig(enabled=False))
    async with open_memory_server(config) as client:
        await client.initialize()
        with trio.fail_after(30):
            listed = (await client.request("tools/list"))["result"]["tools"]
    assert [d["title"] for d in docs] == [t["name"] for t in listed]
    assert {"memory_add", "knowledge_check", "sync_now", "spec_create", "validate"} <= {d["title"] for d in docs}
    meta = jsonschema.Draft7Validator(jsonschema.Draft7Validator.META_SCHEMA)
    for doc in docs:
        meta.validate(doc)
        assert doc["$schema"] == DRAFT_07 and doc["type"] == "object" and doc["description"]
        assert closed(doc)
    add = next(d for d in docs if d["title"] == "memory_add")
    jsonschema.Draft7Validator(add).validate({"content": "We ship on Fridays"})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(add).validate({"content": "x", "colour": "blue"})


def test_openai_definitions_are_functions_with_draft_07_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    defs = run(capsys, "--format", "openai", "--toolsets", "memory")
    assert [d["function"]["name"] for d in defs] == ["memory_add", "memory_search", "memory_delete", "knowledge_query",
                                                     "knowledge_show", "knowledge_check", "sync_now", "sync_status"]
    for d in defs:
        assert set(d) == {"type", "function"} and d["type"] == "function"
        assert set(d["function"]) == {"name", "description", "parameters"}
        params = d["function"]["parameters"]
        jsonschema.Draft7Validator.check_schema(params)
        assert params["type"] == "object" and params["additionalProperties"] is False and "$schema" not in params


def test_langchain_definitions_carry_structured_tool_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    defs = run(capsys, "--format", "langchain", "--toolsets", "airsspec")
    assert defs and all(set(d) == {"name", "description", "args_schema"} for d in defs)
    assert "memory_add" not in {d["name"] for d in defs} and "spec_create" in {d["name"] for d in defs}
    for d in defs:
        jsonschema.Draft7Validator.check_schema(d["args_schema"])


def test_an_unknown_toolset_is_one_line_on_stderr_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert tools_main(["--toolsets", "nope"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "unknown toolset 'nope'" in out.err and out.err.count("\n") == 1


def test_draft07_renames_defs_and_closes_objects_but_not_all_of_branches() -> None:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
              "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"allOf": [{"properties": {"x": {}}}]}},
              "$defs": {"A": {"type": "object", "properties": {"n": {"type": "integer", "default": {"k": 1}}}}}}
    out = draft07(schema)
    assert out["properties"]["a"] == {"$ref": "#/definitions/A"} and "$defs" not in out
    assert out["definitions"]["A"]["additionalProperties"] is False and out["additionalProperties"] is False
    assert "additionalProperties" not in out["properties"]["b"]["allOf"][0]
    assert out["definitions"]["A"]["properties"]["n"]["default"] == {"k": 1} and "$defs" in schema
