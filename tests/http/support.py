"""Helpers for the Streamable HTTP tests: an in-process server, request builders, an SSE reader,
and a subprocess server for what is about the process (signals, refusing to start)."""

from __future__ import annotations

import itertools
import json
import os
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import trio

from specactor.actors.http import HttpTransport
from specactor.app import App, build, start_actors
from specactor.config import HttpConfig, SessionLogConfig
from specactor.testing import everything
from tests.conftest import fixture_config

ROOT = Path(__file__).resolve().parents[2]
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT_BOTH = "application/json, text/event-stream"
BASE_HEADERS = {"accept": ACCEPT_BOTH, "content-type": "application/json"}
CLIENT_INFO = {"name": "http-tests", "version": "0"}
_ids = itertools.count(1)
# shared by the many short-lived clients of a test: httpx builds one per client otherwise (~25 ms)
TLS = ssl.create_default_context()

# specactor/actors/http.py HttpTransport._exchange waits for the request's reply frame; when the
# dispatcher cancels the request (notifications/cancelled, or DELETE ending the session) no reply
# ever comes and nothing else ends the POST response.
UUID_ID = "3f2b8c1e-9d4a-4e7b-8f61-2c5d9a0e7b13"


def request_ids() -> list[Any]:
    """Parameters for a test that must hold for any request id: an int, and a UUID string."""
    return [pytest.param(7, id="int-id"), pytest.param(UUID_ID, id="uuid-id")]


@dataclass
class Server:
    app: App
    transport: HttpTransport
    base: str  # http://127.0.0.1:PORT
    client: httpx.AsyncClient  # base_url=base

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def counter(self, name: str, **labels: str) -> float:
        """A counter of the metrics actor (summed over series matching `labels`)."""
        series = self.app.metrics.statistics().counters.get(name, {})
        return sum(v for key, v in series.items() if all(dict(key).get(k) == val for k, val in labels.items()))


@asynccontextmanager
async def http_server(tmp_path: Path, *, max_connections: int = 20, **http: Any) -> AsyncIterator[Server]:
    """specactor's HTTP transport with the conformance fixtures, in this test's trio run."""
    config = fixture_config(tmp_path, http=HttpConfig(port=0, **http), session_log=SessionLogConfig(enabled=False),
                            grace_period=1.0)
    app = build(config, everything.register, name="specactor-everything")
    async with trio.open_nursery() as nursery:
        await start_actors(app, nursery)
        transport = HttpTransport(app.core, app.dispatcher, app.config, app.metrics)
        with trio.fail_after(10):
            await nursery.start(transport.run)
        base = transport.binds[0].rstrip("/")
        assert base.startswith("http://127.0.0.1:"), transport.binds
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        async with httpx.AsyncClient(base_url=base, timeout=10, limits=limits) as client:
            yield Server(app, transport, base, client)
        transport.stopping.set()
        nursery.cancel_scope.cancel()


# ---------------------------------------------------------------------------- messages


def request(method: str, params: dict[str, Any] | None = None, ident: int | str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": next(_ids) if ident is None else ident, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def init_request(version: str = LEGACY, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return request("initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                  "clientInfo": CLIENT_INFO})


def session_headers(sid: str, version: str = LEGACY, **extra: str) -> dict[str, str]:
    return {**BASE_HEADERS, "mcp-session-id": sid, "mcp-protocol-version": version, **extra}


async def initialize(client: httpx.AsyncClient, *, initialized: bool = True, version: str = LEGACY) -> str:
    """A legacy session: initialize (and notifications/initialized); the session id."""
    with trio.fail_after(10):
        reply = await client.post("/mcp", json=init_request(version), headers=BASE_HEADERS)
        assert reply.status_code == 200, reply.text
        assert reply.json()["result"]["protocolVersion"] == version
        sid = reply.headers["mcp-session-id"]
        if initialized:
            done = await client.post("/mcp", json=notification("notifications/initialized"),
                                     headers=session_headers(sid, version))
            assert done.status_code == 202, done.text
    return sid


async def legacy_call(client: httpx.AsyncClient, sid: str, method: str, params: dict[str, Any] | None = None,
                      **headers: str) -> dict[str, Any]:
    """POST one request on a legacy session; its reply (the last frame of an SSE response)."""
    msg = request(method, params)
    with trio.fail_after(10):
        resp = await client.post("/mcp", json=msg, headers=session_headers(sid, **headers))
    assert resp.status_code == 200, resp.text
    frames = frames_of(resp)
    assert frames[-1].get("id") == msg["id"], frames
    return frames[-1]


def modern_params(params: dict[str, Any] | None = None, /, **meta: Any) -> dict[str, Any]:
    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO, **meta}
    return {**(params or {}), "_meta": envelope}


def modern_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {**BASE_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return {**headers, **extra}


def modern_request(method: str, params: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """A 2026-07-28 body and the headers that mirror it."""
    key = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(method)
    name = (params or {}).get(key) if key else None
    return request(method, modern_params(params)), modern_headers(method, name)


async def modern_call(client: httpx.AsyncClient, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body, headers = modern_request(method, params)
    with trio.fail_after(10):
        resp = await client.post("/mcp", json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    frames = frames_of(resp)
    assert frames[-1].get("id") == body["id"], frames
    return frames[-1]


# ---------------------------------------------------------------------------- responses


def sse_events(text: str) -> list[tuple[str, str]]:
    """(event, data) pairs of an SSE body; comments (keepalives) are skipped."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            events.append((name, "\n".join(data)))
    return events


def frames_of(resp: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC frames of a POST response, JSON or SSE."""
    ctype = resp.headers.get("content-type", "")
    if ctype.startswith("text/event-stream"):
        return [json.loads(data) for _, data in sse_events(resp.text)]
    assert ctype.startswith("application/json"), (resp.status_code, ctype, resp.text)
    return [resp.json()]


async def read_sse(stream: httpx.Response, react: Callable[[Any], Awaitable[None]]) -> list[Any]:
    """Every frame of an open SSE response until the server ends it, awaiting `react` on each as
    it arrives (the caller bounds the wait). Reading to the end, rather than breaking off, lets
    httpx's nested async generators finish instead of being garbage collected half-way."""
    text, seen = "", 0
    frames: list[Any] = []  # JSON-RPC objects, or a batch's array
    async with aclosing(stream.aiter_text()) as chunks:  # type: ignore[type-var]
        async for chunk in chunks:
            text += chunk
            end = text.rfind("\n\n")  # events end with a blank line; what follows is still in transit
            complete = text[:end + 2] if end >= 0 else ""
            frames = [json.loads(data) for _, data in sse_events(complete)]
            for frame in frames[seen:]:
                await react(frame)
            seen = len(frames)
    return frames


async def post_and_wait(client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str],
                        done: list[httpx.Response | None]) -> None:
    """POST, appending the response (None while it runs) to `done`: for calls a test interrupts."""
    done.append(None)
    done[-1] = await client.post("/mcp", json=body, headers=headers)


def structured(reply: dict[str, Any]) -> Any:
    """A fixture tool's answer: the `data` of its structured envelope."""
    content = reply["result"]["structuredContent"]
    assert content["success"] is True, content
    return content["data"]


async def until(predicate: Callable[[], bool], timeout: float = 5.0, step: float = 0.01) -> None:
    """Poll `predicate` until it holds; fails after `timeout`."""
    with trio.fail_after(timeout):
        while not predicate():  # noqa: ASYNC110 - server-side state with no event to wait on: poll, bounded
            await trio.sleep(step)


# ---------------------------------------------------------------------------- subprocess server


@dataclass
class Process:
    proc: trio.Process
    records: trio.MemoryReceiveChannel[dict[str, Any]]  # stderr log lines, parsed
    lines: list[bytes]  # every stderr line

    async def record(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 15.0) -> dict[str, Any]:
        """The next log record matching `predicate`."""
        with trio.fail_after(timeout):
            async for rec in self.records:
                if predicate(rec):
                    return rec
        raise AssertionError(f"the process ended before logging the record; stderr: {self.stderr()}")

    def stderr(self) -> str:
        return b"".join(self.lines).decode(errors="replace")[-3000:]


def server_env(**extra: str) -> dict[str, str]:
    """The test's environment without SPECACTOR_* settings, and one HTTP process unless `extra`
    asks for more (`test_workers` covers several)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECACTOR_")}
    env["PYTHONPATH"] = str(ROOT)
    env["SPECACTOR_HTTP_WORKERS"] = "1"
    return {**env, **extra}


@asynccontextmanager
async def subprocess_server(args: list[str], env: dict[str, str], cwd: Path) -> AsyncIterator[Process]:
    """A server process whose stderr log records are readable; killed at the end if still running."""
    proc = await trio.lowlevel.open_process([sys.executable, *args], stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, env=env)
    send, receive = trio.open_memory_channel[dict[str, Any]](1000)
    lines: list[bytes] = []

    async def pump() -> None:
        assert proc.stderr is not None
        buf = b""
        async with send:
            while chunk := await proc.stderr.receive_some(65536):
                buf += chunk
                *complete, buf = buf.split(b"\n")
                for line in complete:
                    lines.append(line + b"\n")
                    try:
                        rec = msgspec.json.decode(line)
                    except msgspec.DecodeError:
                        continue
                    if isinstance(rec, dict):
                        send.send_nowait(rec)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump)
            yield Process(proc, receive, lines)
            nursery.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.move_on_after(5):
                await proc.wait()
