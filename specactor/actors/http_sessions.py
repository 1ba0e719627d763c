"""The HTTP transport's handshake-era sessions: `Mcp-Session-Id` → protocol state and GET stream.

A session is created by an `initialize` POST (at most `max_sessions` at once), ended by a
DELETE or by `session_idle_timeout` without a request (its requests are then cancelled), and
may hold one GET stream, the way notifications that belong to no request reach the client.
Only the HTTP actor's task and its reaper touch the table.

With several worker processes (`shared`), this table is a cache of `shared_sessions`: each
request checks the session's row (ended? changed elsewhere?), a change is stored before its
reply leaves, and `follow_shared` brings in what other workers learnt for this worker's open
requests and streams (a DELETE elsewhere, the client's reply to a request this worker sent).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import trio

from specactor.actors.dispatcher import Dispatcher
from specactor.actors.http_exchange import KEEPALIVE, SSE_HEADERS, Receive, Send, sse_event
from specactor.actors.shared_sessions import SessionState, SharedSessions
from specactor.concurrency.peer import PeerLink, Pending
from specactor.config import HttpConfig
from specactor.logsetup import get_logger
from specactor.protocol.context import Peer
from specactor.protocol.frames import Incoming, parse
from specactor.protocol.session import Session

log = get_logger("specactor.http")

STREAM_FRAMES = 256  # notifications a GET stream holds for a slow reader; past that, new ones are dropped
# Shared mode: how often a worker looks for replies that reached another worker while one of its
# requests to a client waits (rare: elicitation, sampling, roots), and otherwise for sessions
# ended elsewhere that it still streams to or answers.
REPLY_POLL = 0.02
ENDED_POLL = 0.5


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
    # shared mode: the row's version this copy reflects, and what was last stored
    version: int = 0
    saved: SessionState | None = None
    saved_subs: frozenset[str] = frozenset()
    touched: float = 0.0  # when this worker last stored last_seen

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
        shared: the table all worker processes share; None in a single process.
    """

    def __init__(self, cfg: HttpConfig, dispatcher: Dispatcher, stopping: trio.Event,
                 shared: SharedSessions | None = None) -> None:
        self.cfg = cfg
        self.dispatcher = dispatcher
        self.stopping = stopping
        self.shared = shared
        self.by_id: dict[str, HttpSession] = {}
        self.starting = 0  # initializes in flight, counted against the cap before they are answered
        self.touch_every = min(5.0, cfg.session_idle_timeout / 10)

    def get(self, sid: str) -> HttpSession | None:
        hs = self.by_id.get(sid)
        if self.shared is None:
            return hs
        head = self.shared.head(sid)
        if head is None or head.ended:
            if hs is not None:
                self._drop(hs)
            return None
        if hs is None or hs.version != head.version:
            stored = self.shared.load(sid)
            if stored is None:
                return None
            if hs is None:
                hs = self.by_id[sid] = HttpSession(sid)
            stored.state.apply(hs.session)
            hs.session.subscriptions.clear()
            hs.session.subscriptions.update(stored.subscriptions)
            hs.version, hs.saved, hs.saved_subs = stored.version, stored.state, stored.subscriptions
        now = time.time()
        if now - hs.touched > self.touch_every:
            self.shared.touch([sid])
            hs.touched = now
        return hs

    def save(self, hs: HttpSession) -> None:
        """Store `hs`'s protocol state and subscriptions if they changed (shared mode): before a
        reply leaves, so the client's next request finds them on any worker."""
        if self.shared is None:
            return
        state, subs = SessionState.of(hs.session), hs.session.subscriptions
        if state == hs.saved and subs == hs.saved_subs:
            return
        if hs.saved is None:
            hs.version = self.shared.insert(hs.id, state, subs)
            hs.touched = time.time()
        else:
            version = self.shared.update(hs.id, state if state != hs.saved else None,
                                         subs - hs.saved_subs, hs.saved_subs - subs)
            # another worker changed it meanwhile: reload on the next request
            hs.version = version if version == hs.version + 1 else -1
        hs.saved, hs.saved_subs = state, frozenset(subs)

    def forward_replies(self, hs: HttpSession, msgs: list[Incoming]) -> None:
        """Store the client's responses that no request of this worker awaits (shared mode): the
        worker that sent the request picks them up (`follow_shared`)."""
        if self.shared is None:
            return
        for msg in msgs:
            if msg.kind == "response" and msg.id is not None and msg.id not in hs.pending:
                self.shared.post_reply(hs.id, msg.id, msg.raw)

    def full(self) -> bool:
        """Whether another session would pass `max_sessions`, after ending the idle ones if needed."""
        if self.count() + self.starting >= self.cfg.max_sessions:
            self.reap_idle()
        return self.count() + self.starting >= self.cfg.max_sessions

    def count(self) -> int:
        return len(self.by_id) if self.shared is None else self.shared.live()

    def add(self, hs: HttpSession) -> None:
        self.by_id[hs.id] = hs
        self.save(hs)

    def end(self, hs: HttpSession) -> None:
        """End `hs` (for every worker): forget it, close its GET stream and cancel its requests."""
        self._drop(hs)
        if self.shared is not None:
            self.shared.end(hs.id)

    def _drop(self, hs: HttpSession) -> None:
        self.by_id.pop(hs.id, None)
        if hs.stream is not None:
            hs.stream.close()
        self.dispatcher.cancel_all(hs.session)

    def audience(self) -> list[tuple[Session, Peer]]:
        """The sessions a notification could reach now (those with a GET stream here), with their
        peer; in shared mode, as the table has them now (subscribed elsewhere, ended elsewhere)."""
        streamed = [hs for hs in self.by_id.values() if hs.stream is not None]
        if self.shared is not None:
            streamed = [hs for hs in streamed if self.get(hs.id) is hs]
        return [(hs.session, hs.peer) for hs in streamed]

    def reap_idle(self) -> None:
        if self.shared is not None:
            self._reap_shared()
            return
        deadline = time.monotonic() - self.cfg.session_idle_timeout
        idle = [s for s in self.by_id.values() if s.active == 0 and s.stream is None and s.last_seen < deadline]
        for hs in idle:
            log.info("session idle; ended", session=hs.id)
            self.end(hs)

    def _reap_shared(self) -> None:
        """Keep the sessions busy here alive for all, end those no worker has seen for the idle
        timeout, and let go of cached copies this worker no longer uses (the table keeps them)."""
        assert self.shared is not None
        busy = [hs.id for hs in self.by_id.values() if hs.active or hs.stream is not None]
        self.shared.touch(busy)
        for sid in self.shared.expire(self.cfg.session_idle_timeout):
            log.info("session idle; ended", session=sid)
            hs = self.by_id.get(sid)
            if hs is not None:
                self._drop(hs)
        unused = time.monotonic() - self.touch_every
        for hs in [s for s in self.by_id.values() if s.active == 0 and s.stream is None and s.last_seen < unused]:
            del self.by_id[hs.id]

    async def reap_forever(self) -> None:
        every = min(30.0, self.cfg.session_idle_timeout / 4)
        while True:
            await trio.sleep(every)
            self.reap_idle()

    async def follow_shared(self) -> None:
        """Shared mode: hand this worker's waiting requests the replies other workers stored, and
        end the sessions it serves that another worker ended."""
        assert self.shared is not None
        while True:
            waiting = [hs for hs in self.by_id.values() if hs.pending]
            await trio.sleep(REPLY_POLL if waiting else ENDED_POLL)
            for hs in [hs for hs in self.by_id.values() if hs.pending]:
                for frame in self.shared.take_replies(hs.id, list(hs.pending)):
                    for msg in parse(frame, batches=False).messages:
                        hs.peer.resolve(msg)
            serving = {hs.id: hs for hs in self.by_id.values() if hs.active or hs.stream is not None}
            for sid in self.shared.ended_among(serving):
                log.info("session ended by another worker", session=sid)
                self._drop(serving[sid])

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
            if self.shared is not None:
                self.shared.release_stream(hs.id)
        await send({"type": "http.response.body", "body": b""})
