"""The Streamable HTTP transport actor: hypercorn's trio worker inside specactor's nursery.

`/mcp` serves both eras through the same dispatcher and core as stdio. Legacy (2025-*)
requests live in `Mcp-Session-Id` sessions (GET opens the session's SSE stream, DELETE ends
it, idle sessions are reaped); 2026-07-28 requests are stateless POSTs whose headers must
mirror the body. A reply goes out as JSON when it is ready before anything else, and as an SSE
stream when notifications come first. Closing a request's stream cancels it. `/healthz` and
`/metrics` (Prometheus) serve operations. Every decision is `protocol.http_rules`' (or
`protocol.admission`'s); the sessions live in `http_sessions`.

As one of several worker processes (`listen_fd`, `shared`), it serves a socket the parent bound
(`http_workers`) and keeps handshake-era sessions in the table all workers share.
"""

from __future__ import annotations

import errno
import hmac
import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from specactor.actors.dispatcher import Dispatcher, Job
from specactor.actors.http_exchange import (
    Receive,
    RequestConn,
    Scope,
    Send,
    accepts,
    headers_of,
    respond,
    stream_reply,
)
from specactor.actors.http_sessions import HttpSession, LegacySessions
from specactor.actors.metrics import MetricsActor
from specactor.actors.prometheus import exposition as exposition_of
from specactor.actors.shared_sessions import SharedSessions
from specactor.actors.supervisor import root_cause
from specactor.config import Config, ConfigError, HttpConfig
from specactor.logsetup import get_logger
from specactor.protocol import http_rules as rules
from specactor.protocol import versions as v
from specactor.protocol.admission import accepts_batches
from specactor.protocol.errors import INVALID_REQUEST
from specactor.protocol.frames import Incoming, Parsed, Reply, error_response, parse
from specactor.protocol.server import ServerCore
from specactor.protocol.session import Session

log = get_logger("specactor.http")


class _Disconnected(Exception):
    pass


class HttpTransport:
    """Args:
        core: answers requests and says which notifications a registry change means; its
            registry's tools name the headers a 2026-07-28 `tools/call` must mirror.
        dispatcher: where requests go.
        config: its `http` section, `grace_period` (for hypercorn) and `log_level`.
        metrics: what `/metrics` exposes.
        listen_fd: a listening socket to serve (a worker process's, bound by the parent) instead of
            binding `http.host`:`http.port`.
        shared: the session table of all worker processes; None in a single process.
        exposition: what `/metrics` answers, when not this process's own figures (workers: the sum).
    """

    def __init__(self, core: ServerCore, dispatcher: Dispatcher, config: Config, metrics: MetricsActor, *,
                 listen_fd: int | None = None, shared: SharedSessions | None = None,
                 exposition: Callable[[], bytes] | None = None) -> None:
        self.core = core
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.listen_fd = listen_fd
        self.shared = shared
        self.exposition = exposition or (lambda: exposition_of(self.metrics.statistics()))
        self.cfg = config.http
        self.grace_period = config.grace_period
        self.access_log = config.log_level == "debug"  # one line per request, only when debugging
        self.stopping = trio.Event()
        self.stopped = trio.Event()  # hypercorn has written its open responses and closed (or given up)
        self.legacy = LegacySessions(self.cfg, dispatcher, self.stopping, shared)
        self._health = b'{"status":"ok","pid":%d}' % os.getpid()
        self._nursery: trio.Nursery | None = None
        self.binds: list[str] = []
        self.allowed_hosts = [h.lower() for h in self.cfg.allowed_hosts] + [self.cfg.host.lower()]
        core.registry.on_change(self._on_change)

    @property
    def sessions(self) -> dict[str, HttpSession]:
        """The handshake-era sessions by id."""
        return self.legacy.by_id

    # ------------------------------------------------------------------ the actor

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        config = HypercornConfig()
        host = f"[{self.cfg.host}]" if ":" in self.cfg.host else self.cfg.host
        config.bind = [f"{host}:{self.cfg.port}" if self.listen_fd is None else f"fd://{self.listen_fd}"]
        config.graceful_timeout = self.grace_period
        config.accesslog = None
        config.errorlog = None
        config.keep_alive_max_requests = 1_000_000  # hypercorn's default (1,000) recycles busy clients' connections
        async with trio.open_nursery() as nursery:
            self._nursery = nursery  # where listen-stream notifications are sent from
            app: Any = self.asgi
            async def serving(task_status: trio.TaskStatus[list[str]]) -> None:
                try:
                    await serve(app, config, shutdown_trigger=self.stopping.wait, task_status=task_status)
                finally:
                    self.stopped.set()

            try:
                self.binds = await nursery.start(serving)
            except BaseException as exc:
                error = self._bind_error(exc)
                if error is None:
                    raise
                raise error from None  # the setting is the whole story; hypercorn's frames are noise
            nursery.start_soon(self.legacy.reap_forever)
            if self.shared is not None:
                nursery.start_soon(self.legacy.follow_shared)
            task_status.started()

    def _bind_error(self, exc: BaseException) -> ConfigError | None:
        return bind_error(self.cfg, exc)

    def _on_change(self, kind: str, uri: str | None) -> None:
        """Tell listen streams and the sessions' GET streams of a change (`ServerCore.deliveries`
        decides who hears what)."""
        if self._nursery is not None:
            for peer, method, params in self.core.deliveries(kind, uri, self.legacy.audience()):
                self._nursery.start_soon(peer.notify, method, params)

    # ------------------------------------------------------------------ ASGI

    async def asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        try:
            await self._http(scope, receive, send)
            if self.access_log:
                log.debug("http request", method=scope["method"], path=scope["path"])
        except _Disconnected:
            pass
        except Exception:
            log.exception("HTTP handler failed", path=scope.get("path"))
            await respond(send, 500, error_response(None, -32603, "Internal error"))

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = headers_of(scope)
        path, method = scope["path"], scope["method"]
        if path == "/healthz":  # a worker says which one it is: the process that took this connection
            await respond(send, 200, b'{"status":"ok"}' if self.shared is None else self._health)
            return
        if not rules.host_allowed(headers.get("host"), self.allowed_hosts):
            await respond(send, 421, error_response(None, INVALID_REQUEST, "Misdirected Request: Host not allowed"))
            return
        if not rules.origin_allowed(headers.get("origin"), self.cfg.allowed_origins):
            await respond(send, 403, error_response(None, INVALID_REQUEST, "Forbidden: Origin not allowed"))
            return
        if self.cfg.token and not self._authorized(headers):
            await respond(send, 401, error_response(None, INVALID_REQUEST, "Unauthorized: a bearer token is needed"),
                          headers=[(b"www-authenticate", b'Bearer realm="specactor"')])
            return
        if path == "/metrics" and method == "GET":
            await respond(send, 200, self.exposition(),
                          content_type=b"text/plain; version=0.0.4; charset=utf-8")
            return
        if path != "/mcp":
            await respond(send, 404, b'{"error":"not found"}')
            return
        modern_header = headers.get("mcp-protocol-version") in v.MODERN_VERSIONS
        if method == "POST":
            await self._post(scope, receive, send, headers)
        elif method in ("GET", "DELETE") and not modern_header:
            await (self._get if method == "GET" else self._delete)(receive, send, headers)
        else:
            await respond(send, 405, headers=[(b"allow", b"POST" if modern_header else b"GET, POST, DELETE")])

    def _authorized(self, headers: dict[str, str]) -> bool:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        expected = self.cfg.token or ""
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected.encode())

    async def _body(self, scope: Scope, receive: Receive, headers: dict[str, str]) -> bytes | None:
        limit = self.cfg.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return None
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    # ------------------------------------------------------------------ POST

    async def _post(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        wants_json, wants_sse = accepts(headers)
        if not wants_json:
            await respond(send, 406, error_response(None, INVALID_REQUEST,
                                                    "Not Acceptable: Accept must include application/json"))
            return
        ctype = headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if ctype != "application/json":
            await respond(send, 415, error_response(None, INVALID_REQUEST,
                                                    "Unsupported Media Type: send application/json"))
            return
        body = await self._body(scope, receive, headers)
        if body is None:
            await respond(send, 413, error_response(None, INVALID_REQUEST, "Payload Too Large: the body exceeds "
                                                    f"{self.cfg.max_body_bytes} bytes"))
            return
        parsed = parse(body, batches=True)
        single = parsed.messages[0] if len(parsed.messages) == 1 and not parsed.batch else None
        if rules.is_modern(headers, single):
            await self._post_modern(receive, send, headers, parsed, single, wants_sse)
        else:
            await self._post_legacy(receive, send, headers, parsed, wants_sse)

    async def _post_modern(self, receive: Receive, send: Send, headers: dict[str, str], parsed: Parsed,
                           single: Incoming | None, wants_sse: bool) -> None:
        if parsed.errors and not parsed.messages:
            await respond(send, 400, parsed.errors[0].data)
            return
        if single is None or single.kind == "response":
            await respond(send, 400, error_response(None, INVALID_REQUEST, "Invalid Request: a 2026-07-28 POST "
                                                    "carries exactly one request or notification"))
            return
        if single.kind == "request" and single.method == "subscriptions/listen" and not wants_sse:
            await respond(send, 406, error_response(single.id, INVALID_REQUEST,
                                                    "Not Acceptable: a listen stream needs text/event-stream"))
            return
        conn = RequestConn(Session())
        if single.kind == "notification":
            await self.dispatcher.submit(Job(conn, [single], at=time.time()))
            await respond(send, 202)
            return
        refused = rules.refuse_modern_post(single, headers, self._input_schema)
        if refused is not None:
            await respond(send, rules.modern_status(refused), refused.data)
            return
        await self._exchange(receive, send, conn, Job(conn, [single], at=time.time()), single.id, wants_sse,
                             rules.modern_status, [])

    def _input_schema(self, tool: str) -> dict[str, Any] | None:
        entry = self.core.registry.tools.get(tool)
        return entry.tool.inputSchema if entry is not None else None

    async def _post_legacy(self, receive: Receive, send: Send, headers: dict[str, str], parsed: Parsed,
                           wants_sse: bool) -> None:
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in v.LEGACY_VERSIONS:
            await respond(send, 400, error_response(None, INVALID_REQUEST,
                                                    f"Bad Request: unsupported MCP-Protocol-Version {version!r}"))
            return
        sid = headers.get("mcp-session-id")
        first = parsed.messages[0] if parsed.messages else None
        if sid is None and first is not None and first.method == "initialize" and not parsed.batch:
            await self._initialize(receive, send, first, wants_sse)
            return
        if sid is None:
            await respond(send, 400, parsed.errors[0].data if parsed.errors and not parsed.messages else
                          error_response(None, INVALID_REQUEST, "Bad Request: the Mcp-Session-Id header is required"))
            return
        hs = self.legacy.get(sid)
        if hs is None:
            await respond(send, 404, error_response(None, INVALID_REQUEST, "Not Found: the session has ended "
                                                    "or never existed; initialize a new one"))
            return
        hs.last_seen = time.monotonic()
        self.legacy.forward_replies(hs, parsed.messages)
        if parsed.batch and not accepts_batches(hs.session):
            await respond(send, 400, error_response(None, INVALID_REQUEST, "Invalid Request: JSON-RPC batches are "
                                                    "not supported by this protocol version (only 2025-03-26)"))
            return
        conn = RequestConn(hs.session, hs.pending)
        requests = [m for m in parsed.messages if m.kind == "request"]
        job = Job(conn, parsed.messages, parsed.errors, parsed.batch, time.time())
        if not requests and not parsed.errors:
            await self.dispatcher.submit(job)
            self.legacy.save(hs)  # notifications/initialized, before the client hears 202
            await respond(send, 202)
            return
        if not requests:
            await respond(send, 400, parsed.errors[0].data)
            return
        hs.active += 1
        try:
            ident = None if parsed.batch else requests[0].id
            await self._exchange(receive, send, conn, job, ident, wants_sse, rules.legacy_status, [], known=hs)
        finally:
            hs.active -= 1
            hs.last_seen = time.monotonic()

    async def _initialize(self, receive: Receive, send: Send, msg: Incoming, wants_sse: bool) -> None:
        if self.legacy.full():
            await respond(send, 503, error_response(None, INVALID_REQUEST, "Service Unavailable: too many sessions"))
            return
        hs = HttpSession(secrets.token_hex(16))
        conn = RequestConn(hs.session, hs.pending)
        self.legacy.starting += 1  # counted before the reply, so simultaneous initializes respect the cap
        try:
            reply = await self._exchange(receive, send, conn, Job(conn, [msg], at=time.time()),
                                         msg.id, wants_sse, rules.legacy_status,
                                         [(b"mcp-session-id", hs.id.encode())], session=hs)
        finally:
            self.legacy.starting -= 1
        if reply is not None and reply.code is None:
            log.info("session started", session=hs.id)

    async def _exchange(self, receive: Receive, send: Send, conn: RequestConn, job: Job, ident: int | str | None,
                        wants_sse: bool, status_of: Callable[[Reply], int], extra: list[tuple[bytes, bytes]],
                        session: HttpSession | None = None, known: HttpSession | None = None) -> Reply | None:
        """Submit one request (or batch) and send back what the dispatcher sends for it: JSON when
        its reply comes first (or the client takes no SSE), else an SSE stream ending with the
        reply. None when it was cancelled before its reply. A `session` starts once it is answered;
        a `known` one has what the request changed stored before the reply goes out."""
        save = (lambda: self.legacy.save(known)) if known is not None and self.shared is not None else None
        await self.dispatcher.submit(job)  # a handler that cannot wait has answered by the time this returns
        try:
            ready: bytes | Reply | None = conn.take_nowait()
        except trio.WouldBlock:
            ready = None
        except trio.EndOfChannel:  # cancelled before anything was sent
            await respond(send, 202)
            return None
        if isinstance(ready, Reply):  # answered already: no wait to watch the client's connection through
            await self._json_reply(send, ready, status_of, extra, session, save)
            return ready
        reply: Reply | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_disconnect, receive, conn.session, ident, nursery.cancel_scope)
            try:
                frame = ready if ready is not None else await conn.frames.receive()
                while not wants_sse and not isinstance(frame, Reply):  # JSON: notifications have nowhere to go
                    frame = await conn.frames.receive()
            except trio.EndOfChannel:  # cancelled before anything was sent
                await respond(send, 202)
                nursery.cancel_scope.cancel()
                return None
            if isinstance(frame, Reply):
                await self._json_reply(send, frame, status_of, extra, session, save)
                reply = frame
            else:
                if session is not None:
                    self.legacy.add(session)
                reply = await stream_reply(send, conn, frame, extra, save)
            nursery.cancel_scope.cancel()
        return reply

    async def _json_reply(self, send: Send, frame: Reply, status_of: Callable[[Reply], int],
                          extra: list[tuple[bytes, bytes]], session: HttpSession | None,
                          save: Callable[[], None] | None) -> None:
        """`frame`, the request's reply, as a JSON response; a `session` it started is added first
        (or, refused, its id header dropped), and `save` stores what the request changed."""
        if session is not None and frame.code is None:
            self.legacy.add(session)
        else:
            extra = [h for h in extra if h[0] != b"mcp-session-id"]
        if save is not None:
            save()
        await respond(send, status_of(frame), frame.data, headers=extra)

    async def _watch_disconnect(self, receive: Receive, session: Session, ident: int | str | None,
                                scope: trio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.dispatcher.cancel(session, ident)
        scope.cancel()

    # ------------------------------------------------------------------ GET and DELETE (legacy)

    def _session_of(self, headers: dict[str, str]) -> tuple[HttpSession | None, int, bytes]:
        sid = headers.get("mcp-session-id")
        if sid is None:
            return None, 400, error_response(None, INVALID_REQUEST,
                                             "Bad Request: the Mcp-Session-Id header is required")
        hs = self.legacy.get(sid)
        if hs is None:
            return None, 404, error_response(None, INVALID_REQUEST, "Not Found: the session has ended or never existed")
        return hs, 200, b""

    async def _get(self, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        if not accepts(headers)[1]:
            await respond(send, 406, error_response(None, INVALID_REQUEST, "Accept must include text/event-stream"))
            return
        hs, status, body = self._session_of(headers)
        if hs is None:
            await respond(send, status, body)
            return
        if hs.stream is not None or (self.shared is not None and not self.shared.claim_stream(hs.id)):
            await respond(send, 409, error_response(None, INVALID_REQUEST, "Conflict: this session already has "
                                                    "a GET stream"))
            return
        await self.legacy.stream(hs, receive, send)

    async def _delete(self, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        hs, status, body = self._session_of(headers)
        if hs is None:
            await respond(send, status, body)
            return
        self.legacy.end(hs)
        log.info("session ended by the client", session=hs.id)
        await respond(send, 200)


def bind_error(cfg: HttpConfig, exc: BaseException) -> ConfigError | None:
    """A failure to bind `cfg`'s address that only another host or port can fix, as a `ConfigError`."""
    cause = root_cause(exc)
    where = f"{cfg.host}:{cfg.port}"
    if isinstance(cause, socket.gaierror):
        return ConfigError(f"{cfg.host!r} is not an address this machine can resolve ({cause.strerror})",
                           setting="http.host")
    if not isinstance(cause, OSError):
        return None
    if cause.errno == errno.EADDRINUSE:
        return ConfigError(f"{where} is already in use (another server listens there); choose another port "
                           "with --port or SPECACTOR_HTTP_PORT", setting="http.port")
    if cause.errno == errno.EADDRNOTAVAIL:
        return ConfigError(f"{cfg.host} is not an address of this machine", setting="http.host")
    if cause.errno == errno.EACCES:
        return ConfigError(f"binding {where} is not permitted (ports below 1024 need privileges)",
                           setting="http.port")
    return None
