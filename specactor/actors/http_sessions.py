"""The HTTP transport's handshake-era sessions: `Mcp-Session-Id` → protocol state and GET stream.

A session is created by an `initialize` POST (at most `max_sessions` at once), ended by a
DELETE or by `session_idle_timeout` without a request (its requests are then cancelled), and
may hold one GET stream, the way notifications that belong to no request reach the client.
Only the HTTP actor's task and its reaper touch the table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import trio

from specactor.actors.dispatcher import Dispatcher
from specactor.actors.http_exchange import KEEPALIVE, SSE_HEADERS, Receive, Send, sse_event
from specactor.concurrency.peer import PeerLink, Pending
from specactor.config import HttpConfig
from specactor.logsetup import get_logger
from specactor.protocol.context import Peer
from specactor.protocol.session import Session

log = get_logger("specactor.http")

STREAM_FRAMES = 256  # notifications a GET stream holds for a slow reader; past that, new ones are dropped


@dataclass
class HttpSession:
    """One handshake-era session: its protocol state and its optional GET stream."""

    id: str
    session: Session = field(default_factory=Session)
    pending: Pending = field(default_factory=dict)  # server-to-client requests awaiting a reply, any POST's
    last_seen: float = field(default_factory=time.monotonic)
    active: int = 0  # POSTs being answered
    stream: trio.MemorySendChannel[bytes] | None = None
    peer: PeerLink = field(init=False)  # reaches the client on the GET stream

    def __post_init__(self) -> None:
        self.peer = PeerLink(self.push, self.pending)

    async def push(self, frame: bytes) -> None:
        """Put `frame` on the GET stream, if one is open; a slow or gone reader loses it, and
        never blocks the server."""
        if self.stream is not None:
            try:
                self.stream.send_nowait(frame)
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                pass


class LegacySessions:
    """Args:
        cfg: `max_sessions` and `session_idle_timeout`.
        dispatcher: cancels an ended session's requests.
        stopping: set when the server shuts down; GET streams then end.
    """

    def __init__(self, cfg: HttpConfig, dispatcher: Dispatcher, stopping: trio.Event) -> None:
        self.cfg = cfg
        self.dispatcher = dispatcher
        self.stopping = stopping
        self.by_id: dict[str, HttpSession] = {}
        self.starting = 0  # initializes in flight, counted against the cap before they are answered

    def get(self, sid: str) -> HttpSession | None:
        return self.by_id.get(sid)

    def full(self) -> bool:
        """Whether another session would pass `max_sessions`, after ending the idle ones if needed."""
        if len(self.by_id) + self.starting >= self.cfg.max_sessions:
            self.reap_idle()
        return len(self.by_id) + self.starting >= self.cfg.max_sessions

    def add(self, hs: HttpSession) -> None:
        self.by_id[hs.id] = hs

    def end(self, hs: HttpSession) -> None:
        """Forget `hs`, close its GET stream and cancel its requests."""
        self.by_id.pop(hs.id, None)
        if hs.stream is not None:
            hs.stream.close()
        self.dispatcher.cancel_all(hs.session)

    def audience(self) -> list[tuple[Session, Peer]]:
        """The sessions a notification could reach now (those with a GET stream), with their peer."""
        return [(hs.session, hs.peer) for hs in self.by_id.values() if hs.stream is not None]

    def reap_idle(self) -> None:
        deadline = time.monotonic() - self.cfg.session_idle_timeout
        idle = [s for s in self.by_id.values() if s.active == 0 and s.stream is None and s.last_seen < deadline]
        for hs in idle:
            log.info("session idle; ended", session=hs.id)
            self.end(hs)

    async def reap_forever(self) -> None:
        every = min(30.0, self.cfg.session_idle_timeout / 4)
        while True:
            await trio.sleep(every)
            self.reap_idle()

    async def stream(self, hs: HttpSession, receive: Receive, send: Send) -> None:
        """Serve `hs`'s GET stream until the client hangs up or the server stops."""
        hs.stream, frames = trio.open_memory_channel[bytes](STREAM_FRAMES)
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        try:
            async with trio.open_nursery() as nursery:
                async def closer() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()

                async def stopper() -> None:
                    await self.stopping.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(closer)
                nursery.start_soon(stopper)
                while True:
                    with trio.move_on_after(KEEPALIVE) as quiet:
                        try:
                            frame = await frames.receive()
                        except trio.EndOfChannel:
                            break
                    body = b": keepalive\n\n" if quiet.cancelled_caught else sse_event(frame)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                nursery.cancel_scope.cancel()
        finally:
            if hs.stream is not None:
                hs.stream.close()
            hs.stream = None
        await send({"type": "http.response.body", "body": b""})
