"""Operating the HTTP server: /healthz, Prometheus /metrics, and graceful shutdown on a signal."""

from __future__ import annotations

import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from tests.http.support import (
    http_server,
    initialize,
    legacy_call,
    modern_call,
    read_sse,
    request,
    request_ids,
    server_env,
    session_headers,
    structured,
    subprocess_server,
    until,
)


async def test_healthz_answers_200(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        with trio.fail_after(10):
            resp = await srv.client.get("/healthz")
        assert resp.status_code == 200
        assert resp.json() == {"status": "ok"}


async def test_an_unknown_path_is_404(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        with trio.fail_after(10):
            assert (await srv.client.get("/nothing-here")).status_code == 404
            assert (await srv.client.post("/mcp/extra", json={})).status_code == 404


async def test_metrics_is_prometheus_text_with_request_counters_and_a_latency_histogram(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        for i in range(3):
            reply = await legacy_call(srv.client, sid, "tools/call", {"name": "echo", "arguments": {"text": str(i)}})
            assert structured(reply) == {"text": str(i)}
        await modern_call(srv.client, "tools/list")
        with trio.fail_after(10):
            await srv.app.dispatcher.wait_idle()
        # the metrics actor applies observations from its mailbox: wait until it has them all
        await until(lambda: srv.counter("mcp.requests.total", method="tools/call") == 3
                    and srv.counter("mcp.requests.total", method="tools/list") == 1)
        with trio.fail_after(10):
            resp = await srv.client.get("/metrics")
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
        families = {f.name: f for f in text_string_to_metric_families(resp.text)}
        requests = families["mcp_requests"]
        assert requests.type == "counter"
        by_labels = {(s.labels["method"], s.labels["tool"]): s.value
                     for s in requests.samples if s.name == "mcp_requests_total"}
        assert by_labels[("tools/call", "echo")] == 3
        assert by_labels[("tools/list", "")] == 1
        histogram = families["mcp_requests_duration_seconds"]
        assert histogram.type == "histogram"
        echo = [s for s in histogram.samples if s.labels.get("tool") == "echo"]
        count = [s.value for s in echo if s.name.endswith("_count")]
        assert count == [3]
        buckets = [s for s in echo if s.name.endswith("_bucket")]
        assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 3
        assert [b.value for b in buckets] == sorted(b.value for b in buckets)  # cumulative
        assert next(s.value for s in echo if s.name.endswith("_sum")) > 0


@pytest.mark.parametrize("ident", request_ids())
async def test_json_rpc_and_tool_errors_are_counted_by_their_code(tmp_path: Path, ident: int | str) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        with trio.fail_after(10):
            for msg in (request("no/such/method", ident=ident),
                        request("tools/call", {"name": "echo", "arguments": {"text": 5}}, ident=ident)):
                assert (await srv.client.post("/mcp", json=msg, headers=session_headers(sid))).status_code == 200
        await until(lambda: srv.counter("mcp.requests.total", method="tools/call") == 1)
        with trio.fail_after(10):
            text = (await srv.client.get("/metrics")).text
        errors = {s.labels["code"]: s.value for fam in text_string_to_metric_families(text) for s in fam.samples
                  if s.name == "mcp_errors_total"}
        assert errors == {"-32601": 1.0, "INVALID_INPUT": 1.0}


SERVER = ["-m", "specactor.testing.everything", "--http", "--port", "0", "--no-session-log"]
BATCHES = "2025-03-26"  # the one version whose sessions take JSON-RPC batches


async def while_in_flight(client: httpx.AsyncClient, seconds: float,
                          act: Callable[[], Awaitable[None]]) -> tuple[int, list[Any]]:
    """POST the batch [sleep `seconds`, test_tool_with_progress] on a fresh 2025-03-26 session and
    run `act` once the first progress event arrives: proof that the batch, sleep included, is
    being handled (a log line would only say the request arrived). The sleep's request id, and
    the frames the stream carried."""
    sid = await initialize(client, version=BATCHES)
    batch = [request("tools/call", {"name": "sleep", "arguments": {"seconds": seconds}}),
             request("tools/call", {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": 1}})]
    acted = False

    async def on_frame(frame: Any) -> None:
        nonlocal acted
        if not acted and isinstance(frame, dict) and frame.get("method") == "notifications/progress":
            acted = True
            await act()

    async with client.stream("POST", "/mcp", json=batch, headers=session_headers(sid, version=BATCHES)) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        frames = await read_sse(resp, on_frame)
    assert acted
    return batch[0]["id"], frames


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_lets_the_call_in_flight_finish_and_the_process_exits_zero(tmp_path: Path,
                                                                                  signum: signal.Signals) -> None:
    async with subprocess_server([*SERVER, "--root", str(tmp_path)], server_env(SPECACTOR_GRACE_PERIOD="1"),
                                 tmp_path) as server:
        started = await server.record(lambda r: r.get("msg") == "specactor started")
        signalled = [0.0]

        async def send_signal() -> None:
            signalled[0] = trio.current_time()
            server.proc.send_signal(signum)

        async with httpx.AsyncClient(base_url=started["urls"][0].removesuffix("/mcp"), timeout=10) as client:
            with trio.fail_after(10):
                sleep_id, frames = await while_in_flight(client, 0.3, send_signal)
        stopping = await server.record(lambda r: r.get("msg") == "shutting down")
        assert stopping["reason"] == signum.name
        assert stopping["in_flight"] >= 1  # the signal arrived while the calls ran
        replies = {r["id"]: r for r in frames[-1]}  # the batch's answer, after the signal
        assert json.loads(replies[sleep_id]["result"]["content"][0]["text"])["data"] == {"slept": 0.3}
        with trio.fail_after(8):
            assert await server.proc.wait() == 0
        assert trio.current_time() - signalled[0] < 5
        assert "Traceback" not in server.stderr()


@pytest.mark.slow
async def test_a_call_outlasting_the_grace_period_is_cancelled_and_the_process_still_exits_zero(
        tmp_path: Path) -> None:
    async with subprocess_server([*SERVER, "--root", str(tmp_path)], server_env(SPECACTOR_GRACE_PERIOD="1"),
                                 tmp_path) as server:
        started = await server.record(lambda r: r.get("msg") == "specactor started")
        signalled = [0.0]

        async def send_sigterm() -> None:
            signalled[0] = trio.current_time()
            server.proc.send_signal(signal.SIGTERM)

        async with httpx.AsyncClient(base_url=started["urls"][0].removesuffix("/mcp"), timeout=20) as client:
            with trio.fail_after(10):
                try:
                    _, frames = await while_in_flight(client, 30, send_sigterm)
                except httpx.HTTPError:  # the server closed the connection mid-stream
                    frames = []
            with trio.fail_after(8):
                assert await server.proc.wait() == 0
        assert trio.current_time() - signalled[0] < 5  # grace period 1 s, not the call's 30 s
        warning = await server.record(lambda r: r.get("msg", "").startswith("grace period over"))
        assert warning["in_flight"] >= 1
        # the batch was cut off: its answer never came, and the client was not left waiting
        assert not any(isinstance(f, list) for f in frames)


@pytest.mark.slow
async def test_an_open_get_stream_does_not_hold_up_shutdown(tmp_path: Path) -> None:
    async with subprocess_server([*SERVER, "--root", str(tmp_path)], server_env(SPECACTOR_GRACE_PERIOD="3"),
                                 tmp_path) as server:
        started = await server.record(lambda r: r.get("msg") == "specactor started")
        async with httpx.AsyncClient(base_url=started["urls"][0].removesuffix("/mcp"), timeout=20) as client:
            sid = await initialize(client)
            with trio.fail_after(10):
                get = session_headers(sid, accept="text/event-stream")
                async with client.stream("GET", "/mcp", headers=get) as sse:
                    assert sse.status_code == 200
                    signalled = trio.current_time()
                    server.proc.send_signal(signal.SIGTERM)
                    assert await read_sse(sse, _ignore) == []  # the server ends the stream itself
            with trio.fail_after(8):
                assert await server.proc.wait() == 0
        assert trio.current_time() - signalled < 2  # well inside the 3 s grace period


async def _ignore(frame: dict[str, Any]) -> None:
    raise AssertionError(f"unexpected frame on the GET stream: {frame}")
