"""The dispatcher actor: admits requests in arrival order, then runs them concurrently.

It owns the nursery in which handlers run and the table of their cancel scopes. Transports
hand it work by a direct call (`submit`), in their own task: admission and the cheap,
order-sensitive methods (initialize, ping, the lists) happen right there, in arrival order,
and every other request gets a task under the concurrency limit, inside a cancel scope kept by
request id, so `notifications/cancelled` stops it and no response is sent for it. (A mailbox
hop here cost 12 % of a request's time; see docs/decisions.md.) Every request and response is
observed by the metrics actor and recorded by the session logger.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Protocol

import trio

from specactor.actors.metrics import MetricsActor
from specactor.actors.session_log import SessionLogActor
from specactor.concurrency.peer import PeerLink
from specactor.concurrency.slots import Slots
from specactor.logsetup import get_logger
from specactor.protocol.context import Runtime
from specactor.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST
from specactor.protocol.frames import Incoming, error_response, parse
from specactor.protocol.http_rules import ERROR_HEAD
from specactor.protocol.server import OPEN_ENDED, ServerCore
from specactor.protocol.session import Session

log = get_logger("specactor.dispatcher")


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


# Methods answered from the core alone; every other one waits for the toolsets' registration.
REGISTRY_FREE = frozenset({"initialize", "ping", "server/discover", "logging/setLevel"})


def _error_code(msg: Incoming | None, reply: bytes) -> str | None:
    """The error a reply carries: the JSON-RPC code at its head (which the core writes, so it
    cannot be forged by data inside a result), or the tool envelope's code the core noted."""
    head = ERROR_HEAD.match(reply)
    if head is not None:
        return head.group(1).decode()
    return msg.tool_error if msg is not None else None


class Dispatcher:
    """Args:
        core: the protocol core.
        runtime: the worker pool and clock handlers get.
        metrics, session_log: the observing actors.
        max_concurrency: handlers running at once.
        request_timeout: a handler running longer is cancelled and answered with an error.
    """

    def __init__(self, core: ServerCore, runtime: Runtime, metrics: MetricsActor, session_log: SessionLogActor,
                 *, max_concurrency: int = 128, request_timeout: float = 120.0) -> None:
        self.core = core
        self.runtime = runtime
        self.metrics = metrics
        self.session_log = session_log
        self.request_timeout = request_timeout
        self.limiter = Slots(max_concurrency)
        # Admitted-but-unanswered handlers; past this a transport's submit waits, so a client that
        # pipelines without reading cannot grow our memory without bound.
        self._pending = Slots(max(4 * max_concurrency, 256))
        # Running handlers: their cancel scope and the trio time past which the sweeper stops them.
        self._inflight: dict[tuple[str, int | str], tuple[trio.CancelScope, float]] = {}
        self._client_cancelled: set[tuple[str, int | str]] = set()
        self._idle = trio.Event()
        self._idle.set()
        self._outstanding = 0
        self._nursery: trio.Nursery | None = None
        self.first_reply = trio.Event()  # set once the first reply has gone out
        self.registry_ready = trio.Event()  # set once the toolsets are registered (see app.build)

    # ------------------------------------------------------------------ called by transports

    async def submit(self, job: Job) -> None:
        """Admit `job` now, in the caller's task; handlers that may wait run in the actor's nursery."""
        nursery = self._nursery
        if nursery is None:
            raise RuntimeError("the dispatcher is not running")
        self._busy(+1)
        try:
            await self._take(job, nursery)
        finally:
            self._busy(-1)

    async def feed(self, conn: Connection, data: bytes, at: float) -> None:
        """Parse one transport frame and act on what it holds; cancels act before anything else."""
        parsed = parse(data, batches=self.core.accepts_batches(conn.session))
        if not parsed.messages and not parsed.errors:
            return
        for msg in parsed.messages:
            if msg.method == "notifications/cancelled":
                self.cancel(conn, self.core.notification(msg, conn.session))
        await self.submit(Job(conn, parsed.messages, parsed.errors, parsed.batch, at))

    def _busy(self, delta: int) -> None:
        """Count submitted work not yet answered; `wait_idle` waits for zero."""
        self._outstanding += delta
        if self._outstanding == 0:
            self._idle.set()
        elif self._idle.is_set():
            self._idle = trio.Event()

    def cancel(self, conn: Connection, request_id: int | str | None) -> None:
        """Stop the handler of `request_id`; no reply will be sent for it.

        Requests are admitted in arrival order in the transport's own task, so a request named by
        a cancel is either running (and stopped here) or already answered (and the cancel is moot,
        as the specification allows). Nothing is remembered for later, so a reused id is safe.
        """
        if request_id is None:
            return
        key = (conn.session.id, request_id)
        running = self._inflight.get(key)
        if running is not None:
            self._client_cancelled.add(key)
            running[0].cancel()

    def cancel_all(self, conn: Connection) -> None:
        """Cancel every request of `conn`'s session (it ended)."""
        for key, (scope, _) in list(self._inflight.items()):
            if key[0] == conn.session.id:
                self._client_cancelled.add(key)
                scope.cancel()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # ------------------------------------------------------------------ the actor

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._sweep)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    async def _sweep(self) -> None:
        """Cancel the handlers past their deadline, a tick at a time (a twentieth of the timeout,
        between 10 ms and 1 s). A deadline on each request's own scope would be exact, but
        registering and clearing it cost 2-5 us of a 70 us request (docs/decisions.md); a timeout
        of minutes does not need to be met to the microsecond."""
        tick = min(1.0, max(0.01, self.request_timeout / 20))
        while True:
            await trio.sleep(tick)
            if self._inflight:
                now = trio.current_time()
                for scope, _ in [r for r in self._inflight.values() if r[1] <= now]:
                    scope.cancel()

    async def _take(self, job: Job, nursery: trio.Nursery) -> None:
        conn = job.conn
        if job.batch:
            self._busy(+1)
            nursery.start_soon(self._run_batch, job)
            return
        logging = self.session_log.enabled
        for err in job.errors:
            if logging:
                await self.session_log.record(conn.session.id, "response", err, time.time())
            code = _error_code(None, err)
            self.metrics.observe("(invalid)", "", 0.0, code)
            await self._send(conn, err)
        for msg in job.msgs:
            if logging:
                await self.session_log.record(conn.session.id, msg.kind, msg.raw, job.at or time.time())
            if msg.kind == "response":
                conn.peer.resolve(msg)
            elif msg.kind == "notification":
                if msg.method != "notifications/cancelled":  # applied on arrival, in feed
                    self.core.notification(msg, conn.session)
            else:
                await self._request(conn, msg, nursery)

    async def _request(self, conn: Connection, msg: Incoming, nursery: trio.Nursery) -> None:
        started = time.perf_counter()
        if msg.method not in REGISTRY_FREE and not self.registry_ready.is_set():
            await self.registry_ready.wait()  # in the transport's task, so arrival order holds
        refused = self.core.admit(msg, conn.session)
        if refused is not None:
            await self._reply(conn, msg, refused, started)
            return
        if self.core.runs_inline(msg):
            # Nothing here can wait (or, in a tool's retry backoff after a failure, only briefly),
            # so a task and cancel scope of its own would buy nothing: they cost 10 us of 70.
            reply = await self.core.respond(msg, conn.session, conn.peer, self.runtime)
            await self._reply(conn, msg, reply, started)
            return
        # The nowait forms spare a trip through the scheduler (a third of a request's cost here)
        # when nothing is contended; they wait only when the limit is reached.
        if not self._pending.take_nowait():
            await self._pending.take()
        assert msg.id is not None
        key = (conn.session.id, msg.id)
        # One scope carries both the client's cancel and the request timeout (applied by _sweep).
        deadline = math.inf if msg.method in OPEN_ENDED else trio.current_time() + self.request_timeout
        scope = trio.CancelScope()
        self._inflight[key] = (scope, deadline)
        self._busy(+1)
        nursery.start_soon(self._run, conn, msg, scope, key, started)

    async def _run(self, conn: Connection, msg: Incoming, scope: trio.CancelScope, key: tuple[str, int | str],
                   started: float) -> None:
        reply: bytes | None = None
        try:
            with scope:
                if not self.limiter.take_nowait():
                    await self.limiter.take()
                try:
                    reply = await self.core.respond(msg, conn.session, conn.peer, self.runtime)
                finally:
                    self.limiter.give()
        except Exception:  # the core answers every handler error itself; this is a last resort
            log.exception("request task failed", method=msg.method)
            reply = error_response(msg.id, INTERNAL_ERROR, f"Internal error while handling {msg.method}")
        finally:
            self._inflight.pop(key, None)
            self._pending.give()
        try:
            if key in self._client_cancelled:
                self._client_cancelled.discard(key)
                self._observe(msg, started, "cancelled")
                abandon = getattr(conn, "abandon", None)
                if abandon is not None:  # a transport waiting for this reply learns none will come
                    abandon(msg.id)
                return
            if reply is None:  # the deadline passed
                reply = error_response(msg.id, INTERNAL_ERROR,
                                       f"{msg.method} timed out after {self.request_timeout:g} s")
            await self._reply(conn, msg, reply, started)
        finally:
            self._busy(-1)

    async def _reply(self, conn: Connection, msg: Incoming, reply: bytes, started: float) -> None:
        # Logged before it is sent, so a log reader never sees the client's next request first.
        if self.session_log.enabled:
            await self.session_log.record(conn.session.id, "response", reply, time.time())
        self._observe(msg, started, _error_code(msg, reply))
        await self._send(conn, reply)
        self.first_reply.set()

    async def _send(self, conn: Connection, data: bytes) -> None:
        """Send, and treat a transport that fails as a client gone: its requests are cancelled,
        everyone else's carry on."""
        try:
            await conn.send(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as err:
            log.warning("a client went away mid-reply; cancelling its requests", error=str(err))
            self.cancel_all(conn)

    def _observe(self, msg: Incoming, started: float, error: str | None) -> None:
        tool = msg.decoded.name if msg.method == "tools/call" and msg.decoded is not None else ""
        self.metrics.observe(msg.method, tool, time.perf_counter() - started, error)

    async def _run_batch(self, job: Job) -> None:
        """A 2025-03-26 batch: run every request concurrently, answer with one array."""
        conn = job.conn
        replies: list[bytes] = list(job.errors)
        await self.session_log.record(conn.session.id, "request", b"[" + b",".join(m.raw for m in job.msgs) + b"]",
                                      job.at)
        collector = _BatchConn(conn, replies)
        try:
            async with trio.open_nursery() as nursery:
                for msg in job.msgs:
                    if msg.kind == "request":
                        nursery.start_soon(self._batch_one, collector, msg)
                    elif msg.kind == "notification":
                        if msg.method != "notifications/cancelled":
                            self.core.notification(msg, conn.session)
                    else:
                        conn.peer.resolve(msg)
            if replies:
                await self._send(conn, b"[" + b",".join(replies) + b"]")
        finally:
            self._busy(-1)

    async def _batch_one(self, collector: _BatchConn, msg: Incoming) -> None:
        """One batch item: admitted, limited, timed and cancellable like a lone request."""
        started = time.perf_counter()
        await self.registry_ready.wait()
        reply = self.core.admit(msg, collector.session)
        if reply is None and msg.method == "initialize":
            reply = error_response(msg.id, INVALID_REQUEST, "Invalid Request: initialize cannot be part of a batch")
        if reply is None:
            assert msg.id is not None
            key = (collector.session.id, msg.id)
            scope = trio.CancelScope()
            await self._pending.take()
            self._inflight[key] = (scope, trio.current_time() + self.request_timeout)
            try:
                with scope:
                    await self.limiter.take()
                    try:
                        reply = await self.core.respond(msg, collector.session, collector.peer, self.runtime)
                    finally:
                        self.limiter.give()
            finally:
                self._inflight.pop(key, None)
                self._pending.give()
            if key in self._client_cancelled:
                self._client_cancelled.discard(key)
                self._observe(msg, started, "cancelled")
                return
            if reply is None:
                reply = error_response(msg.id, INTERNAL_ERROR,
                                       f"{msg.method} timed out after {self.request_timeout:g} s")
        collector.replies.append(reply)
        self._observe(msg, started, _error_code(msg, reply))


class _BatchConn:
    def __init__(self, conn: Connection, replies: list[bytes]) -> None:
        self.session = conn.session
        self.peer = conn.peer
        self.replies = replies
