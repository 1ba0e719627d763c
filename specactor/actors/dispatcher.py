"""The dispatcher actor: admits requests in arrival order, then answers them, concurrently where
they may wait.

It owns the nursery in which handlers run and the table of their cancel scopes. Transports
hand it work by a direct call (`submit`, or `feed` for a raw frame), in their own task:
admission and the cheap, order-sensitive methods (initialize, ping, the lists, tools that
cannot wait) happen right there, in arrival order, and every other request gets a task under
the concurrency limit, inside a cancel scope kept by request id, so `notifications/cancelled`
stops it and no response is sent for it. A batch's requests take the same path; their replies
go out as one array. (A mailbox hop here cost 12 % of a request's time; see
docs/decisions.md.) Each answer is a `Reply` record: the metrics actor observes its error code
and tool, the session logger records its bytes, the connection sends it.
"""

from __future__ import annotations

import math
import time
from typing import Final, Protocol

import msgspec
import trio

from specactor.actors.metrics import MetricsActor
from specactor.actors.session_log import SessionLogActor
from specactor.concurrency.peer import PeerLink
from specactor.concurrency.slots import Slots
from specactor.logsetup import get_logger
from specactor.protocol.admission import Admitted, accepts_batches, admit
from specactor.protocol.context import Runtime
from specactor.protocol.errors import INTERNAL_ERROR
from specactor.protocol.frames import Incoming, Reply, error_reply, parse
from specactor.protocol.server import OPEN_ENDED, ServerCore
from specactor.protocol.session import Session

log = get_logger("specactor.dispatcher")


class Connection(Protocol):
    """What a transport hands the dispatcher for each of its connections."""

    session: Session
    peer: PeerLink  # its own frames (notifications, requests to the client) go out through this

    async def reply(self, reply: Reply) -> None:
        """Send an answer: to a request, a batch's array, or a frame that could not be read."""

    def abandon(self, ident: int | str | None) -> None:
        """A request of this connection was cancelled (`None`: a whole batch's): no reply will come."""


class Job(msgspec.Struct):
    conn: Connection
    msgs: list[Incoming]
    errors: list[Reply] = msgspec.field(default_factory=list)
    batch: bool = False
    at: float = 0.0


# Methods answered from the core alone; every other one waits for the toolsets' registration.
REGISTRY_FREE: Final = frozenset({"initialize", "ping", "server/discover", "logging/setLevel"})
INVALID: Final = "(invalid)"  # the method metrics name for a frame that is no request at all


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
        # Made by a `wait_idle` that has to wait, set and dropped when the count reaches zero: a
        # request answered inline (0 -> 1 -> 0) then costs no event of its own.
        self._idle: trio.Event | None = None
        self.quiet_since = 0.0  # trio clock: when the last outstanding work was answered (for background work)
        self._outstanding = 0
        self._nursery: trio.Nursery | None = None
        self.first_reply = trio.Event()  # set once the first reply has gone out
        self.registry_ready = trio.Event()  # set once the toolsets are registered (see app.build)

    # ------------------------------------------------------------------ called by transports

    async def submit(self, job: Job) -> None:
        """Act on `job` now, in the caller's task: its cancels first, then its messages in order.
        Handlers that may wait run in the actor's nursery."""
        nursery = self._nursery
        if nursery is None:
            raise RuntimeError("the dispatcher is not running")
        conn = job.conn
        for msg in job.msgs:
            if msg.method == "notifications/cancelled":
                self.cancel(conn.session, self.core.notification(msg, conn.session))
        self._busy(+1)
        try:
            await self._take(job, nursery)
        finally:
            self._busy(-1)

    async def feed(self, conn: Connection, data: bytes, at: float) -> None:
        """Parse one transport frame and submit what it holds."""
        parsed = parse(data, batches=accepts_batches(conn.session))
        if parsed.messages or parsed.errors:
            await self.submit(Job(conn, parsed.messages, parsed.errors, parsed.batch, at))

    def _busy(self, delta: int) -> None:
        """Count submitted work not yet answered; `wait_idle` waits for zero."""
        self._outstanding += delta
        if self._outstanding == 0:
            self.quiet_since = trio.current_time()
            if self._idle is not None:
                self._idle.set()
                self._idle = None

    def cancel(self, session: Session, request_id: int | str | None) -> None:
        """Stop the handler of `request_id`; no reply will be sent for it.

        Requests are admitted in arrival order in the transport's own task, so a request named by
        a cancel is either running (and stopped here) or already answered (and the cancel is moot,
        as the specification allows). Nothing is remembered for later, so a reused id is safe.
        """
        if request_id is None:
            return
        key = (session.id, request_id)
        running = self._inflight.get(key)
        if running is not None:
            self._client_cancelled.add(key)
            running[0].cancel()

    def cancel_all(self, session: Session) -> None:
        """Cancel every request of `session` (it ended)."""
        for key, (scope, _) in list(self._inflight.items()):
            if key[0] == session.id:
                self._client_cancelled.add(key)
                scope.cancel()

    async def wait_idle(self) -> None:
        if self._outstanding == 0:
            await trio.lowlevel.checkpoint()
            return
        if self._idle is None:
            self._idle = trio.Event()
        await self._idle.wait()

    def quiet_for(self) -> float:
        """Seconds since the last request was answered, 0 while any is outstanding."""
        return 0.0 if self._outstanding else trio.current_time() - self.quiet_since

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
        for err in job.errors:
            await self._answer(conn, None, INVALID, err, None)
        logging = self.session_log.enabled
        for msg in job.msgs:
            if logging:
                await self.session_log.record(conn.session.id, msg.kind, msg.raw, job.at or time.time())
            if msg.kind == "request":
                await self._request(conn, msg, nursery, None)
            else:
                self._other(conn, msg)

    def _other(self, conn: Connection, msg: Incoming) -> None:
        """A client's response (to a request of ours) or notification."""
        if msg.kind == "response":
            conn.peer.resolve(msg)
        elif msg.method != "notifications/cancelled":  # cancels were applied first, in submit
            self.core.notification(msg, conn.session)

    async def _run_batch(self, job: Job) -> None:
        """A 2025-03-26 batch: its requests take the lone request's path (admitted in order, then
        a task each), and their replies go out as one array once the last is answered."""
        conn = job.conn
        replies: list[bytes] = []
        try:
            if self.session_log.enabled:
                await self.session_log.record(conn.session.id, "request",
                                              b"[" + b",".join(m.raw for m in job.msgs) + b"]", job.at)
            for err in job.errors:
                await self._answer(conn, replies, INVALID, err, None)
            async with trio.open_nursery() as nursery:
                for msg in job.msgs:
                    if msg.kind == "request":
                        await self._request(conn, msg, nursery, replies)
                    else:
                        self._other(conn, msg)
            if replies:
                await self._deliver(conn, Reply(b"[" + b",".join(replies) + b"]"))
            else:  # every request was cancelled (or there was none)
                conn.abandon(None)
        finally:
            self._busy(-1)

    async def _request(self, conn: Connection, msg: Incoming, nursery: trio.Nursery, batch: list[bytes] | None) -> None:
        """Admit `msg` (in arrival order: this runs in the transport's task, or the batch's), then
        answer it here if it cannot wait, or start its task in `nursery`."""
        started = time.perf_counter()
        if msg.method not in REGISTRY_FREE and not self.registry_ready.is_set():
            await self.registry_ready.wait()
        req = admit(msg, conn.session, in_batch=batch is not None)
        if isinstance(req, Reply):
            await self._answer(conn, batch, msg.method, req, started)
            return
        if batch is None and self.core.runs_inline(req):
            # Nothing here can wait (or, in a tool's retry backoff after a failure, only briefly),
            # so a task and cancel scope of its own would buy nothing: they cost 10 us of 70.
            reply = await self.core.respond(req, conn.session, conn.peer, self.runtime)
            await self._answer(conn, None, req.method, reply, started)
            return
        # The nowait forms spare a trip through the scheduler (a third of a request's cost here)
        # when nothing is contended; they wait only when the limit is reached.
        if not self._pending.take_nowait():
            await self._pending.take()
        key = (conn.session.id, req.id)
        # One scope carries both the client's cancel and the request timeout (applied by _sweep).
        deadline = math.inf if req.method in OPEN_ENDED else trio.current_time() + self.request_timeout
        scope = trio.CancelScope()
        self._inflight[key] = (scope, deadline)
        self._busy(+1)
        nursery.start_soon(self._run, conn, req, scope, key, started, batch)

    async def _run(self, conn: Connection, req: Admitted, scope: trio.CancelScope, key: tuple[str, int | str],
                   started: float, batch: list[bytes] | None) -> None:
        """One request's task: a concurrency slot, then the core's reply; or none, when the client
        cancelled it; or a timeout error, when the sweeper did."""
        try:
            reply: Reply | None = None
            try:
                with scope:
                    if not self.limiter.take_nowait():
                        await self.limiter.take()
                    try:
                        reply = await self.core.respond(req, conn.session, conn.peer, self.runtime)
                    except Exception as err:  # respond answers every failure itself; a bug in it must
                        # cost this request its answer, not every request in flight (the nursery's)
                        log.error("request failed outside its handler", method=req.method, tool=req.tool,
                                  error=f"{type(err).__name__}: {err}")
                        reply = error_reply(req.id, INTERNAL_ERROR, f"internal error ({type(err).__name__})",
                                            tool=req.tool)
                    finally:
                        self.limiter.give()
            finally:
                self._inflight.pop(key, None)
                self._pending.give()
            if key in self._client_cancelled:
                self._client_cancelled.discard(key)
                self.metrics.observe(req.method, req.tool, time.perf_counter() - started, "cancelled")
                if batch is None:
                    conn.abandon(req.id)
                return
            if reply is None:  # the deadline passed
                reply = error_reply(req.id, INTERNAL_ERROR, f"{req.method} timed out after {self.request_timeout:g} s",
                                    tool=req.tool)
            await self._answer(conn, batch, req.method, reply, started)
        finally:
            self._busy(-1)

    async def _answer(self, conn: Connection, batch: list[bytes] | None, method: str, reply: Reply,
                      started: float | None) -> None:
        """Observe `reply`, then add it to its batch's array or send it."""
        seconds = 0.0 if started is None else time.perf_counter() - started
        self.metrics.observe(method, reply.tool, seconds, reply.error)
        if batch is not None:
            batch.append(reply.data)
        else:
            await self._deliver(conn, reply)

    async def _deliver(self, conn: Connection, reply: Reply) -> None:
        """Log `reply`, then send it; a transport that fails is a client gone: its requests are
        cancelled, everyone else's carry on."""
        # Logged before it is sent, so a log reader never sees the client's next request first.
        if self.session_log.enabled:
            await self.session_log.record(conn.session.id, "response", reply.data, time.time())
        try:
            await conn.reply(reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as err:
            log.warning("a client went away mid-reply; cancelling its requests", error=str(err))
            self.cancel_all(conn.session)
        self.first_reply.set()
