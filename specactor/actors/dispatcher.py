"""The dispatcher actor: admits requests in arrival order, then runs them concurrently.

Cheap, order-sensitive methods (initialize, ping, the lists) are answered in the loop; the
rest each get a task, under a concurrency limit, inside a cancel scope kept by request id so
`notifications/cancelled` stops the handler and no response is sent for it. Every request
and response is observed by the metrics actor and recorded by the session logger.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import structlog
import trio

from specactor.actors.mailbox import Mailbox
from specactor.actors.metrics import MetricsActor, Observation
from specactor.actors.peer import PeerLink
from specactor.actors.session_log import SessionLogActor
from specactor.protocol.context import Runtime
from specactor.protocol.errors import INTERNAL_ERROR
from specactor.protocol.frames import Incoming, error_response, parse
from specactor.protocol.server import INLINE, ServerCore
from specactor.protocol.session import Session
from specactor.wire.codec import any_decoder

log = structlog.get_logger("specactor.dispatcher")


class Connection(Protocol):
    """What a transport hands the dispatcher for each of its connections."""

    session: Session
    peer: PeerLink

    async def send(self, data: bytes) -> None: ...


@dataclass
class Job:
    conn: Connection
    msgs: list[Incoming]
    errors: list[bytes] = field(default_factory=list)
    batch: bool = False
    at: float = 0.0


def _error_code(reply: bytes) -> str | None:
    """The error code a reply carries: a JSON-RPC code, or a tool envelope's code."""
    if b'"error"' not in reply:
        return None
    if reply.startswith(b'{"jsonrpc":"2.0","id":') and b'"result":' not in reply[:64]:
        try:
            return str(any_decoder.decode(reply)["error"]["code"])
        except (KeyError, TypeError, ValueError):
            return "unknown"
    if b'"isError":true' in reply:
        try:
            return str(any_decoder.decode(reply)["result"]["structuredContent"]["error"]["code"])
        except (KeyError, TypeError, ValueError):
            return "TOOL_ERROR"
    return None


class Dispatcher:
    """Args:
        core: the protocol core.
        runtime: the worker pool and clock handlers get.
        metrics, session_log: the observing actors.
        max_concurrency: handlers running at once.
        request_timeout: a handler running longer is cancelled and answered with an error.
    """

    def __init__(self, core: ServerCore, runtime: Runtime, metrics: MetricsActor, session_log: SessionLogActor,
                 *, max_concurrency: int = 64, request_timeout: float = 120.0) -> None:
        self.core = core
        self.runtime = runtime
        self.metrics = metrics
        self.session_log = session_log
        self.request_timeout = request_timeout
        self.limiter = trio.CapacityLimiter(max_concurrency)
        # Transports wait here when the dispatcher is behind; 256 frames is enough to ride out a
        # 100-request pipelined burst without making the reader wait.
        self.mailbox: Mailbox[Job] = Mailbox("dispatcher", 256)
        # Queued-but-not-running handlers; beyond this the loop stops taking work (bounded memory).
        self._pending = trio.Semaphore(max(4 * max_concurrency, 256))
        self._inflight: dict[tuple[str, int | str], trio.CancelScope] = {}
        self._cancelled_early: set[tuple[str, int | str]] = set()
        self._idle = trio.Event()
        self._idle.set()
        self._outstanding = 0

    # ------------------------------------------------------------------ called by transports

    async def submit(self, job: Job) -> None:
        self._busy(+1)
        await self.mailbox.cast(job)

    async def feed(self, conn: Connection, data: bytes, at: float) -> None:
        """Parse one transport frame and queue what it holds; cancels act at once, so they never
        wait behind the work they cancel."""
        parsed = parse(data, batches=self.core.accepts_batches(conn.session))
        if not parsed.messages and not parsed.errors:
            return
        for msg in parsed.messages:
            if msg.method == "notifications/cancelled":
                self.cancel(conn, self.core.notification(msg, conn.session), early=True)
        await self.submit(Job(conn, parsed.messages, parsed.errors, parsed.batch, at))

    def _busy(self, delta: int) -> None:
        """Count submitted work not yet answered; `wait_idle` waits for zero."""
        self._outstanding += delta
        if self._outstanding == 0:
            self._idle.set()
        elif self._idle.is_set():
            self._idle = trio.Event()

    def cancel(self, conn: Connection, request_id: int | str | None, *, early: bool = False) -> None:
        """Stop the handler of `request_id`; sync, so a cancel never waits behind queued work.

        With `early`, a cancel for a request not yet running is remembered, because on an ordered
        stream (stdio) the request may still sit in the mailbox behind this cancel. Transports
        that cancel on disconnect leave it off: their request may simply have finished.
        """
        if request_id is None:
            return
        key = (conn.session.id, request_id)
        scope = self._inflight.get(key)
        if scope is not None:
            scope.cancel()
        elif early:
            # The request may still be queued behind this cancel; remember a bounded number.
            if len(self._cancelled_early) >= 1024:
                self._cancelled_early.pop()
            self._cancelled_early.add(key)

    def cancel_all(self, conn: Connection) -> None:
        """Cancel every request of `conn`'s session (it ended)."""
        for (session_id, _), scope in list(self._inflight.items()):
            if session_id == conn.session.id:
                scope.cancel()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # ------------------------------------------------------------------ the actor

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            async for letter in self.mailbox:
                with letter:
                    try:
                        await self._take(letter.body, nursery)
                    finally:
                        self._busy(-1)

    async def _take(self, job: Job, nursery: trio.Nursery) -> None:
        conn = job.conn
        if job.batch:
            self._busy(+1)
            nursery.start_soon(self._run_batch, job)
            return
        for err in job.errors:
            await conn.send(err)
            await self.session_log.record(conn.session.id, "response", err, time.time())
        for msg in job.msgs:
            await self.session_log.record(conn.session.id, msg.kind, msg.raw, job.at or time.time())
            if msg.kind == "response":
                conn.peer.resolve(msg)
            elif msg.kind == "notification":
                if msg.method != "notifications/cancelled":  # the transport applied it on arrival
                    self.core.notification(msg, conn.session)
            else:
                await self._request(conn, msg, nursery, job.at)

    async def _request(self, conn: Connection, msg: Incoming, nursery: trio.Nursery, at: float) -> None:
        started = time.perf_counter()
        refused = self.core.admit(msg, conn.session)
        if refused is not None:
            await self._reply(conn, msg, refused, started)
            return
        if msg.method in INLINE:
            reply = await self.core.respond(msg, conn.session, conn.peer, self.runtime)
            await self._reply(conn, msg, reply, started)
            return
        await self._pending.acquire()
        assert msg.id is not None
        key = (conn.session.id, msg.id)
        scope = trio.CancelScope()
        if key in self._cancelled_early:
            self._cancelled_early.discard(key)
            scope.cancel()
        self._inflight[key] = scope
        self._busy(+1)
        nursery.start_soon(self._run, conn, msg, scope, started)

    async def _run(self, conn: Connection, msg: Incoming, scope: trio.CancelScope, started: float) -> None:
        assert msg.id is not None
        key = (conn.session.id, msg.id)
        reply: bytes | None = None
        try:
            with scope:
                async with self.limiter:
                    with trio.move_on_after(self.request_timeout) as timer:
                        reply = await self.core.respond(msg, conn.session, conn.peer, self.runtime)
                    if timer.cancelled_caught:
                        reply = error_response(msg.id, INTERNAL_ERROR,
                                               f"{msg.method} timed out after {self.request_timeout:g} s")
        except Exception:  # the core answers every handler error itself; this is a last resort
            log.exception("request task failed", method=msg.method)
            reply = error_response(msg.id, INTERNAL_ERROR, f"Internal error while handling {msg.method}")
        finally:
            self._inflight.pop(key, None)
            self._pending.release()
        try:
            if scope.cancel_called or reply is None:
                self._observe(msg, started, "cancelled")
                return
            await self._reply(conn, msg, reply, started)
        finally:
            self._busy(-1)

    async def _reply(self, conn: Connection, msg: Incoming, reply: bytes, started: float) -> None:
        try:
            await conn.send(reply)
        finally:
            self._observe(msg, started, _error_code(reply))
            await self.session_log.record(conn.session.id, "response", reply, time.time())

    def _observe(self, msg: Incoming, started: float, error: str | None) -> None:
        tool = ""
        if msg.method == "tools/call" and msg.decoded is not None:
            tool = msg.decoded.name
        self.metrics.observe_nowait(Observation(msg.method, tool, time.perf_counter() - started, error))

    async def _run_batch(self, job: Job) -> None:
        """A 2025-03-26 batch: run every request concurrently, answer with one array."""
        conn = job.conn
        replies: list[bytes] = list(job.errors)
        await self.session_log.record(conn.session.id, "request", b"[" + b",".join(m.raw for m in job.msgs) + b"]",
                                      job.at)
        collector = _BatchConn(conn, replies)
        async with trio.open_nursery() as nursery:
            for msg in job.msgs:
                if msg.kind == "request":
                    nursery.start_soon(self._batch_one, collector, msg)
                elif msg.kind == "notification":
                    self.cancel(conn, self.core.notification(msg, conn.session))
                else:
                    conn.peer.resolve(msg)
        try:
            if replies:
                await conn.send(b"[" + b",".join(replies) + b"]")
        finally:
            self._busy(-1)

    async def _batch_one(self, collector: _BatchConn, msg: Incoming) -> None:
        started = time.perf_counter()
        refused = self.core.admit(msg, collector.session)
        reply = refused or await self.core.respond(msg, collector.session, collector.peer, self.runtime)
        collector.replies.append(reply)
        self._observe(msg, started, _error_code(reply))


class _BatchConn:
    def __init__(self, conn: Connection, replies: list[bytes]) -> None:
        self.session = conn.session
        self.peer = conn.peer
        self.replies = replies
