"""Streamable HTTP in the legacy (2025-*) era: sessions, JSON or SSE replies, the GET stream,
the idle reaper and the session cap."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.http.support import (
    BASE_HEADERS,
    TLS,
    frames_of,
    http_server,
    init_request,
    initialize,
    legacy_call,
    notification,
    post_and_wait,
    read_sse,
    request,
    request_ids,
    session_headers,
    sse_events,
    structured,
    until,
)

ECHO = {"name": "echo", "arguments": {"text": "hello"}}


async def test_initialize_returns_a_visible_ascii_session_id_that_later_requests_use(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=init_request(), headers=BASE_HEADERS)
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("application/json")
        assert resp.json()["result"]["protocolVersion"] == "2025-11-25"
        sid = resp.headers["mcp-session-id"]
        assert re.fullmatch(r"[\x21-\x7e]+", sid)
        assert structured(await legacy_call(srv.client, sid, "tools/call", ECHO)) == {"text": "hello"}


@pytest.mark.parametrize(("asked", "answered"), [("2025-03-26", "2025-03-26"), ("2025-06-18", "2025-06-18"),
                                                 ("1999-01-01", "2025-11-25"), ("2026-07-28", "2025-11-25")])
async def test_initialize_negotiates_the_requested_legacy_version_or_the_latest(tmp_path: Path, asked: str,
                                                                                answered: str) -> None:
    async with http_server(tmp_path) as srv:
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=init_request(asked), headers=BASE_HEADERS)
        assert resp.json()["result"]["protocolVersion"] == answered


async def test_a_second_initialize_on_a_session_is_refused(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=init_request(), headers=session_headers(sid))
        assert resp.status_code == 400
        assert resp.json()["error"]["code"] == -32600
        assert "mcp-session-id" not in resp.headers


async def test_each_initialize_starts_a_distinct_session(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        ids = {await initialize(srv.client) for _ in range(5)}
        assert len(ids) == 5
        assert ids <= set(srv.transport.sessions)


async def test_a_request_without_a_session_id_is_400(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        await initialize(srv.client)
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=request("tools/list"), headers=BASE_HEADERS)
        assert resp.status_code == 400
        assert resp.json()["error"]["code"] == -32600


async def test_a_request_with_an_unknown_session_id_is_404(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=request("tools/list"), headers=session_headers("no-such-session"))
        assert resp.status_code == 404
        assert "error" in resp.json()


async def test_delete_ends_the_session_and_later_requests_on_it_are_404(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        with trio.fail_after(10):
            gone = await srv.client.delete("/mcp", headers=session_headers(sid))
            assert gone.status_code == 200
            assert sid not in srv.transport.sessions
            after = await srv.client.post("/mcp", json=request("tools/list"), headers=session_headers(sid))
            again = await srv.client.delete("/mcp", headers=session_headers(sid))
        assert after.status_code == 404
        assert again.status_code == 404


async def test_a_notification_is_accepted_with_202_and_no_body(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client, initialized=False)
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=notification("notifications/initialized"),
                                         headers=session_headers(sid))
        assert resp.status_code == 202
        assert resp.content == b""
        assert srv.transport.sessions[sid].session.initialized


async def test_an_unsupported_protocol_version_header_is_400(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=request("tools/list"),
                                         headers=session_headers(sid, version="1999-01-01"))
        assert resp.status_code == 400
        assert "1999-01-01" in resp.json()["error"]["message"]


async def test_a_reply_that_comes_first_is_sent_as_json(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        msg = request("tools/call", ECHO)
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=msg, headers=session_headers(sid))
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("application/json")
        assert resp.json()["id"] == msg["id"]
        assert structured(resp.json()) == {"text": "hello"}


async def test_progress_before_the_reply_turns_the_response_into_an_sse_stream(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        msg = request("tools/call", {"name": "test_tool_with_progress", "arguments": {},
                                     "_meta": {"progressToken": "tok-7"}})
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=msg, headers=session_headers(sid))
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.text.startswith("event: message\ndata: ")
        events = sse_events(resp.text)
        assert {name for name, _ in events} == {"message"}
        frames = [json.loads(data) for _, data in events]
        progress = [f["params"] for f in frames if f.get("method") == "notifications/progress"]
        assert [p["progress"] for p in progress] == [0, 50, 100]
        assert {p["progressToken"] for p in progress} == {"tok-7"}
        assert frames[-1]["id"] == msg["id"] and "result" in frames[-1]


async def test_a_json_only_client_gets_the_reply_as_json_even_after_progress(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        msg = request("tools/call", {"name": "test_tool_with_progress", "arguments": {},
                                     "_meta": {"progressToken": 1}})
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=msg, headers=session_headers(sid, accept="application/json"))
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("application/json")
        assert resp.json()["id"] == msg["id"]
        assert resp.json()["result"]["content"][0]["text"] == "1"


async def test_the_get_stream_carries_list_changed_a_second_get_is_409_and_delete_closes_it(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        get_headers = session_headers(sid, accept="text/event-stream")

        async def on_frame(frame: dict[str, Any]) -> None:
            assert frame == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}
            assert (await srv.client.delete("/mcp", headers=session_headers(sid))).status_code == 200

        with trio.fail_after(10):
            async with srv.client.stream("GET", "/mcp", headers=get_headers) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                second = await srv.client.get("/mcp", headers=get_headers)
                assert second.status_code == 409
                changed = await legacy_call(srv.client, sid, "tools/call",
                                            {"name": "test_trigger_tool_change", "arguments": {}})
                assert changed["result"]["content"][0]["text"] == "added test_temporary_tool"
                frames = await read_sse(stream, on_frame)  # ends when DELETE ends the session
        assert len(frames) == 1


async def test_a_get_stream_without_a_session_is_400_and_with_an_unknown_one_404(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        with trio.fail_after(10):
            missing = await srv.client.get("/mcp", headers={"accept": "text/event-stream"})
            unknown = await srv.client.get("/mcp", headers=session_headers("nope", accept="text/event-stream"))
        assert missing.status_code == 400
        assert unknown.status_code == 404


async def test_idle_sessions_are_reaped_but_not_while_a_request_runs(tmp_path: Path) -> None:
    async with http_server(tmp_path, session_idle_timeout=0.2) as srv:
        idle = await initialize(srv.client)
        busy = await initialize(srv.client)
        # A call four times longer than the idle timeout: the session stays while it runs.
        reply = await legacy_call(srv.client, busy, "tools/call", {"name": "sleep", "arguments": {"seconds": 0.8}})
        assert structured(reply) == {"slept": 0.8}
        assert idle not in srv.transport.sessions
        await until(lambda: busy not in srv.transport.sessions)
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=request("tools/list"), headers=session_headers(busy))
        assert resp.status_code == 404


async def test_reap_idle_ends_only_sessions_idle_past_the_timeout(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        old = await initialize(srv.client)
        fresh = await initialize(srv.client)
        srv.transport.sessions[old].last_seen -= srv.transport.cfg.session_idle_timeout + 1
        srv.transport.legacy.reap_idle()
        assert old not in srv.transport.sessions
        assert fresh in srv.transport.sessions


async def test_sessions_beyond_max_sessions_are_refused_with_503(tmp_path: Path) -> None:
    async with http_server(tmp_path, max_sessions=2) as srv:
        first = await initialize(srv.client)
        await initialize(srv.client)
        with trio.fail_after(10):
            refused = await srv.client.post("/mcp", json=init_request(), headers=BASE_HEADERS)
            assert refused.status_code == 503
            assert "mcp-session-id" not in refused.headers
            assert (await srv.client.delete("/mcp", headers=session_headers(first))).status_code == 200
            admitted = await srv.client.post("/mcp", json=init_request(), headers=BASE_HEADERS)
        assert admitted.status_code == 200
        assert "mcp-session-id" in admitted.headers


async def test_a_json_rpc_error_reply_ends_the_response_as_json(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        msg = request("tools/call", {"name": "no_such_tool", "arguments": {}})
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=msg, headers=session_headers(sid))
        assert resp.headers["content-type"].startswith("application/json")
        assert resp.json()["id"] == msg["id"]
        assert resp.json()["error"]["code"] == -32602


async def test_a_json_only_client_gets_an_error_reply(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=request("no/such/method"),
                                         headers=session_headers(sid, accept="application/json"))
        assert resp.json()["error"]["code"] == -32601


@pytest.mark.parametrize("ident", request_ids())
async def test_a_failed_initialize_is_answered_and_creates_no_session(tmp_path: Path, ident: int | str) -> None:
    async with http_server(tmp_path) as srv:
        bad = request("initialize", {"protocolVersion": 7}, ident=ident)
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", json=bad, headers=BASE_HEADERS)
        assert frames_of(resp)[-1]["error"]["code"] == -32602
        assert "mcp-session-id" not in resp.headers
        assert srv.transport.sessions == {}


async def test_a_request_cancelled_by_notifications_cancelled_ends_its_post_without_a_reply(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        done: list[httpx.Response | None] = []
        body = request("tools/call", {"name": "sleep", "arguments": {"seconds": 30}}, ident="slow-1")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post_and_wait, srv.client, body, session_headers(sid), done)
            await until(lambda: srv.app.dispatcher.in_flight == 1)
            cancel = notification("notifications/cancelled", {"requestId": "slow-1", "reason": "no longer needed"})
            with trio.fail_after(10):
                assert (await srv.client.post("/mcp", json=cancel, headers=session_headers(sid))).status_code == 202
            await until(lambda: srv.app.dispatcher.in_flight == 0, timeout=2)
            assert srv.counter("mcp.errors.total", code="cancelled") == 1
            # the handler has stopped: its POST must end now, not hang until the client leaves
            await until(lambda: done[0] is not None, timeout=2)
        assert done[0] is not None and b'"result"' not in done[0].content


async def test_delete_ends_the_posts_still_running_on_the_session(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        done: list[httpx.Response | None] = []
        body = request("tools/call", {"name": "sleep", "arguments": {"seconds": 30}})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post_and_wait, srv.client, body, session_headers(sid), done)
            await until(lambda: srv.app.dispatcher.in_flight == 1)
            with trio.fail_after(10):
                assert (await srv.client.delete("/mcp", headers=session_headers(sid))).status_code == 200
            await until(lambda: srv.app.dispatcher.in_flight == 0)
            await until(lambda: done[0] is not None, timeout=2)
        assert done[0] is not None and b'"result"' not in done[0].content


async def fresh_initialize(base: str, statuses: list[int]) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=10, verify=TLS) as client:
        statuses.append((await client.post("/mcp", json=init_request(), headers=BASE_HEADERS)).status_code)


async def test_concurrent_initializes_never_exceed_max_sessions(tmp_path: Path) -> None:
    async with http_server(tmp_path, max_sessions=2) as srv:
        for _ in range(3):  # fresh connections each round, so the initializes really overlap
            for sid in list(srv.transport.sessions):
                assert (await srv.client.delete("/mcp", headers=session_headers(sid))).status_code == 200
            statuses: list[int] = []
            with trio.fail_after(20):
                async with trio.open_nursery() as nursery:
                    for _ in range(30):
                        nursery.start_soon(fresh_initialize, srv.base, statuses)
            assert sorted(set(statuses)) == [200, 503]
            assert statuses.count(200) == 2
            assert len(srv.transport.sessions) == 2
