"""Several HTTP worker processes on one port (`serve --http --workers 2`): both eras end to end,
handshake-era sessions that work whichever worker takes the connection, DELETE for all, a killed
worker replaced, /metrics summed, and the 150-client load.

Which worker took a connection is what its `/healthz` says (`pid`): a client limited to one
connection keeps talking to that worker.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.http.support import (
    BASE_HEADERS,
    TLS,
    Process,
    frames_of,
    initialize,
    legacy_call,
    modern_call,
    modern_headers,
    modern_params,
    read_sse,
    request,
    server_env,
    session_headers,
    structured,
    subprocess_server,
    until,
)
from tests.http.test_concurrency import CLIENTS, legacy_client, level_of, modern_client

pytestmark = pytest.mark.slow
SERVER = ["-m", "specactor.testing.everything", "--http", "--port", "0", "--no-session-log"]
LOGS = ["Tool execution started", "Tool processing data", "Tool execution completed"]


@dataclass
class Workers:
    process: Process
    base: str
    pids: list[int]  # as the workers announced themselves


@asynccontextmanager
async def workers_server(tmp_path: Path, count: int = 2, **env: str) -> AsyncIterator[Workers]:
    args = [*SERVER, "--root", str(tmp_path), "--workers", str(count)]
    async with subprocess_server(args, server_env(SPECACTOR_GRACE_PERIOD="1", **env), tmp_path) as proc:
        pids: list[int] = []

        def started(rec: dict[str, Any]) -> bool:
            if rec.get("msg") == "http worker started":
                pids.append(rec["pid"])
            return rec.get("msg") == "specactor started"

        rec = await proc.record(started, timeout=60)
        assert rec["workers"] == count and len(pids) == count, proc.stderr()
        yield Workers(proc, rec["urls"][0].removesuffix("/mcp"), pids)
        proc.proc.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            assert await proc.proc.wait() == 0, proc.stderr()


async def worker_of(client: httpx.AsyncClient) -> int:
    with trio.fail_after(10):
        resp = await client.get("/healthz")
    pid: int = resp.json()["pid"]
    return pid


@asynccontextmanager
async def one_client_per_worker(base: str, pids: list[int]) -> AsyncIterator[list[httpx.AsyncClient]]:
    """A one-connection client on each worker, in the order of `pids` (new connections until
    every worker has taken one)."""
    async with AsyncExitStack() as stack:
        found: dict[int, httpx.AsyncClient] = {}
        with trio.fail_after(30):
            while set(found) != set(pids):
                limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
                client = await stack.enter_async_context(
                    httpx.AsyncClient(base_url=base, timeout=10, limits=limits, verify=TLS))
                found.setdefault(await worker_of(client), client)
        yield [found[pid] for pid in pids]


async def test_two_workers_serve_both_eras_to_the_official_client(tmp_path: Path) -> None:
    async with workers_server(tmp_path) as srv:
        with trio.fail_after(30):
            for _ in range(3):  # new connections each time: whichever worker takes them
                async with Client(f"{srv.base}/mcp", mode="legacy") as client:
                    assert client.protocol_version == "2025-11-25"
                    result = await client.call_tool("add", {"a": 1, "b": 2})
                    assert result.structured_content == {"success": True, "data": {"result": 3.0}}
                    contents = (await client.read_resource("test://static-text")).contents
                    assert contents[0].text == "This is the content of the static text resource."  # type: ignore[union-attr]
                async with Client(f"{srv.base}/mcp") as client:
                    assert client.protocol_version == "2026-07-28"
                    result = await client.call_tool("add", {"a": 2, "b": 5})
                    assert result.structured_content == {"success": True, "data": {"result": 7.0}}


async def test_a_legacy_session_started_on_one_worker_keeps_its_state_on_the_other(tmp_path: Path) -> None:
    async with workers_server(tmp_path) as srv, one_client_per_worker(srv.base, srv.pids) as (first, second):
        sid = await initialize(first)
        await legacy_call(first, sid, "logging/setLevel", {"level": "debug"})
        # the other worker never saw this session: it finds it, initialized and at debug level
        with trio.fail_after(10):
            logged = await second.post("/mcp", json=request("tools/call", {"name": "test_tool_with_logging",
                                                                            "arguments": {}}),
                                       headers=session_headers(sid))
        assert logged.status_code == 200, logged.text
        assert [f["params"]["data"] for f in frames_of(logged) if f.get("method") == "notifications/message"] == LOGS
        # and a change made there is seen back here
        await legacy_call(second, sid, "logging/setLevel", {"level": "error"})
        with trio.fail_after(10):
            quiet = await first.post("/mcp", json=request("tools/call", {"name": "test_tool_with_logging",
                                                                          "arguments": {}}),
                                     headers=session_headers(sid))
        assert [f for f in frames_of(quiet) if f.get("method") == "notifications/message"] == []
        assert [await worker_of(first), await worker_of(second)] == srv.pids


async def test_delete_on_one_worker_ends_the_session_on_every_worker(tmp_path: Path) -> None:
    async with workers_server(tmp_path) as srv, one_client_per_worker(srv.base, srv.pids) as (first, second):
        sid = await initialize(first)
        await legacy_call(second, sid, "tools/list")  # the second worker holds a copy now
        with trio.fail_after(10):
            assert (await first.delete("/mcp", headers=session_headers(sid))).status_code == 200
            for client in (first, second):
                gone = await client.post("/mcp", json=request("tools/list"), headers=session_headers(sid))
                assert gone.status_code == 404
                get = await client.get("/mcp", headers=session_headers(sid, accept="text/event-stream"))
                assert get.status_code == 404


async def test_an_elicitation_answered_through_the_other_worker_reaches_the_waiting_call(tmp_path: Path) -> None:
    async with workers_server(tmp_path) as srv, one_client_per_worker(srv.base, srv.pids) as (first, second):
        with trio.fail_after(10):
            init = request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                                          "clientInfo": {"name": "t", "version": "0"}})
            sid = (await first.post("/mcp", json=init, headers=BASE_HEADERS)).headers["mcp-session-id"]
            await first.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                             headers=session_headers(sid))
        call = request("tools/call", {"name": "test_elicitation", "arguments": {"message": "who?"}})

        async def on_frame(frame: Any) -> None:
            if frame.get("method") == "elicitation/create":  # answered on the other worker's connection
                reply = {"jsonrpc": "2.0", "id": frame["id"],
                         "result": {"action": "accept", "content": {"username": "ada", "email": "a@b.c"}}}
                assert (await second.post("/mcp", json=reply, headers=session_headers(sid))).status_code == 202

        with trio.fail_after(20):
            async with first.stream("POST", "/mcp", json=call, headers=session_headers(sid)) as resp:
                frames = await read_sse(resp, on_frame)
        assert frames[-1]["id"] == call["id"]
        assert "User response: action=accept" in frames[-1]["result"]["content"][0]["text"]
        assert '"username":"ada"' in frames[-1]["result"]["content"][0]["text"]


async def test_a_2026_request_state_sealed_by_one_worker_opens_on_the_other(tmp_path: Path) -> None:
    async with workers_server(tmp_path) as srv, one_client_per_worker(srv.base, srv.pids) as (first, second):
        tool = "test_input_required_result_request_state"
        caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
        body = request("tools/call", modern_params({"name": tool, "arguments": {}}, **caps))
        with trio.fail_after(10):
            one = (await first.post("/mcp", json=body, headers=modern_headers("tools/call", tool))).json()
        assert one["result"]["resultType"] == "input_required"
        again = request("tools/call", modern_params({"name": tool, "arguments": {},
                                                     "inputResponses": {"confirm": {"action": "accept",
                                                                                    "content": {"ok": True}}},
                                                     "requestState": one["result"]["requestState"]}, **caps))
        with trio.fail_after(10):
            two = (await second.post("/mcp", json=again, headers=modern_headers("tools/call", tool))).json()
        assert "state-ok" in two["result"]["content"][0]["text"], two


async def test_a_worker_killed_with_sigkill_is_replaced_and_sessions_and_service_go_on(tmp_path: Path) -> None:
    async with workers_server(tmp_path) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            sid = await initialize(client)
        victim = srv.pids[0]
        os.kill(victim, signal.SIGKILL)
        died = await srv.process.record(lambda r: r.get("msg") == "HTTP worker died; replacing it")
        assert died["worker_pid"] == victim
        fresh = await srv.process.record(lambda r: r.get("msg") == "http worker started")
        assert fresh["pid"] not in srv.pids
        with trio.fail_after(20):
            seen = set()
            for _ in range(12):  # new connections, to both workers: every one is answered
                async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
                    seen.add(await worker_of(client))
                    assert structured(await legacy_call(client, sid, "tools/call", {
                        "name": "echo", "arguments": {"text": "still here"}})) == {"text": "still here"}
                    await modern_call(client, "tools/list")
        assert victim not in seen


async def test_metrics_on_any_worker_sum_the_requests_of_all(tmp_path: Path) -> None:
    async with workers_server(tmp_path) as srv, one_client_per_worker(srv.base, srv.pids) as (first, second):
        for client, calls in ((first, 3), (second, 4)):
            for i in range(calls):
                await modern_call(client, "tools/call", {"name": "echo", "arguments": {"text": str(i)}})

        async def echo_total(client: httpx.AsyncClient) -> float:
            text = (await client.get("/metrics")).text
            return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
                       if s.name == "mcp_requests_total" and s.labels.get("tool") == "echo")

        totals: dict[int, float] = {}

        async def both_say_seven() -> bool:
            for i, client in enumerate((first, second)):
                totals[i] = await echo_total(client)
            return all(v == 7 for v in totals.values())

        with trio.fail_after(10):  # other workers' figures are at most half a second old
            while not await both_say_seven():  # noqa: ASYNC110 - another process's snapshot: poll, bounded
                await trio.sleep(0.1)


async def test_150_legacy_and_150_modern_clients_at_once_on_two_workers(tmp_path: Path) -> None:
    async with workers_server(tmp_path) as srv:
        legacy: dict[int, dict[str, Any]] = {}
        modern: dict[int, dict[str, Any]] = {}
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for i in range(CLIENTS):
                    nursery.start_soon(legacy_client, srv.base, i, legacy)
                    nursery.start_soon(modern_client, srv.base, i, modern)
        assert sorted(legacy) == sorted(modern) == list(range(CLIENTS))
        assert len({r["sid"] for r in legacy.values()}) == CLIENTS
        for i in range(CLIENTS):
            assert legacy[i]["echo"] == f"client-{i}"
            assert legacy[i]["logs"] == (LOGS if level_of(i) == "debug" else [])
            assert modern[i]["echo"] == f"modern-{i}"
            assert modern[i]["logs"] == (LOGS if i % 2 == 0 else [])


async def test_sigterm_stops_every_worker_and_the_parent_exits_zero(tmp_path: Path) -> None:
    async with workers_server(tmp_path) as srv:
        pids = list(srv.pids)
    assert not any(_alive(pid) for pid in pids)  # the workers are gone with their parent


async def test_workers_stop_when_their_parent_is_killed(tmp_path: Path) -> None:
    args = [*SERVER, "--root", str(tmp_path), "--workers", "2"]
    async with subprocess_server(args, server_env(SPECACTOR_GRACE_PERIOD="1"), tmp_path) as proc:
        pids: list[int] = []

        def started(rec: dict[str, Any]) -> bool:
            if rec.get("msg") == "http worker started":
                pids.append(rec["pid"])
            return rec.get("msg") == "specactor started"

        await proc.record(started, timeout=60)
        proc.proc.kill()
        await until(lambda: not any(_alive(pid) for pid in pids), timeout=10, step=0.05)


def _alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting for a reaper (an orphan's new parent may be slow)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
