"""The metrics actor: series fed by observations, frozen snapshots, and `specactor://metrics`."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import trio
import trio.testing

from specactor.actors.metrics import BUCKETS, MetricsActor, Observation, Snapshot
from specactor.testing import MemoryClient

ECHO = (("method", "tools/call"), ("tool", "echo"))


async def snapshot(actor: MetricsActor) -> Any:
    with trio.fail_after(5):
        return await actor.mailbox.call(Snapshot(), 5)


async def test_observations_feed_the_counters_and_the_duration_histogram(
        autojump_clock: trio.testing.MockClock) -> None:
    actor = MetricsActor()
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        for obs in (Observation("tools/call", "echo", 0.0003, None),
                    Observation("tools/call", "echo", 0.001, "INVALID_INPUT"),
                    Observation("tools/call", "add", 0.02, None),
                    Observation("ping", "", 0.00005, None),
                    Observation("nope", "", 0.0001, "-32601"),
                    Observation("tools/call", "echo", 11.0, "INVALID_INPUT")):
            actor.observe_nowait(obs)
        stats = await snapshot(actor)
        nursery.cancel_scope.cancel()
    assert stats.counters["mcp.requests.total"] == {
        ECHO: 3, (("method", "tools/call"), ("tool", "add")): 1,
        (("method", "ping"), ("tool", "")): 1, (("method", "nope"), ("tool", "")): 1}
    assert stats.counters["mcp.tool.invocations"] == {(("tool", "echo"),): 3, (("tool", "add"),): 1}
    assert stats.counters["mcp.errors.total"] == {(("code", "INVALID_INPUT"),): 2, (("code", "-32601"),): 1}
    echo = stats.histograms["mcp.requests.duration"][ECHO]
    assert echo.count == 3 and echo.sum == pytest.approx(11.0013)
    assert echo.buckets == BUCKETS and len(echo.counts) == len(BUCKETS) + 1
    # 0.0003 falls in (0.00025, 0.0005]; 0.001 is on an edge, which counts as "<= edge"; 11 s is +Inf
    assert echo.counts[BUCKETS.index(0.0005)] == 1
    assert echo.counts[BUCKETS.index(0.001)] == 1
    assert echo.counts[-1] == 1
    assert echo.quantile(0.5) == 0.001 and echo.quantile(1.0) == float("inf")
    assert stats.dropped == 0


async def test_statistics_is_a_frozen_snapshot(autojump_clock: trio.testing.MockClock) -> None:
    actor = MetricsActor()
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        actor.observe_nowait(Observation("tools/call", "echo", 0.001, None))
        before = await snapshot(actor)
        direct = actor.statistics()
        actor.observe_nowait(Observation("tools/call", "echo", 0.001, "INTERNAL"))
        after = await snapshot(actor)
        nursery.cancel_scope.cancel()
    for old in (before, direct):
        assert old.counters["mcp.requests.total"][ECHO] == 1
        assert old.counters["mcp.errors.total"] == {}
        assert old.histograms["mcp.requests.duration"][ECHO].count == 1
    assert after.counters["mcp.requests.total"][ECHO] == 2
    with pytest.raises(AttributeError):
        before.dropped = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        before.histograms["mcp.requests.duration"][ECHO].count = 9  # type: ignore[misc]


async def test_observations_beyond_a_full_mailbox_are_dropped_and_counted() -> None:
    actor = MetricsActor()  # not running: nothing drains the mailbox
    obs = Observation("ping", "", 0.0, None)
    for _ in range(4096):
        actor.observe_nowait(obs)
    assert actor.dropped == 0
    for _ in range(3):
        actor.observe_nowait(obs)
    assert actor.dropped == 3 and actor.statistics().dropped == 3


async def test_the_json_form_lists_labels_values_and_quantiles(autojump_clock: trio.testing.MockClock) -> None:
    actor = MetricsActor()
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        actor.observe_nowait(Observation("tools/call", "echo", 0.002, "NOT_FOUND"))
        data = (await snapshot(actor)).to_json()
        nursery.cancel_scope.cancel()
    assert data["counters"]["mcp.errors.total"] == [{"labels": {"code": "NOT_FOUND"}, "value": 1}]
    [hist] = data["histograms"]["mcp.requests.duration"]
    assert hist["labels"] == {"method": "tools/call", "tool": "echo"}
    assert hist["count"] == 1 and hist["p50"] == hist["p99"] == 0.0025
    assert hist["buckets"]["0.0025"] == 1 and sum(hist["buckets"].values()) == 1 and "+Inf" in hist["buckets"]
    json.dumps(data)  # plain JSON


# ---------------------------------------------------------------------- through the server


def series(data: dict[str, Any], name: str) -> dict[frozenset[tuple[str, str]], int]:
    return {frozenset(item["labels"].items()): item["value"] for item in data["counters"][name]}


async def read_metrics(client: MemoryClient) -> dict[str, Any]:
    reply = await client.request("resources/read", {"uri": "specactor://metrics"})
    [contents] = reply["result"]["contents"]
    assert contents["mimeType"] == "application/json"
    return json.loads(contents["text"])  # type: ignore[no-any-return]


async def test_the_metrics_resource_shows_request_and_tool_counts(memory_client: MemoryClient) -> None:
    with trio.fail_after(10):
        await memory_client.initialize()
        for text in ("a", "b"):
            await memory_client.request("tools/call", {"name": "echo", "arguments": {"text": text}})
        await memory_client.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        bad = await memory_client.request("tools/call", {"name": "echo", "arguments": {"text": 5}})
        assert bad["result"]["structuredContent"]["error"]["code"] == "INVALID_INPUT"
        await memory_client.request("no/such/method")
        await memory_client.request("ping")
        data = await read_metrics(memory_client)
    requests = series(data, "mcp.requests.total")
    assert requests[frozenset({("method", "tools/call"), ("tool", "echo")})] == 3
    assert requests[frozenset({("method", "tools/call"), ("tool", "add")})] == 1
    assert requests[frozenset({("method", "initialize"), ("tool", "")})] == 1
    assert requests[frozenset({("method", "ping"), ("tool", "")})] == 1
    assert requests[frozenset({("method", "no/such/method"), ("tool", "")})] == 1
    invocations = series(data, "mcp.tool.invocations")
    assert invocations[frozenset({("tool", "echo")})] == 3 and invocations[frozenset({("tool", "add")})] == 1
    assert series(data, "mcp.errors.total")[frozenset({("code", "INVALID_INPUT")})] == 1
    durations = {frozenset(h["labels"].items()): h for h in data["histograms"]["mcp.requests.duration"]}
    echo = durations[frozenset({("method", "tools/call"), ("tool", "echo")})]
    assert echo["count"] == 3 and echo["sum"] >= 0 and sum(echo["buckets"].values()) == 3
    assert data["dropped"] == 0


async def test_json_rpc_errors_are_counted_by_their_code(memory_client: MemoryClient) -> None:
    with trio.fail_after(10):
        await memory_client.initialize()
        unknown = await memory_client.request("no/such/method")
        assert unknown["error"]["code"] == -32601
        no_tool = await memory_client.request("tools/call", {"name": "no_such_tool", "arguments": {}})
        assert no_tool["error"]["code"] == -32602
        data = await read_metrics(memory_client)
    assert series(data, "mcp.errors.total") == {frozenset({("code", "-32601")}): 1,
                                                frozenset({("code", "-32602")}): 1}


async def test_a_tool_error_result_is_counted_by_its_envelope_code(memory_client: MemoryClient) -> None:
    with trio.fail_after(10):
        await memory_client.initialize()
        for args in ({}, {"text": "x", "extra": 1}, {"text": None}):
            reply = await memory_client.request("tools/call", {"name": "echo", "arguments": args})
            assert reply["result"]["isError"] is True
        data = await read_metrics(memory_client)
    assert series(data, "mcp.errors.total") == {frozenset({("code", "INVALID_INPUT")}): 3}


async def test_a_successful_reply_to_a_request_with_a_long_id_is_not_counted_as_an_error(
        memory_client: MemoryClient) -> None:
    with trio.fail_after(10):
        await memory_client.initialize()
        listed = await memory_client.request("tools/list", ident=str(uuid.uuid4()))
        assert "result" in listed
        echoed = await memory_client.request("tools/call", {"name": "echo", "arguments": {"text": '"error"'}},
                                             ident=str(uuid.uuid4()))
        assert echoed["result"]["structuredContent"]["success"] is True
        data = await read_metrics(memory_client)
    assert series(data, "mcp.errors.total") == {}


async def test_a_successful_tool_result_carrying_user_json_is_not_counted_as_an_error(
        memory_client: MemoryClient) -> None:
    with trio.fail_after(10):
        await memory_client.initialize()
        reply = await memory_client.request("tools/call", {"name": "memory_add", "arguments": {
            "content": "a memory about errors", "metadata": {"isError": True, "error": {"code": "X"}}}})
        assert reply["result"]["structuredContent"]["success"] is True, reply
        data = await read_metrics(memory_client)
    assert series(data, "mcp.errors.total") == {}
