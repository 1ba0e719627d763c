"""Server features: pagination, structured output, input validation, resources, prompts,
completion, and how handler failures (crashes, provider errors, rate limits) are reported."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import msgspec
import pytest

from specactor.protocol.errors import ProviderError, RateLimited, ToolError
from specactor.protocol.registry import Registry
from specactor.testing import MemoryClient
from specactor.testing.everything import PNG
from specactor.wire.arguments import ToolInput
from specactor.wire.mcp import CallToolResult, Tool
from tests.mcp_schema import validate
from tests.protocol.support import NO_SESSION_LOG, envelope, serve


class RangeIn(ToolInput):
    level: Literal["low", "high"]
    count: Annotated[int, msgspec.Meta(ge=1, le=100)]


class NoArgs(ToolInput):
    pass


class Attempts(msgspec.Struct):
    attempts: int


def extra_tools(calls: Counter[str]) -> Any:
    """Typed tools with an enum and a range, and tools that fail in each way; `calls` counts runs."""

    def register(registry: Registry) -> None:
        @registry.tool("typed_range", description="enum and range", input=RangeIn, output=Attempts,
                       toolset="fixtures")
        async def typed_range(args: RangeIn, ctx: Any) -> Attempts:
            return Attempts(args.count)

        @registry.tool("boom", description="crashes", input=NoArgs, output=Attempts, toolset="fixtures")
        async def boom(args: NoArgs, ctx: Any) -> Attempts:
            calls["boom"] += 1
            raise RuntimeError("secret-detail-4711 from /srv/private")

        async def raw_boom(raw: Any, ctx: Any) -> CallToolResult:
            raise KeyError("secret-detail-4712")

        registry.add_tool(Tool(name="raw_boom", description="crashes", inputSchema={"type": "object"}), raw_boom,
                          toolset="fixtures")

        @registry.tool("provider_down", description="always fails upstream", input=NoArgs, output=Attempts,
                       toolset="fixtures")
        async def provider_down(args: NoArgs, ctx: Any) -> Attempts:
            calls["provider"] += 1
            raise ProviderError("the upstream provider is unavailable", {"provider": "test"})

        @registry.tool("rate_limited_once", description="rate limited on the first try", input=NoArgs,
                       output=Attempts, toolset="fixtures")
        async def rate_limited_once(args: NoArgs, ctx: Any) -> Attempts:
            calls["rate"] += 1
            if calls["rate"] == 1:
                raise RateLimited("slow down", retry_after=0.01)
            return Attempts(calls["rate"])

        @registry.tool("rate_limited_long", description="asks for an hour", input=NoArgs, output=Attempts,
                       toolset="fixtures")
        async def rate_limited_long(args: NoArgs, ctx: Any) -> Attempts:
            calls["long"] += 1
            raise RateLimited("come back in an hour", retry_after=3600)

        @registry.tool("not_found", description="a plain tool error", input=NoArgs, output=Attempts,
                       toolset="fixtures")
        async def not_found(args: NoArgs, ctx: Any) -> Attempts:
            calls["not_found"] += 1
            raise ToolError("NOT_FOUND", "no such thing", {"id": "x"})

    return register


async def call(client: MemoryClient, name: str, arguments: Any = None) -> dict[str, Any]:
    return await client.request("tools/call", {"name": name, "arguments": arguments if arguments is not None else {}})


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["result"].get("isError") is True, reply
    body = envelope(reply)
    assert body["success"] is False
    return body["error"]


# ------------------------------------------------------------------ pagination


async def walk(client: MemoryClient, method: str, key: str) -> list[list[str]]:
    pages, cursor = [], None
    for _ in range(100):
        reply = await client.request(method, {"cursor": cursor} if cursor else {})
        validate("2025-11-25", reply, method)
        result = reply["result"]
        pages.append([item.get("name") or item.get("uriTemplate") for item in result[key]])
        cursor = result.get("nextCursor")
        if cursor is None:
            return pages
    raise AssertionError("pagination never ended")


@pytest.mark.parametrize(("method", "key"), [("tools/list", "tools"), ("prompts/list", "prompts"),
                                             ("resources/list", "resources")])
async def test_walking_every_page_yields_the_full_list_in_order(tmp_path: Path, method: str, key: str) -> None:
    async with serve(tmp_path) as client:
        await client.initialize()
        [full] = await walk(client, method, key)
    async with serve(tmp_path, page_size=2) as client:
        await client.initialize()
        pages = await walk(client, method, key)
        assert len(full) > 2 and all(len(p) == 2 for p in pages[:-1]) and 1 <= len(pages[-1]) <= 2
        assert [name for page in pages for name in page] == full
        assert await walk(client, method, key) == pages  # deterministic


@pytest.mark.parametrize("cursor", ["garbage!", "", base64.urlsafe_b64encode(b"prompts:2").decode(),
                                    base64.urlsafe_b64encode(b"tools:-2").decode(),
                                    base64.urlsafe_b64encode(b"tools:two").decode(), "\u00e9t\u00e9"])
async def test_an_invalid_cursor_is_invalid_params(tmp_path: Path, cursor: str) -> None:
    async with serve(tmp_path, page_size=2) as client:
        await client.initialize()
        reply = await client.request("tools/list", {"cursor": cursor})
        assert reply["error"]["code"] == -32602


# ------------------------------------------------------------------ structured output


@pytest.mark.parametrize(("name", "arguments"), [("echo", {"text": "h\u00e9llo \"q\""}), ("add", {"a": 1.5, "b": 2}),
                                                 ("add", {"a": "x", "b": 1}), ("typed_range", {"level": "low",
                                                                                               "count": 3})])
async def test_structured_content_conforms_to_the_output_schema_and_is_duplicated_as_text(
        tmp_path: Path, name: str, arguments: dict[str, Any]) -> None:
    async with serve(tmp_path, extra_tools(Counter())) as client:
        await client.initialize()
        tools = {t["name"]: t for t in (await client.request("tools/list"))["result"]["tools"]}
        schema = tools[name]["outputSchema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        reply = await call(client, name, arguments)
        validate("2025-11-25", reply, "tools/call")
        result = reply["result"]
        jsonschema.Draft202012Validator(schema).validate(result["structuredContent"])
        texts = [c for c in result["content"] if c["type"] == "text"]
        assert len(texts) == 1 and json.loads(texts[0]["text"]) == result["structuredContent"]


async def test_structured_content_conforms_even_when_a_float_result_overflows(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    tools = {t["name"]: t for t in (await memory_client.request("tools/list"))["result"]["tools"]}
    reply = await call(memory_client, "add", {"a": 1e308, "b": 1e308})
    jsonschema.Draft202012Validator(tools["add"]["outputSchema"]).validate(reply["result"]["structuredContent"])


# ------------------------------------------------------------------ input validation


@pytest.mark.parametrize(("name", "arguments", "details"), [
    ("add", {"a": 1}, {"field": "b", "rule": "required"}),
    ("echo", {}, {"field": "text", "rule": "required"}),
    ("add", {"a": "one", "b": 2}, {"field": "a", "rule": "type", "expected": "number", "actual": "string"}),
    ("echo", {"text": 5}, {"field": "text", "rule": "type", "expected": "string", "actual": "integer"}),
    ("echo", {"text": None}, {"field": "text", "rule": "type", "expected": "string", "actual": "null"}),
    ("add", {"a": True, "b": 2}, {"field": "a", "rule": "type", "expected": "number", "actual": "boolean"}),
    ("echo", {"text": "x", "loud": True}, {"field": "loud", "rule": "unknown", "valid": ["text"]}),
    ("echo", [1, 2], {"field": "", "expected": "object", "actual": "array"}),
    ("typed_range", {"level": "medium", "count": 5}, {"field": "level", "rule": "enum", "valid": ["high", "low"]}),
    ("typed_range", {"level": "low", "count": 0}, {"field": "count", "rule": "range", "min": 1, "max": 100}),
    ("typed_range", {"level": "low", "count": 101}, {"field": "count", "rule": "range", "min": 1, "max": 100}),
    ("typed_range", {"level": "low", "count": 2.5}, {"field": "count", "rule": "type", "expected": "integer"}),
], ids=["missing-b", "missing-text", "type-string", "type-integer", "type-null", "type-boolean", "unknown-field",
        "not-an-object", "enum", "below-min", "above-max", "not-integer"])
async def test_invalid_arguments_are_an_invalid_input_tool_result(
        tmp_path: Path, name: str, arguments: Any, details: dict[str, Any]) -> None:
    async with serve(tmp_path, extra_tools(Counter())) as client:
        await client.initialize()
        reply = await call(client, name, arguments)
        assert "error" not in reply  # SEP-1303: a tool result, not a protocol error
        error = error_of(reply)
        assert error["code"] == "INVALID_INPUT" and error["retryable"] is False
        assert error["details"].items() >= details.items(), error
        assert details["field"] in error["message"] if details["field"] else error["message"]


async def test_calling_an_unknown_tool_is_invalid_params(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    reply = await call(memory_client, "no_such_tool")
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"tool": "no_such_tool"}


# ------------------------------------------------------------------ handler failures


@pytest.mark.parametrize("name", ["boom", "raw_boom"])
async def test_a_crashing_handler_is_an_internal_tool_error_without_a_traceback(tmp_path: Path, name: str) -> None:
    async with serve(tmp_path, extra_tools(Counter())) as client:
        await client.initialize()
        reply = await call(client, name)
        error = error_of(reply)
        assert error["code"] == "INTERNAL" and error["retryable"] is False
        text = json.dumps(reply)
        assert "Traceback" not in text and "secret-detail" not in text and ".py" not in text
        assert envelope(await call(client, "echo", {"text": "still here"}))["data"] == {"text": "still here"}


async def test_a_provider_error_is_retried_three_times_then_reported_retryable(
        tmp_path: Path, autojump_clock: Any) -> None:
    calls: Counter[str] = Counter()
    async with serve(tmp_path, extra_tools(calls), session_log=NO_SESSION_LOG) as client:
        await client.initialize()
        error = error_of(await call(client, "provider_down"))
        assert calls["provider"] == 4  # the first try and three retries
        assert error["code"] == "PROVIDER_ERROR" and error["retryable"] is True
        assert error["details"] == {"provider": "test"}


async def test_a_rate_limit_is_waited_out_and_the_call_then_succeeds(tmp_path: Path, autojump_clock: Any) -> None:
    calls: Counter[str] = Counter()
    async with serve(tmp_path, extra_tools(calls), session_log=NO_SESSION_LOG) as client:
        await client.initialize()
        reply = await call(client, "rate_limited_once")
        assert "isError" not in reply["result"]
        assert envelope(reply)["data"] == {"attempts": 2}
        assert calls["rate"] == 2


async def test_a_rate_limit_longer_than_the_cap_is_reported_at_once(tmp_path: Path, autojump_clock: Any) -> None:
    calls: Counter[str] = Counter()
    async with serve(tmp_path, extra_tools(calls), session_log=NO_SESSION_LOG) as client:
        await client.initialize()
        error = error_of(await call(client, "rate_limited_long"))
        assert calls["long"] == 1
        assert error["code"] == "RATE_LIMITED" and error["retryable"] is True
        assert error["details"]["retryAfter"] == 3600


async def test_other_tool_errors_are_not_retried(tmp_path: Path) -> None:
    calls: Counter[str] = Counter()
    async with serve(tmp_path, extra_tools(calls)) as client:
        await client.initialize()
        error = error_of(await call(client, "not_found"))
        assert calls["not_found"] == 1
        assert error == {"code": "NOT_FOUND", "message": "no such thing", "retryable": False, "details": {"id": "x"}}


# ------------------------------------------------------------------ resources


async def test_resources_and_templates_are_listed(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    reply = await memory_client.request("resources/list")
    validate("2025-11-25", reply, "resources/list")
    uris = {r["uri"]: r for r in reply["result"]["resources"]}
    assert {"test://static-text", "test://static-binary", "test://watched-resource"} <= set(uris)
    assert uris["test://static-binary"]["mimeType"] == "image/png"
    templates = (await memory_client.request("resources/templates/list"))["result"]["resourceTemplates"]
    assert any(t["uriTemplate"] == "test://template/{id}/data" and t["mimeType"] == "application/json"
               for t in templates)


async def test_reading_text_blob_and_templated_resources(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    text = (await memory_client.request("resources/read", {"uri": "test://static-text"}))["result"]["contents"]
    assert text == [{"uri": "test://static-text", "mimeType": "text/plain",
                     "text": "This is the content of the static text resource."}]
    [blob] = (await memory_client.request("resources/read", {"uri": "test://static-binary"}))["result"]["contents"]
    assert blob["mimeType"] == "image/png" and base64.b64decode(blob["blob"]) == base64.b64decode(PNG)
    [data] = (await memory_client.request("resources/read", {"uri": "test://template/123/data"}))["result"]["contents"]
    assert json.loads(data["text"]) == {"id": "123", "templateTest": True, "data": "Data for ID: 123"}


# ------------------------------------------------------------------ prompts and completion


async def test_prompts_are_listed_with_their_arguments(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    reply = await memory_client.request("prompts/list")
    validate("2025-11-25", reply, "prompts/list")
    prompts = {p["name"]: p for p in reply["result"]["prompts"]}
    assert [a["name"] for a in prompts["test_prompt_with_arguments"]["arguments"]] == ["arg1", "arg2"]
    assert all(a["required"] for a in prompts["test_prompt_with_arguments"]["arguments"])


@pytest.mark.parametrize(("name", "arguments", "texts"), [
    ("test_simple_prompt", None, ["This is a simple prompt for testing."]),
    ("test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"},
     ["Prompt with arguments: arg1='hello', arg2='world'"]),
    ("test_prompt_with_image", None, ["Please analyze the image above."]),
    ("test_prompt_with_embedded_resource", {"resourceUri": "test://r"},
     ["Please process the embedded resource above."]),
])
async def test_prompts_get_renders_messages(memory_client: MemoryClient, name: str, arguments: Any,
                                            texts: list[str]) -> None:
    await memory_client.initialize()
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    reply = await memory_client.request("prompts/get", params)
    validate("2025-11-25", reply, "prompts/get")
    got = [m["content"]["text"] for m in reply["result"]["messages"] if m["content"]["type"] == "text"]
    assert got == texts


@pytest.mark.parametrize(("params", "fragment"), [
    ({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}}, "arg2"),
    ({"name": "no_such_prompt"}, "no_such_prompt"),
    ({"name": "test_prompt_with_arguments", "arguments": {"arg1": 1, "arg2": "b"}}, "arguments"),
])
async def test_bad_prompt_requests_are_invalid_params(memory_client: MemoryClient, params: dict[str, Any],
                                                      fragment: str) -> None:
    await memory_client.initialize()
    reply = await memory_client.request("prompts/get", params)
    assert reply["error"]["code"] == -32602 and fragment in reply["error"]["message"]


@pytest.mark.parametrize(("ref", "argument", "values"), [
    ({"type": "ref/prompt", "name": "test_prompt_with_arguments"}, {"name": "arg1", "value": "he"}, ["hello", "help"]),
    ({"type": "ref/prompt", "name": "test_prompt_with_arguments"}, {"name": "arg2", "value": ""}, []),
    ({"type": "ref/resource", "uri": "test://template/{id}/data"}, {"name": "id", "value": "4"}, ["456"]),
    ({"type": "ref/resource", "uri": "test://template/{id}/data"}, {"name": "id", "value": ""}, ["123", "456", "789"]),
])
async def test_completion_suggests_values(memory_client: MemoryClient, ref: dict[str, Any],
                                          argument: dict[str, Any], values: list[str]) -> None:
    await memory_client.initialize()
    reply = await memory_client.request("completion/complete", {"ref": ref, "argument": argument})
    validate("2025-11-25", reply, "completion/complete")
    completion = reply["result"]["completion"]
    assert completion["values"] == values and completion["total"] == len(values) and completion["hasMore"] is False


@pytest.mark.parametrize("ref", [{"type": "ref/prompt", "name": "nope"}, {"type": "ref/resource", "uri": "test://x/{y}"},
                                 {"type": "ref/tool", "name": "echo"}])
async def test_completion_for_an_unknown_reference_is_invalid_params(memory_client: MemoryClient,
                                                                     ref: dict[str, Any]) -> None:
    await memory_client.initialize()
    reply = await memory_client.request("completion/complete", {"ref": ref, "argument": {"name": "a", "value": ""}})
    assert reply["error"]["code"] == -32602


# ------------------------------------------------------------------ server-to-client requests (legacy)


async def test_legacy_sampling_round_trips_through_the_client(memory_client: MemoryClient) -> None:
    await memory_client.initialize(capabilities={"sampling": {}})
    await memory_client.send({"jsonrpc": "2.0", "id": "s", "method": "tools/call",
                              "params": {"name": "test_sampling", "arguments": {"prompt": "Why?"}}})
    request = await memory_client.receive()
    assert request["method"] == "sampling/createMessage" and request["params"]["maxTokens"] == 100
    assert request["params"]["messages"][0]["content"]["text"] == "Why?"
    await memory_client.send({"jsonrpc": "2.0", "id": request["id"],
                              "result": {"role": "assistant", "model": "m",
                                         "content": {"type": "text", "text": "Because."}}})
    reply = await memory_client.reply_for("s")
    assert reply["result"]["content"][0]["text"] == "LLM response: Because."
