"""`subscriptions/listen` (2026-07-28): acknowledged first, then only the notifications asked for,
each tagged with the subscription id; cancelling the listen request ends it without a reply."""

from __future__ import annotations

import trio
import trio.testing

from specactor.protocol.versions import META_SUBSCRIPTION_ID
from specactor.testing import MemoryClient

ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


async def listen(client: MemoryClient, ident: str, **wanted: object) -> dict[str, object]:
    await client.send({"jsonrpc": "2.0", "id": ident, "method": "subscriptions/listen",
                       "params": {"_meta": ENVELOPE, "notifications": wanted}})
    with trio.fail_after(5):
        ack = await client.receive()
    return ack  # type: ignore[no-any-return]


async def test_a_listen_stream_is_acknowledged_then_gets_only_what_it_asked_for(memory_client: MemoryClient) -> None:
    ack = await listen(memory_client, "sub-1", toolsListChanged=True)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {"notifications": {"toolsListChanged": True}, "_meta": {META_SUBSCRIPTION_ID: "sub-1"}}
    await memory_client.modern("tools/call", {"name": "test_trigger_prompt_change", "arguments": {}})
    await memory_client.modern("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
    with trio.fail_after(5):
        while not memory_client.notifications:
            await memory_client.modern("server/discover")
    (note,) = memory_client.notifications  # the prompt change was not asked for
    assert note["method"] == "notifications/tools/list_changed"
    assert note["params"]["_meta"] == {META_SUBSCRIPTION_ID: "sub-1"}


async def test_cancelling_a_listen_request_ends_it_without_a_reply(memory_client: MemoryClient) -> None:
    await listen(memory_client, 7, promptsListChanged=True)
    assert memory_client.app.core.listeners
    await memory_client.notify("notifications/cancelled", {"requestId": 7})
    with trio.fail_after(5):
        await trio.testing.wait_all_tasks_blocked()
    assert not memory_client.app.core.listeners
    await memory_client.modern("tools/call", {"name": "test_trigger_prompt_change", "arguments": {}})
    reply = await memory_client.modern("server/discover")
    assert "result" in reply and 7 not in memory_client.replies and not memory_client.notifications


async def test_a_modern_listen_request_is_not_timed_out(memory_client: MemoryClient) -> None:
    await listen(memory_client, "long", resourceSubscriptions=["test://static-text"])
    key = next(iter(memory_client.app.dispatcher._inflight))
    scope, deadline = memory_client.app.dispatcher._inflight[key]
    assert deadline == float("inf") and scope.deadline == float("inf")
