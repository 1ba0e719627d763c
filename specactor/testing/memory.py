"""An in-memory transport pair: a test client wired to a full server (actors and all).

Frames go through the same `Dispatcher.feed` path as stdio and HTTP, without a process or a
pipe, so most protocol and toolset tests run in milliseconds.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import trio

from specactor import app as application
from specactor.concurrency.peer import PeerLink
from specactor.config import Config
from specactor.protocol.frames import Reply
from specactor.protocol.registry import Registry
from specactor.protocol.session import Session
from specactor.protocol.versions import LATEST_LEGACY, LATEST_MODERN, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from specactor.toolsets import Services

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class MemoryConnection:
    def __init__(self, outbox: trio.MemorySendChannel[bytes]) -> None:
        self.session = Session()
        self.peer = PeerLink(self.send)
        self._outbox = outbox

    async def send(self, data: bytes) -> None:
        await self._outbox.send(data)

    async def reply(self, reply: Reply) -> None:
        await self._outbox.send(reply.data)

    def abandon(self, ident: int | str | None) -> None:
        """Nothing to do: the client simply gets no reply for a cancelled request."""


class MemoryClient:
    """The client end. `request` returns the whole reply message; notifications are kept in order."""

    def __init__(self, app: application.App, conn: MemoryConnection, inbox: trio.MemoryReceiveChannel[bytes]) -> None:
        self.app = app
        self.conn = conn
        self._inbox = inbox
        self._ids = itertools.count(1)
        self.notifications: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []  # server-to-client requests seen
        self.replies: dict[Any, Any] = {}
        self.raw: list[bytes] = []  # every frame the server sent, for schema checks

    async def send_raw(self, data: bytes) -> None:
        await self.app.dispatcher.feed(self.conn, data, time.time())

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(_encode(message))

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)

    async def receive(self, timeout: float = 5.0) -> Any:
        with trio.fail_after(timeout):
            data = await self._inbox.receive()
        self.raw.append(data)
        return _decode(data)

    async def _pump(self, timeout: float) -> None:
        msg = await self.receive(timeout)
        if isinstance(msg, list):
            for item in msg:
                self.replies[item.get("id")] = item
        elif "method" in msg and "id" in msg:
            self.requests.append(msg)
        elif "method" in msg:
            self.notifications.append(msg)
        else:
            self.replies[msg.get("id")] = msg

    async def reply_for(self, ident: Any, timeout: float = 5.0) -> Any:
        with trio.fail_after(timeout):
            while ident not in self.replies:
                await self._pump(timeout)
        return self.replies.pop(ident)

    async def request(self, method: str, params: dict[str, Any] | None = None, *, ident: Any = None,
                      timeout: float = 5.0) -> Any:
        ident = next(self._ids) if ident is None else ident
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)
        return await self.reply_for(ident, timeout)

    async def initialize(self, version: str = LATEST_LEGACY, capabilities: dict[str, Any] | None = None) -> Any:
        reply = await self.request("initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                                  "clientInfo": {"name": "memory-client", "version": "0"}})
        await self.notify("notifications/initialized")
        return reply

    async def modern(self, method: str, params: dict[str, Any] | None = None, *,
                     capabilities: dict[str, Any] | None = None, version: str = LATEST_MODERN, **kw: Any) -> Any:
        """A 2026-07-28 request: the `_meta` envelope is added to `params`."""
        params = dict(params or {})
        params["_meta"] = {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: capabilities or {},
                           **params.get("_meta", {})}
        return await self.request(method, params, **kw)


@asynccontextmanager
async def open_memory_server(config: Config | None = None, extra: Callable[[Registry, Services], None] | None = None,
                             *, root: Path | None = None) -> AsyncIterator[MemoryClient]:
    """A running server (all actors) and a client connected to it in memory."""
    if config is None:
        config = Config(root=str(root or Path.cwd()))
    built = application.build(config, extra)
    # Unbounded on the client side would hide backpressure bugs; 1024 replies is far more than
    # any test leaves unread.
    send, recv = trio.open_memory_channel[bytes](1024)
    async with trio.open_nursery() as nursery:
        await application.start_actors(built, nursery)
        conn = MemoryConnection(send)
        application.notify_changes(built, nursery, lambda: [conn])
        yield MemoryClient(built, conn, recv)
        nursery.cancel_scope.cancel()
