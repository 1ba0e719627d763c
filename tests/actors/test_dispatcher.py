"""The dispatcher: inline methods never wait behind slow tools, cancellation, the concurrency
limit, and failing handlers that must not take the server down."""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import structlog
import trio
import trio.testing
from msgspec import Raw

from specactor.protocol.context import RequestContext
from specactor.protocol.registry import Registry
from specactor.testing import MemoryClient, everything, open_memory_server
from specactor.testing.memory import MemoryConnection
from specactor.wire.arguments import ToolInput
from specactor.wire.mcp import CallToolResult, Tool
from tests.conftest import check_frames, fixture_config
from tests.mcp_schema import validate

WAIT = 10.0


class GateIn(ToolInput):
    key: str


class Gate:
    """What the `block` tool did: who entered, who is running, who was cancelled."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.entered: list[str] = []
        self.cancelled: list[str] = []
        self.running = 0
        self.max_running = 0
        self._changed = trio.Event()

    def _poke(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, predicate: Any) -> None:
        with trio.fail_after(WAIT):
            while not predicate():
                await self._changed.wait()

    def register(self, registry: Registry, services: Any) -> None:
        everything.register(registry, services)

        @registry.tool("block", description="Waits until the test releases it.", input=GateIn, toolset="fixtures")
        async def block(args: GateIn, ctx: RequestContext) -> dict[str, str]:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.entered.append(args.key)
            self._poke()
            try:
                await self.release.wait()
            except trio.Cancelled:
                self.cancelled.append(args.key)
                raise
            finally:
                self.running -= 1
                self._poke()
            return {"key": args.key}

        @registry.tool("explode", description="Raises.", input=GateIn, toolset="fixtures")
        async def explode(args: GateIn, ctx: RequestContext) -> None:
            raise RuntimeError(f"typed tool blew up: {args.key}")

        async def raw_explode(raw: Raw, ctx: RequestContext) -> CallToolResult:
            raise ValueError("raw tool blew up")

        registry.add_tool(Tool(name="raw_explode", description="Raises.", inputSchema={"type": "object"}),
                          raw_explode, toolset="fixtures")

        @registry.resource("test://explode", name="explode", description="Raises.", mime_type="text/plain",
                           toolset="fixtures")
        async def resource_explode(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
            raise OSError("resource blew up")


@asynccontextmanager
async def server(tmp_path: Path, gate: Gate, **overrides: Any) -> AsyncIterator[MemoryClient]:
    async with open_memory_server(fixture_config(tmp_path, **overrides), gate.register) as client:
        with trio.fail_after(WAIT):
            await client.initialize()
        yield client
        check_frames(client)


def call(name: str, key: str) -> dict[str, Any]:
    return {"name": name, "arguments": {"key": key}}


async def send_call(client: MemoryClient, ident: Any, name: str, key: str) -> None:
    await client.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": call(name, key)})


async def assert_nothing_more_sent(client: MemoryClient) -> None:
    """Every handler finished and every reply was read: nothing else is on its way."""
    with trio.fail_after(WAIT):
        await client.app.dispatcher.wait_idle()
    await trio.testing.wait_all_tasks_blocked()
    assert client._inbox.statistics().current_buffer_used == 0


async def test_wait_idle_returns_at_once_when_nothing_is_outstanding_and_when_the_last_handler_ends(
        tmp_path: Path) -> None:
    gate = Gate()
    async with server(tmp_path, gate) as client:
        dispatcher = client.app.dispatcher
        with trio.fail_after(WAIT):
            await dispatcher.wait_idle()  # nothing outstanding: no event to wait on
            await send_call(client, "slow", "block", "slow")
            await gate.until(lambda: gate.entered == ["slow"])
            woke: list[bool] = []

            async def waiter() -> None:
                await dispatcher.wait_idle()
                woke.append(True)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter)
                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()
                assert woke == []  # the handler still runs
                gate.release.set()
            assert woke == [True, True]
            await client.receive()
            await dispatcher.wait_idle()


async def test_a_slow_tool_never_delays_ping(tmp_path: Path) -> None:
    gate = Gate()
    async with server(tmp_path, gate) as client:
        await send_call(client, "slow", "block", "slow")
        await gate.until(lambda: gate.entered == ["slow"])
        for _ in range(3):
            with trio.fail_after(1):
                assert (await client.request("ping"))["result"] == {}
        with trio.fail_after(1):
            assert (await client.request("tools/list"))["result"]["tools"]
            echo = await client.request("tools/call", {"name": "echo", "arguments": {"text": "fast"}})
        assert echo["result"]["structuredContent"]["data"] == {"text": "fast"}
        assert gate.running == 1 and "slow" not in client.replies
        gate.release.set()
        with trio.fail_after(WAIT):
            done = await client.reply_for("slow")
        assert done["result"]["structuredContent"] == {"success": True, "data": {"key": "slow"}}


async def test_a_cancelled_request_stops_its_handler_and_is_never_answered(tmp_path: Path) -> None:
    gate = Gate()
    async with server(tmp_path, gate) as client:
        await send_call(client, 5, "block", "doomed")
        await send_call(client, 6, "block", "survivor")
        await gate.until(lambda: len(gate.entered) == 2)
        await client.notify("notifications/cancelled", {"requestId": 5, "reason": "the user gave up"})
        await gate.until(lambda: gate.cancelled == ["doomed"])
        with trio.fail_after(WAIT):
            await client.request("ping")
        gate.release.set()
        with trio.fail_after(WAIT):
            survivor = await client.reply_for(6)
        assert survivor["result"]["structuredContent"]["data"] == {"key": "survivor"}
        await assert_nothing_more_sent(client)
        assert 5 not in client.replies and gate.cancelled == ["doomed"]
        assert client.app.dispatcher.in_flight == 0


async def test_a_request_cancelled_while_it_waits_for_a_slot_never_runs(tmp_path: Path) -> None:
    gate = Gate()
    async with server(tmp_path, gate, max_concurrency=1) as client:
        await send_call(client, "first", "block", "first")
        await gate.until(lambda: gate.entered == ["first"])
        await send_call(client, "queued", "block", "queued")
        await client.notify("notifications/cancelled", {"requestId": "queued"})
        await client.notify("notifications/cancelled", {"requestId": "never-sent"})  # harmless
        gate.release.set()
        with trio.fail_after(WAIT):
            await client.reply_for("first")
        await assert_nothing_more_sent(client)
        assert gate.entered == ["first"] and "queued" not in client.replies


async def test_a_cancel_stops_only_the_request_of_its_own_session(tmp_path: Path) -> None:
    gate = Gate()
    async with server(tmp_path, gate) as client:
        send, recv = trio.open_memory_channel[bytes](8)
        other = MemoryClient(client.app, MemoryConnection(send), recv)
        with trio.fail_after(WAIT):
            await other.initialize()
        await send_call(client, 1, "block", "mine")
        await send_call(other, 1, "block", "theirs")  # the same id on another session
        await gate.until(lambda: len(gate.entered) == 2)
        await other.notify("notifications/cancelled", {"requestId": 1})
        await gate.until(lambda: gate.cancelled == ["theirs"])
        gate.release.set()
        with trio.fail_after(WAIT):
            mine = await client.reply_for(1)
        assert mine["result"]["structuredContent"]["data"] == {"key": "mine"}
        await assert_nothing_more_sent(client)
        assert recv.statistics().current_buffer_used == 0  # nothing for the cancelled one
        await recv.aclose()


async def test_a_cancel_after_the_answer_is_harmless_even_if_the_id_comes_back(tmp_path: Path) -> None:
    gate = Gate()
    gate.release.set()
    async with server(tmp_path, gate) as client:
        with trio.fail_after(WAIT):
            first = await client.request("tools/call", call("block", "first"), ident=3)
            await client.notify("notifications/cancelled", {"requestId": 3})
            again = await client.request("tools/call", call("block", "again"), ident=3)
        assert first["result"]["structuredContent"]["data"] == {"key": "first"}
        assert again["result"]["structuredContent"]["data"] == {"key": "again"}
        assert gate.cancelled == []


async def test_never_more_handlers_run_at_once_than_the_concurrency_limit(tmp_path: Path) -> None:
    gate = Gate()
    async with server(tmp_path, gate, max_concurrency=2) as client:
        for i in range(6):
            await send_call(client, i, "block", f"k{i}")
        await gate.until(lambda: gate.running == 2)
        await trio.testing.wait_all_tasks_blocked(cushion=0.02)
        assert gate.running == 2 and len(gate.entered) == 2
        with trio.fail_after(1):
            await client.request("ping")  # inline methods do not need a slot
        gate.release.set()
        with trio.fail_after(WAIT):
            replies = [await client.reply_for(i) for i in range(6)]
        assert [r["result"]["structuredContent"]["data"]["key"] for r in replies] == [f"k{i}" for i in range(6)]
        assert gate.max_running == 2 and sorted(gate.entered) == [f"k{i}" for i in range(6)]


async def test_a_handler_running_past_the_request_timeout_is_answered_with_an_error(tmp_path: Path) -> None:
    gate = Gate()
    async with server(tmp_path, gate, request_timeout=0.2) as client:
        with trio.fail_after(WAIT):
            reply = await client.request("tools/call", call("block", "late"))
        assert reply["error"]["code"] == -32603 and "timed out after 0.2 s" in reply["error"]["message"]
        assert gate.cancelled == ["late"]


async def test_failing_handlers_do_not_take_the_server_down(tmp_path: Path) -> None:
    gate = Gate()
    with structlog.testing.capture_logs() as logs:
        async with server(tmp_path, gate) as client:
            with trio.fail_after(WAIT):
                typed = await client.request("tools/call", call("explode", "x"))
                raw = await client.request("tools/call", call("raw_explode", "x"))
                resource = await client.request("resources/read", {"uri": "test://explode"})
                for reply in (typed, raw):
                    error = reply["result"]["structuredContent"]["error"]
                    assert reply["result"]["isError"] is True and error["code"] == "INTERNAL"
                    assert "blew up" not in error["message"]  # no internals leak to the client
                assert resource["error"]["code"] == -32603 and "blew up" not in resource["error"]["message"]
                assert (await client.request("ping"))["result"] == {}
                echo = await client.request("tools/call", {"name": "echo", "arguments": {"text": "alive"}})
                assert echo["result"]["structuredContent"]["data"] == {"text": "alive"}
            assert client.app.supervisor.restarts == {}
    assert not [e for e in logs if e.get("actor")], "an actor crashed"
    assert len([e for e in logs if e["log_level"] == "error"]) == 3


async def test_a_client_that_went_away_does_not_disturb_other_connections(tmp_path: Path) -> None:
    gate = Gate()
    reply: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        async with server(tmp_path, gate) as client:
            send, recv = trio.open_memory_channel[bytes](8)
            gone = MemoryClient(client.app, MemoryConnection(send), recv)
            with trio.fail_after(WAIT):
                await gone.initialize()
            await send_call(client, "a", "block", "a")
            await gate.until(lambda: gate.entered == ["a"])
            await recv.aclose()  # the second client disconnects before its answer is sent
            await gone.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "echo", "arguments": {"text": "anyone?"}}})
            with trio.fail_after(WAIT):
                await client.request("ping")
            await trio.testing.wait_all_tasks_blocked()
            cancelled, restarts = list(gate.cancelled), dict(client.app.supervisor.restarts)
            gate.release.set()
            with trio.move_on_after(0 if cancelled else WAIT):
                reply = await client.reply_for("a")
        gc.collect()  # assert only after anything the crash abandoned was finalized
    assert cancelled == [] and restarts == {}
    assert reply["result"]["structuredContent"]["data"] == {"key": "a"}


async def test_a_parse_error_reply_conforms_to_the_negotiated_schema(tmp_path: Path) -> None:
    gate = Gate()
    async with open_memory_server(fixture_config(tmp_path), gate.register) as client:
        with trio.fail_after(WAIT):
            await client.initialize()
            await client.send_raw(b'{"jsonrpc":"2.0","id":1,"method":')
            data = await client.receive()
        assert data["error"]["code"] == -32700
        validate("2025-11-25", msgspec.json.decode(client.raw[-1]))


async def test_a_tool_that_cannot_wait_is_answered_at_once_while_one_that_waits_holds_its_task(
        tmp_path: Path) -> None:
    gate = Gate()
    async with server(tmp_path, gate) as client:
        await send_call(client, "slow", "block", "slow")
        await gate.until(lambda: gate.entered == ["slow"])
        with trio.fail_after(WAIT):
            reply = await client.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        assert reply["result"]["structuredContent"]["data"] == {"text": "hi"}
        assert client.app.dispatcher.in_flight == 1  # only the waiting tool has a task and a cancel scope
        gate.release.set()
        with trio.fail_after(WAIT):
            slow = await client.reply_for("slow")
        assert slow["result"]["structuredContent"]["data"] == {"key": "slow"}


async def test_the_timeout_sweeper_spares_requests_inside_their_time(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    gate = Gate()
    async with server(tmp_path, gate, request_timeout=0.5) as client:
        await send_call(client, 1, "block", "in-time")
        await gate.until(lambda: gate.entered == ["in-time"])
        await trio.sleep(0.45)  # (virtual time) many sweeper ticks of 25 ms pass; the deadline does not
        gate.release.set()
        with trio.fail_after(WAIT):
            reply = await client.reply_for(1)
        assert reply["result"]["structuredContent"]["data"] == {"key": "in-time"} and gate.cancelled == []


async def test_a_batch_item_is_cancellable_and_observed_like_a_lone_request(tmp_path: Path) -> None:
    gate = Gate()
    async with open_memory_server(fixture_config(tmp_path), gate.register) as client:
        with trio.fail_after(WAIT):
            await client.initialize("2025-03-26")
        batch = [{"jsonrpc": "2.0", "id": "doomed", "method": "tools/call", "params": call("block", "doomed")},
                 {"jsonrpc": "2.0", "id": "kept", "method": "tools/call", "params": call("block", "kept")},
                 {"jsonrpc": "2.0", "id": "typo", "method": "tools/cal"}]
        await client.send_raw(msgspec.json.encode(batch))
        await gate.until(lambda: len(gate.entered) == 2)
        await client.notify("notifications/cancelled", {"requestId": "doomed"})
        await gate.until(lambda: gate.cancelled == ["doomed"])
        gate.release.set()
        with trio.fail_after(WAIT):
            reply = await client.receive()
        assert sorted(item["id"] for item in reply) == ["kept", "typo"]
        counters = client.app.metrics.statistics().counters
        assert counters["mcp.errors.total"] == {(("code", "cancelled"),): 1, (("code", "-32601"),): 1}
        assert counters["mcp.tool.invocations"][(("tool", "block"),)] == 2
        check_frames(client)


async def test_a_batch_whose_every_request_is_cancelled_is_abandoned_without_an_array(tmp_path: Path) -> None:
    gate = Gate()
    abandoned: list[Any] = []
    async with open_memory_server(fixture_config(tmp_path), gate.register) as client:
        client.conn.abandon = abandoned.append  # type: ignore[method-assign,assignment]
        with trio.fail_after(WAIT):
            await client.initialize("2025-03-26")
        await client.send_raw(msgspec.json.encode(
            [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call("block", str(i))} for i in (1, 2)]))
        await gate.until(lambda: len(gate.entered) == 2)
        await client.notify("notifications/cancelled", {"requestId": 1})
        await client.notify("notifications/cancelled", {"requestId": 2})
        with trio.fail_after(WAIT):
            await client.app.dispatcher.wait_idle()
        assert abandoned == [None] and sorted(gate.cancelled) == ["1", "2"]
        await assert_nothing_more_sent(client)


async def test_a_failure_outside_any_handler_costs_only_its_own_request(tmp_path: Path) -> None:
    async with open_memory_server(fixture_config(tmp_path)) as client:
        await client.initialize()
        respond = client.app.core.respond

        async def broken(req: Any, *args: Any) -> Any:
            if req.tool == "sleep":
                raise RuntimeError("a bug in the core")
            return await respond(req, *args)

        client.app.core.respond = broken  # type: ignore[method-assign]
        with structlog.testing.capture_logs() as logs:
            failed = await client.request("tools/call", {"name": "sleep", "arguments": {"seconds": 0}})
        assert failed["error"]["code"] == -32603 and "RuntimeError" in failed["error"]["message"]
        assert any(entry["event"] == "request failed outside its handler" for entry in logs)
        assert (await client.request("ping"))["result"] == {}
        assert client.app.supervisor.restarts == {}  # the dispatcher did not crash
