"""Many clients at once over HTTP: every one gets its own answers, sessions never share state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import trio

from tests.http.support import (
    TLS,
    frames_of,
    http_server,
    initialize,
    legacy_call,
    modern_headers,
    modern_params,
    request,
    session_headers,
    structured,
)

CLIENTS = 150
LOGS = ["Tool execution started", "Tool processing data", "Tool execution completed"]


def level_of(i: int) -> str:
    return "debug" if i % 2 == 0 else "error"


async def legacy_client(base: str, i: int, results: dict[int, dict[str, Any]]) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30, verify=TLS) as client:
        sid = await initialize(client)
        tools = await legacy_call(client, sid, "tools/list")
        assert "echo" in {t["name"] for t in tools["result"]["tools"]}
        await legacy_call(client, sid, "logging/setLevel", {"level": level_of(i)})
        echo = await legacy_call(client, sid, "tools/call", {"name": "echo", "arguments": {"text": f"client-{i}"}})
        msg = request("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
        logged = await client.post("/mcp", json=msg, headers=session_headers(sid))
        assert logged.status_code == 200
        frames = frames_of(logged)
        assert frames[-1]["id"] == msg["id"] and "result" in frames[-1]
        results[i] = {"sid": sid, "echo": structured(echo)["text"],
                      "logs": [f["params"]["data"] for f in frames if f.get("method") == "notifications/message"]}


async def test_150_concurrent_legacy_clients_each_get_their_own_session_and_answers(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        results: dict[int, dict[str, Any]] = {}
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for i in range(CLIENTS):
                    nursery.start_soon(legacy_client, srv.base, i, results)
        assert sorted(results) == list(range(CLIENTS))
        assert len({r["sid"] for r in results.values()}) == CLIENTS
        for i, result in results.items():
            assert result["echo"] == f"client-{i}"
            # logging/setLevel is per session: debug sessions see the info logs, error sessions none
            assert result["logs"] == (LOGS if level_of(i) == "debug" else [])
            assert srv.transport.sessions[result["sid"]].session.log_level == level_of(i)


async def modern_client(base: str, i: int, results: dict[int, dict[str, Any]]) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30, verify=TLS) as client:
        listed = await client.post("/mcp", json=request("tools/list", modern_params()),
                                   headers=modern_headers("tools/list"))
        assert "echo" in {t["name"] for t in listed.json()["result"]["tools"]}
        echo_body = request("tools/call", modern_params({"name": "echo", "arguments": {"text": f"modern-{i}"}}))
        echo = await client.post("/mcp", json=echo_body, headers=modern_headers("tools/call", "echo"))
        assert echo.json()["id"] == echo_body["id"]
        # the log level travels in each request's _meta: only the requests that name one get logs
        meta = {"io.modelcontextprotocol/logLevel": "info"} if i % 2 == 0 else {}
        log_body = request("tools/call", modern_params({"name": "test_tool_with_logging", "arguments": {}}, **meta))
        logged = await client.post("/mcp", json=log_body,
                                   headers=modern_headers("tools/call", "test_tool_with_logging"))
        frames = frames_of(logged)
        assert frames[-1]["id"] == log_body["id"] and frames[-1]["result"]["resultType"] == "complete"
        assert "mcp-session-id" not in echo.headers
        results[i] = {"echo": structured(echo.json())["text"],
                      "logs": [f["params"]["data"] for f in frames if f.get("method") == "notifications/message"]}


async def test_150_concurrent_modern_clients_each_get_their_own_answers(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        results: dict[int, dict[str, Any]] = {}
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for i in range(CLIENTS):
                    nursery.start_soon(modern_client, srv.base, i, results)
        assert sorted(results) == list(range(CLIENTS))
        for i, result in results.items():
            assert result["echo"] == f"modern-{i}"
            assert result["logs"] == (LOGS if i % 2 == 0 else [])
        assert srv.transport.sessions == {}  # stateless: nothing is kept per client


async def test_150_requests_on_one_session_over_one_pooled_client_all_come_back_to_their_callers(
        tmp_path: Path) -> None:
    async with http_server(tmp_path, max_connections=CLIENTS) as srv:
        sid = await initialize(srv.client)
        answers: dict[int, str] = {}

        async def call(i: int) -> None:
            reply = await legacy_call(srv.client, sid, "tools/call", {"name": "echo", "arguments": {"text": f"#{i}"}})
            answers[i] = structured(reply)["text"]

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for i in range(CLIENTS):
                    nursery.start_soon(call, i)
        assert answers == {i: f"#{i}" for i in range(CLIENTS)}
