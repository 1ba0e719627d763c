"""Helpers for the protocol tests: a schema-checked in-memory server, frame checks, a barrier.

`serve` is `open_memory_server` plus the conformance fixtures, like the `memory_client`
fixture, but its frame check accepts what `tests/mcp_schema.validate` cannot yet: JSON-RPC's
`"id": null` on an error whose request id was unreadable, and error frames of 2025-03-26 /
2025-06-18 sessions (that schema calls the definition `JSONRPCError`).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import trio

from specactor.config import SessionLogConfig
from specactor.protocol.registry import Registry
from specactor.testing import MemoryClient, everything, open_memory_server
from tests.conftest import fixture_config
from tests.mcp_schema import validate

# Every code the server may answer with: JSON-RPC's own, legacy resource-not-found, the 2026 ones.
ERROR_CODES = frozenset({-32700, -32600, -32601, -32602, -32603, -32002, -32020, -32021, -32022})
NO_SESSION_LOG = SessionLogConfig(enabled=False)

_decode = msgspec.json.Decoder().decode
_barriers = itertools.count(1)


def session_version(client: MemoryClient) -> str:
    session = client.conn.session
    return session.protocol_version or ("2026-07-28" if session.era == "modern" else "2025-11-25")


def check_frame(version: str, frame: Any, method: str | None = None) -> None:
    """`validate`, except that an error frame may carry `"id": null` (JSON-RPC 2.0 section 5)."""
    if isinstance(frame, list):
        assert frame, "the server sent an empty batch reply"
        for item in frame:
            check_frame(version, item)
        return
    if "error" not in frame:
        validate(version, frame, method)
        return
    assert frame.get("jsonrpc") == "2.0" and "result" not in frame, frame
    ident = frame.get("id")
    assert "id" not in frame or (isinstance(ident, (int, str)) and not isinstance(ident, bool)), frame
    assert frame["error"]["code"] in ERROR_CODES, frame
    validate(version, frame)


def check_all(client: MemoryClient) -> None:
    version = session_version(client)
    for raw in client.raw:
        check_frame(version, _decode(raw))


@asynccontextmanager
async def serve(tmp_path: Path, extra: Callable[[Registry], None] | None = None,
                **overrides: Any) -> AsyncIterator[MemoryClient]:
    """A server with the fixtures (plus `extra(registry)`); every frame it sent is checked at the end."""

    def register(registry: Registry, services: Any) -> None:
        everything.register(registry, services)
        if extra is not None:
            extra(registry)

    async with open_memory_server(fixture_config(tmp_path, **overrides), register) as client:
        yield client
        check_all(client)


async def settle(client: MemoryClient, timeout: float = 5.0) -> dict[str, Any]:
    """Wait until the server has answered everything sent so far, then round-trip a barrier
    request (ping, or server/discover on a 2026-07-28 connection): every reply to earlier
    requests is then in `client.replies`. Returns the barrier's reply."""
    with trio.fail_after(timeout):
        await client.app.dispatcher.wait_idle()
    ident = f"barrier-{next(_barriers)}"
    if client.conn.session.era == "modern":
        reply = await client.modern("server/discover", ident=ident, timeout=timeout)
    else:
        reply = await client.request("ping", ident=ident, timeout=timeout)
    assert "result" in reply, reply
    return reply


async def wait_for_notification(client: MemoryClient, method: str, timeout: float = 5.0) -> dict[str, Any]:
    """Read frames (keeping them where `MemoryClient` keeps them) until a `method` notification arrives."""
    with trio.fail_after(timeout):
        while True:
            for note in client.notifications:
                if note["method"] == method:
                    return note
            msg = await client.receive(timeout)
            if isinstance(msg, dict) and "method" in msg and "id" in msg:
                client.requests.append(msg)
            elif isinstance(msg, dict) and "method" in msg:
                client.notifications.append(msg)
            elif isinstance(msg, dict):
                client.replies[msg.get("id")] = msg
            else:
                for item in msg:
                    client.replies[item.get("id")] = item


def envelope(reply: dict[str, Any]) -> dict[str, Any]:
    """The seed envelope of a tools/call reply, from structuredContent or the text copy."""
    result = reply["result"]
    if "structuredContent" in result:
        return result["structuredContent"]
    return msgspec.json.decode(result["content"][0]["text"])
