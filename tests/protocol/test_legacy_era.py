"""The handshake era (2025-03-26, 2025-06-18, 2025-11-25): initialize, session state, ping,
logging, progress, subscriptions, cancellation, batches and list_changed."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import trio

from specactor import SERVER_NAME, __version__
from specactor.protocol.versions import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from specactor.testing import MemoryClient
from tests.mcp_schema import validate
from tests.protocol.stdio_support import StdioServer
from tests.protocol.support import (
    NO_SESSION_LOG,
    envelope,
    serve,
    settle,
    wait_for_notification,
)

LEGACY = ["2025-03-26", "2025-06-18", "2025-11-25"]
ENVELOPE = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
LOG_TEXTS = ["Tool execution started", "Tool processing data", "Tool execution completed"]


def messages(client: MemoryClient, method: str) -> list[dict]:
    return [n for n in client.notifications if n["method"] == method]


# ------------------------------------------------------------------ initialize


@pytest.mark.parametrize("version", LEGACY)
async def test_initialize_answers_with_the_requested_supported_version(tmp_path: Path, version: str) -> None:
    async with serve(tmp_path) as client:
        reply = await client.initialize(version)
        validate(version, reply, "initialize")
        assert reply["result"]["protocolVersion"] == version
        assert client.conn.session.era == "legacy"


@pytest.mark.parametrize("requested", ["2024-11-05", "1900-01-01", "2026-07-28", "not-a-version"])
async def test_initialize_answers_an_unknown_version_with_the_latest_legacy_version(
        memory_client: MemoryClient, requested: str) -> None:
    reply = await memory_client.initialize(requested)
    assert reply["result"]["protocolVersion"] == "2025-11-25"


async def test_initialize_reports_server_info_capabilities_and_instructions(memory_client: MemoryClient) -> None:
    result = (await memory_client.initialize())["result"]
    assert result["serverInfo"] == {"name": SERVER_NAME, "version": __version__}
    caps = result["capabilities"]
    assert caps["tools"] == {"listChanged": True}
    assert caps["resources"] == {"subscribe": True, "listChanged": True}
    assert caps["prompts"] == {"listChanged": True}
    assert "logging" in caps and "completions" in caps
    assert isinstance(result["instructions"], str) and result["instructions"]
    assert "resultType" not in result and "_meta" not in result


async def test_initialize_without_a_protocol_version_is_invalid_params(memory_client: MemoryClient) -> None:
    reply = await memory_client.request("initialize", {"capabilities": {}})
    assert reply["error"]["code"] == -32602


# ------------------------------------------------------------------ session rules


async def test_ping_answers_an_empty_result_before_and_after_initialize(memory_client: MemoryClient) -> None:
    assert (await memory_client.request("ping"))["result"] == {}
    await memory_client.initialize()
    reply = await memory_client.request("ping")
    validate("2025-11-25", reply, "ping")
    assert reply["result"] == {}


@pytest.mark.parametrize("method", ["tools/list", "tools/call", "resources/list", "prompts/list", "logging/setLevel"])
async def test_a_request_before_initialize_is_an_invalid_request(memory_client: MemoryClient, method: str) -> None:
    params = {"name": "echo", "arguments": {"text": "x"}} if method == "tools/call" else {}
    if method == "logging/setLevel":
        params = {"level": "info"}
    reply = await memory_client.request(method, params)
    assert reply["error"]["code"] == -32600
    assert reply["id"] is not None


@pytest.mark.parametrize("method", ["tools/list", "server/discover"])
async def test_an_enveloped_2026_request_on_a_legacy_session_is_an_invalid_request(
        memory_client: MemoryClient, method: str) -> None:
    await memory_client.initialize()
    reply = await memory_client.request(method, {"_meta": ENVELOPE})
    assert reply["error"]["code"] == -32600
    assert memory_client.conn.session.era == "legacy"
    assert (await memory_client.request("tools/list"))["result"]["tools"]


# ------------------------------------------------------------------ logging and progress


async def test_tool_logging_arrives_at_the_default_info_level(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    reply = await memory_client.request("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
    assert "isError" not in reply["result"]
    logs = messages(memory_client, "notifications/message")
    assert [n["params"]["data"] for n in logs] == LOG_TEXTS
    assert {n["params"]["level"] for n in logs} == {"info"}


async def test_set_level_warning_filters_out_info_messages(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    reply = await memory_client.request("logging/setLevel", {"level": "warning"})
    validate("2025-11-25", reply, "logging/setLevel")
    assert reply["result"] == {}
    await memory_client.request("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
    await settle(memory_client)
    assert messages(memory_client, "notifications/message") == []


async def test_set_level_debug_lets_info_messages_through(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    await memory_client.request("logging/setLevel", {"level": "debug"})
    await memory_client.request("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
    assert len(messages(memory_client, "notifications/message")) == 3


async def test_set_level_rejects_an_unknown_level(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    reply = await memory_client.request("logging/setLevel", {"level": "verbose"})
    assert reply["error"]["code"] == -32602


@pytest.mark.parametrize("token", ["progress-1", 0, 42])
async def test_progress_notifications_echo_the_token_and_increase(memory_client: MemoryClient, token: object) -> None:
    await memory_client.initialize()
    reply = await memory_client.request("tools/call", {"name": "test_tool_with_progress", "arguments": {},
                                                       "_meta": {"progressToken": token}})
    assert reply["result"]["content"][0]["text"] == str(token)
    progress = messages(memory_client, "notifications/progress")
    assert [n["params"]["progress"] for n in progress] == [0, 50, 100]
    assert all(n["params"]["progressToken"] == token and n["params"]["total"] == 100 for n in progress)


async def test_no_progress_notifications_without_a_token(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    await memory_client.request("tools/call", {"name": "test_tool_with_progress", "arguments": {}})
    await settle(memory_client)
    assert messages(memory_client, "notifications/progress") == []


# ------------------------------------------------------------------ subscriptions and cancellation


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
async def test_subscribe_and_unsubscribe_answer_an_empty_result(memory_client: MemoryClient, method: str) -> None:
    await memory_client.initialize()
    reply = await memory_client.request(method, {"uri": "test://watched-resource"})
    validate("2025-11-25", reply, method)
    assert reply["result"] == {}


async def test_subscribe_records_the_uri_and_unsubscribe_forgets_it(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    await memory_client.request("resources/subscribe", {"uri": "test://watched-resource"})
    assert memory_client.conn.session.subscriptions == {"test://watched-resource"}
    await memory_client.request("resources/unsubscribe", {"uri": "test://watched-resource"})
    assert memory_client.conn.session.subscriptions == set()


async def test_a_cancelled_request_gets_no_response(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    await memory_client.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                              "params": {"name": "test_tool_with_progress", "arguments": {},
                                         "_meta": {"progressToken": "t"}}})
    await wait_for_notification(memory_client, "notifications/progress")  # the handler is running
    await memory_client.notify("notifications/cancelled", {"requestId": "slow", "reason": "test"})
    await settle(memory_client)
    assert "slow" not in memory_client.replies
    assert len(messages(memory_client, "notifications/progress")) == 1


async def test_a_late_cancel_does_not_cancel_a_later_request_that_reuses_the_id(memory_client: MemoryClient) -> None:
    await memory_client.initialize()
    first = await memory_client.request("tools/call", {"name": "echo", "arguments": {"text": "1"}}, ident="r")
    assert envelope(first)["data"] == {"text": "1"}
    # The cancel races the reply (allowed by the spec); the server should ignore it.
    await memory_client.notify("notifications/cancelled", {"requestId": "r"})
    await memory_client.send({"jsonrpc": "2.0", "id": "r", "method": "tools/call",
                              "params": {"name": "echo", "arguments": {"text": "2"}}})
    await settle(memory_client)
    assert "r" in memory_client.replies, "the reused id was never answered"


# ------------------------------------------------------------------ 2025-03-26 specifics


async def test_2025_03_26_tools_have_no_output_schema_and_results_no_structured_content(tmp_path: Path) -> None:
    async with serve(tmp_path) as client:
        await client.initialize("2025-03-26")
        tools = (await client.request("tools/list"))["result"]["tools"]
        echo = next(t for t in tools if t["name"] == "echo")
        assert all("outputSchema" not in t and "title" not in t for t in tools)
        assert "inputSchema" in echo
        result = (await client.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))["result"]
        assert "structuredContent" not in result
        assert msgspec.json.decode(result["content"][0]["text"]) == {"success": True, "data": {"text": "hi"}}


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_later_versions_keep_output_schema_and_structured_content(tmp_path: Path, version: str) -> None:
    async with serve(tmp_path) as client:
        await client.initialize(version)
        tools = (await client.request("tools/list"))["result"]["tools"]
        assert "outputSchema" in next(t for t in tools if t["name"] == "echo")
        result = (await client.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))["result"]
        assert result["structuredContent"] == {"success": True, "data": {"text": "hi"}}


def _ping(ident: int) -> dict:
    return {"jsonrpc": "2.0", "id": ident, "method": "ping"}


async def test_2025_03_26_answers_a_batch_with_an_array(tmp_path: Path) -> None:
    async with serve(tmp_path) as client:
        await client.initialize("2025-03-26")
        batch = [_ping(1), {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}]
        await client.send_raw(msgspec.json.encode(batch))
        with trio.fail_after(5):
            reply = await client.receive()
        assert isinstance(reply, list)
        by_id = {item.get("id"): item for item in reply}
        assert set(by_id) == {1, 2}
        assert by_id[1]["result"] == {}
        assert envelope(by_id[2])["data"] == {"result": 5}


async def test_2025_03_26_batch_mixes_results_and_errors_for_valid_and_invalid_items(tmp_path: Path) -> None:
    async with serve(tmp_path) as client:
        await client.initialize("2025-03-26")
        batch = b'[{"jsonrpc":"2.0","id":1,"method":"ping"}, 5, {"jsonrpc":"1.0","id":3,"method":"ping"},' \
                b'{"jsonrpc":"2.0","id":4,"method":"no/such"}, {"jsonrpc":"2.0","method":"notifications/x"},' \
                b'{"jsonrpc":"2.0","id":true,"method":"ping"}]'
        await client.send_raw(batch)
        with trio.fail_after(5):
            reply = await client.receive()
        assert isinstance(reply, list) and len(reply) == 5  # the notification gets no entry
        codes = sorted((item.get("id") is None, item.get("error", {}).get("code", 0)) for item in reply)
        assert codes == [(False, -32601), (False, -32600), (False, 0), (True, -32600), (True, -32600)]
        await settle(client)


async def test_2025_03_26_batch_of_notifications_gets_no_reply_and_an_empty_batch_is_invalid(tmp_path: Path) -> None:
    async with serve(tmp_path) as client:
        await client.initialize("2025-03-26")
        await client.send_raw(b'[{"jsonrpc":"2.0","method":"notifications/initialized"}]')
        await client.send_raw(b"[]")
        with trio.fail_after(5):
            reply = await client.receive()
        assert reply.get("id") is None and reply["error"]["code"] == -32600


def _sleeps(count: int, seconds: float) -> list[dict]:
    return [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
             "params": {"name": "sleep", "arguments": {"seconds": seconds}}} for i in range(count)]


async def test_separate_requests_respect_max_concurrency(tmp_path: Path, autojump_clock: object) -> None:
    async with serve(tmp_path, max_concurrency=1, session_log=NO_SESSION_LOG) as client:
        await client.initialize("2025-03-26")
        start = trio.current_time()
        for message in _sleeps(3, 1.0):
            await client.send(message)
        for i in range(3):
            await client.reply_for(i, timeout=30)
        assert trio.current_time() - start >= 3.0


async def test_a_batch_respects_max_concurrency(tmp_path: Path, autojump_clock: object) -> None:
    async with serve(tmp_path, max_concurrency=1, session_log=NO_SESSION_LOG) as client:
        await client.initialize("2025-03-26")
        start = trio.current_time()
        await client.send_raw(msgspec.json.encode(_sleeps(3, 1.0)))
        reply = await client.receive(timeout=30)
        assert len(reply) == 3
        assert trio.current_time() - start >= 3.0, "three 1 s handlers ran at once under max_concurrency=1"


async def test_a_request_running_past_the_timeout_is_answered_with_an_error(
        tmp_path: Path, autojump_clock: object) -> None:
    async with serve(tmp_path, request_timeout=1.0, session_log=NO_SESSION_LOG) as client:
        await client.initialize("2025-03-26")
        reply = await client.request("tools/call", {"name": "sleep", "arguments": {"seconds": 30}}, timeout=60)
        assert reply["error"]["code"] == -32603 and "timed out" in reply["error"]["message"]


async def test_a_batch_item_running_past_the_timeout_is_answered_with_an_error(
        tmp_path: Path, autojump_clock: object) -> None:
    async with serve(tmp_path, request_timeout=1.0, session_log=NO_SESSION_LOG) as client:
        await client.initialize("2025-03-26")
        start = trio.current_time()
        await client.send_raw(msgspec.json.encode(_sleeps(1, 30.0)))
        [item] = await client.receive(timeout=60)
        assert trio.current_time() - start < 30.0, "the batch waited for the handler, not the timeout"
        assert item["error"]["code"] == -32603


@pytest.mark.parametrize("version", [None, "2025-06-18", "2025-11-25"])
async def test_other_sessions_reject_a_batch_with_one_invalid_request_error(
        tmp_path: Path, version: str | None) -> None:
    async with serve(tmp_path) as client:
        if version is not None:
            await client.initialize(version)
        await client.send_raw(msgspec.json.encode([_ping(1), _ping(2)]))
        with trio.fail_after(5):
            reply = await client.receive()
        assert isinstance(reply, dict) and reply.get("id") is None and reply["error"]["code"] == -32600
        await settle(client)
        assert 1 not in client.replies and 2 not in client.replies


async def test_a_modern_session_rejects_a_batch(tmp_path: Path) -> None:
    async with serve(tmp_path) as client:
        await client.modern("server/discover")
        await client.send_raw(msgspec.json.encode([_ping(1)]))
        with trio.fail_after(5):
            reply = await client.receive()
        assert reply.get("id") is None and reply["error"]["code"] == -32600


# ------------------------------------------------------------------ list_changed (stdio)


@pytest.mark.slow
def test_trigger_tool_change_sends_tools_list_changed_on_an_initialized_stdio_session(tmp_path: Path) -> None:
    with StdioServer(tmp_path) as server:
        server.initialize()
        before = {t["name"] for t in server.request("tools/list")["result"]["tools"]}
        reply = server.request("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
        assert reply["result"]["content"][0]["text"] == "added test_temporary_tool"
        server.wait_for_notification("notifications/tools/list_changed")
        after = {t["name"] for t in server.request("tools/list")["result"]["tools"]}
        assert after - before == {"test_temporary_tool"}
        server.request("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
        server.wait_for_notification("notifications/tools/list_changed", count=2)


@pytest.mark.slow
def test_trigger_prompt_change_sends_prompts_list_changed(tmp_path: Path) -> None:
    with StdioServer(tmp_path) as server:
        server.initialize()
        server.request("tools/call", {"name": "test_trigger_prompt_change", "arguments": {}})
        server.wait_for_notification("notifications/prompts/list_changed")
        names = {p["name"] for p in server.request("prompts/list")["result"]["prompts"]}
        assert "test_temporary_prompt" in names


@pytest.mark.slow
def test_no_list_changed_before_the_initialized_notification(tmp_path: Path) -> None:
    with StdioServer(tmp_path) as server:
        server.initialize(send_initialized=False)
        server.request("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
        server.request("ping")
        assert server.notifications == []
