"""The stateless era (2026-07-28): server/discover, the per-request `_meta` envelope, result
fields (resultType, serverInfo, cache hints), era errors, per-request logging and capabilities."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from specactor import SERVER_NAME, __version__
from specactor.protocol.versions import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
)
from specactor.testing import MemoryClient
from specactor.wire.mcp import CallToolResult, TextContent, Tool
from tests.mcp_schema import validate
from tests.protocol.support import serve, settle

MODERN = "2026-07-28"
SERVER_INFO = {"name": SERVER_NAME, "version": __version__}

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("server/discover", {}),
    ("tools/list", {}),
    ("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
    ("tools/call", {"name": "test_error_handling", "arguments": {}}),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("resources/read", {"uri": "test://static-text"}),
    ("resources/read", {"uri": "test://template/7/data"}),
    ("prompts/list", {}),
    ("prompts/get", {"name": "test_simple_prompt"}),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                             "argument": {"name": "arg1", "value": "he"}}),
]
CACHEABLE = {"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list",
             "resources/read"}


def envelope(**extra: Any) -> dict[str, Any]:
    return {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}, **extra}


def logs(client: MemoryClient) -> list[dict[str, Any]]:
    return [n for n in client.notifications if n["method"] == "notifications/message"]


# ------------------------------------------------------------------ server/discover


async def test_discover_lists_versions_capabilities_and_instructions(memory_client: MemoryClient) -> None:
    reply = await memory_client.modern("server/discover")
    validate(MODERN, reply, "server/discover")
    result = reply["result"]
    assert MODERN in result["supportedVersions"]
    assert set(result["capabilities"]) >= {"tools", "resources", "prompts", "completions"}
    assert result["resultType"] == "complete"
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")
    assert isinstance(result["instructions"], str) and result["instructions"]
    assert memory_client.conn.session.era == "modern"


async def test_discover_advertises_what_listen_streams_deliver(memory_client: MemoryClient) -> None:
    caps = (await memory_client.modern("server/discover"))["result"]["capabilities"]
    assert caps["tools"]["listChanged"] and caps["prompts"]["listChanged"]
    assert caps["resources"] == {"subscribe": True, "listChanged": True}


async def test_discover_declares_logging_because_modern_requests_can_receive_log_messages(
        memory_client: MemoryClient) -> None:
    await memory_client.modern("tools/call", {"name": "test_tool_with_logging", "arguments": {},
                                              "_meta": {META_LOG_LEVEL: "info"}})
    assert logs(memory_client), "the server emitted no log messages"
    caps = (await memory_client.modern("server/discover"))["result"]["capabilities"]
    assert "logging" in caps


# ------------------------------------------------------------------ result fields


@pytest.mark.parametrize(("method", "params"), CALLS, ids=[f"{m}-{i}" for i, (m, _) in enumerate(CALLS)])
async def test_every_modern_result_has_result_type_and_server_info(
        memory_client: MemoryClient, method: str, params: dict[str, Any]) -> None:
    reply = await memory_client.modern(method, params)
    validate(MODERN, reply, method)
    assert reply["result"]["resultType"] == "complete"
    assert reply["result"]["_meta"][META_SERVER_INFO] == SERVER_INFO


@pytest.mark.parametrize("method", sorted(CACHEABLE))
async def test_cacheable_results_carry_ttl_and_cache_scope(memory_client: MemoryClient, method: str) -> None:
    params = next(p for m, p in CALLS if m == method)
    result = (await memory_client.modern(method, params))["result"]
    assert isinstance(result["ttlMs"], int) and not isinstance(result["ttlMs"], bool) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")


async def test_legacy_results_carry_no_modern_fields(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    for method, params in CALLS[1:]:
        result = (await memory_client.request(method, params))["result"]
        assert not {"resultType", "ttlMs", "cacheScope"} & set(result), method
        assert META_SERVER_INFO not in result.get("_meta", {}), method


async def test_a_handlers_own_result_meta_survives_the_server_info_stamp(tmp_path: Path) -> None:
    def register(registry: Any) -> None:
        async def traced(raw: Any, ctx: Any) -> CallToolResult:
            return CallToolResult(content=[TextContent(text="ok")], meta={"com.example/trace": "t-1"})

        registry.add_tool(Tool(name="traced", description="d", inputSchema={"type": "object"}), traced,
                          toolset="fixtures")

    async with serve(tmp_path, register) as client:
        meta = (await client.modern("tools/call", {"name": "traced", "arguments": {}}))["result"]["_meta"]
        assert meta[META_SERVER_INFO] == SERVER_INFO
        assert meta.get("com.example/trace") == "t-1"


# ------------------------------------------------------------------ the envelope


async def test_a_modern_request_without_meta_is_invalid_params(memory_client: MemoryClient) -> None:
    await memory_client.modern("server/discover")
    reply = await memory_client.request("tools/list", {})
    assert reply["error"]["code"] == -32602
    assert META_PROTOCOL_VERSION in reply["error"]["message"]


async def test_a_modern_request_without_the_protocol_version_is_invalid_params(memory_client: MemoryClient) -> None:
    await memory_client.modern("server/discover")
    reply = await memory_client.request("tools/list", {"_meta": {META_CLIENT_CAPABILITIES: {}}})
    assert reply["error"]["code"] == -32602


@pytest.mark.parametrize("caps", [None, "sampling", ["sampling"], 1])
async def test_a_request_without_client_capabilities_object_is_invalid_params(
        memory_client: MemoryClient, caps: Any) -> None:
    meta: dict[str, Any] = {META_PROTOCOL_VERSION: MODERN}
    if caps is not None:
        meta[META_CLIENT_CAPABILITIES] = caps
    reply = await memory_client.request("tools/list", {"_meta": meta})
    assert reply["error"]["code"] == -32602
    assert META_CLIENT_CAPABILITIES in reply["error"]["message"]


async def test_client_info_is_optional(memory_client: MemoryClient) -> None:
    reply = await memory_client.request("tools/list", {"_meta": envelope()})
    assert reply["result"]["tools"]


@pytest.mark.parametrize("requested", ["2099-01-01", "2025-11-25", "1900-01-01"])
async def test_an_unsupported_version_is_answered_with_supported_and_requested(
        memory_client: MemoryClient, requested: str) -> None:
    reply = await memory_client.modern("tools/list", version=requested)
    error = reply["error"]
    assert error["code"] == -32022
    assert error["data"]["requested"] == requested
    assert MODERN in error["data"]["supported"]
    assert all(isinstance(v, str) for v in error["data"]["supported"])


async def test_initialize_on_a_modern_connection_is_unsupported_protocol_version(memory_client: MemoryClient) -> None:
    await memory_client.modern("server/discover")
    reply = await memory_client.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    assert reply["error"]["code"] == -32022
    assert reply["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
    assert memory_client.conn.session.era == "modern"


@pytest.mark.parametrize("meta", [{META_PROTOCOL_VERSION: "2099-01-01", META_CLIENT_CAPABILITIES: {}},
                                  {META_PROTOCOL_VERSION: MODERN}], ids=["unsupported-version", "no-capabilities"])
async def test_a_rejected_modern_probe_does_not_lock_the_connection(
        memory_client: MemoryClient, meta: dict[str, Any]) -> None:
    probe = await memory_client.request("server/discover", {"_meta": meta})
    assert probe["error"]["code"] in (-32022, -32602)
    # The SDK's auto mode falls back to initialize when -32022 lists handshake versions.
    reply = await memory_client.initialize("2025-11-25")
    assert "result" in reply, f"the fallback initialize was refused: {reply}"
    assert reply["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"])
async def test_legacy_only_methods_are_unknown_in_the_modern_era(memory_client: MemoryClient, method: str) -> None:
    params = {"level": "info"} if method == "logging/setLevel" else {"uri": "test://watched-resource"}
    reply = await memory_client.modern(method, params if method != "ping" else {})
    assert reply["error"]["code"] == -32601


async def test_a_plain_ping_on_a_modern_connection_is_method_not_found(memory_client: MemoryClient) -> None:
    await memory_client.modern("server/discover")
    assert (await memory_client.request("ping"))["error"]["code"] == -32601


async def test_discover_without_the_envelope_on_a_new_connection_is_invalid_params(
        memory_client: MemoryClient) -> None:
    reply = await memory_client.request("server/discover", {})
    assert reply["error"]["code"] == -32602
    assert memory_client.conn.session.era == "new"


# ------------------------------------------------------------------ errors per era


async def test_reading_an_unknown_uri_is_invalid_params_with_the_uri(memory_client: MemoryClient) -> None:
    uri = "test://nonexistent-resource-for-conformance-testing"
    reply = await memory_client.modern("resources/read", {"uri": uri})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["uri"] == uri


async def test_legacy_reading_an_unknown_uri_is_resource_not_found_with_the_uri(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    uri = "test://nonexistent-resource-for-conformance-testing"
    reply = await memory_client.request("resources/read", {"uri": uri})
    assert reply["error"]["code"] == -32002
    assert reply["error"]["data"]["uri"] == uri


async def test_a_tool_needing_sampling_without_the_capability_is_missing_capability(
        memory_client: MemoryClient) -> None:
    reply = await memory_client.modern("tools/call", {"name": "test_missing_capability", "arguments": {}})
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"]["requiredCapabilities"] == {"sampling": {}}


async def test_capabilities_are_per_request_and_never_remembered(memory_client: MemoryClient) -> None:
    call = {"name": "test_missing_capability", "arguments": {}}
    ok = await memory_client.modern("tools/call", call, capabilities={"sampling": {}})
    assert ok["result"]["content"][0]["text"] == "the client declared sampling"
    again = await memory_client.modern("tools/call", call)
    assert again["error"]["code"] == -32021


async def test_a_modern_tool_needing_sampling_never_sends_a_server_request(tmp_path: Path) -> None:
    async with serve(tmp_path) as client:
        await client.send({"jsonrpc": "2.0", "id": "s", "method": "tools/call",
                           "params": {"name": "test_sampling", "arguments": {"prompt": "hi"},
                                      "_meta": envelope(**{META_CLIENT_CAPABILITIES: {"sampling": {}}})}})
        with trio.fail_after(5):
            first = await client.receive()
        assert not ("method" in first and "id" in first), f"server sent a request: {first}"


# ------------------------------------------------------------------ logging and progress


async def test_no_log_messages_without_a_log_level(memory_client: MemoryClient) -> None:
    await memory_client.modern("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
    await settle(memory_client)
    assert logs(memory_client) == []


async def test_log_messages_follow_the_requests_log_level(memory_client: MemoryClient) -> None:
    await memory_client.modern("tools/call", {"name": "test_tool_with_logging", "arguments": {},
                                              "_meta": {META_LOG_LEVEL: "info"}})
    assert [n["params"]["data"] for n in logs(memory_client)] == [
        "Tool execution started", "Tool processing data", "Tool execution completed"]
    await memory_client.modern("tools/call", {"name": "test_tool_with_logging", "arguments": {},
                                              "_meta": {META_LOG_LEVEL: "error"}})
    await memory_client.modern("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
    await settle(memory_client)
    assert len(logs(memory_client)) == 3


async def test_an_invalid_log_level_is_invalid_params(memory_client: MemoryClient) -> None:
    reply = await memory_client.modern("tools/list", {"_meta": {META_LOG_LEVEL: "loud"}})
    assert reply["error"]["code"] == -32602


async def test_modern_progress_uses_the_requests_token(memory_client: MemoryClient) -> None:
    reply = await memory_client.modern("tools/call", {"name": "test_tool_with_progress", "arguments": {},
                                                      "_meta": {"progressToken": "p-9"}})
    assert reply["result"]["resultType"] == "complete"
    progress = [n["params"] for n in memory_client.notifications if n["method"] == "notifications/progress"]
    assert [p["progress"] for p in progress] == [0, 50, 100]
    assert {p["progressToken"] for p in progress} == {"p-9"}
