"""The Streamable HTTP transport actor: hypercorn's trio worker inside specactor's nursery.

`/mcp` serves both eras through the same dispatcher and core as stdio. Legacy (2025-*)
requests live in `Mcp-Session-Id` sessions (GET opens the session's SSE stream, DELETE ends
it, idle sessions are reaped); 2026-07-28 requests are stateless POSTs whose headers must
mirror the body. A reply goes out as JSON when it is ready before anything else, and as an SSE
stream when notifications come first. Closing a request's stream cancels it. `/healthz` and
`/metrics` (Prometheus) serve operations. Every decision is `protocol.http_rules`'.
"""

from __future__ import annotations

import errno
import hmac
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from specactor.actors.dispatcher import Job
from specactor.actors.prometheus import exposition
from specactor.actors.supervisor import root_cause
from specactor.concurrency.peer import PeerLink, Pending
from specactor.config import ConfigError
from specactor.logsetup import get_logger
from specactor.protocol import http_rules as rules
from specactor.protocol import versions as v
from specactor.protocol.errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, ProtocolError
from specactor.protocol.frames import Incoming, Parsed, error_response, parse
from specactor.protocol.server import KNOWN, LEGACY_ONLY
from specactor.protocol.session import Session
from specactor.wire.codec import encode

log = get_logger("specactor.http")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]
KEEPALIVE = 15.0  # seconds between SSE comments on a quiet stream, so proxies keep it open
FRAMES = 64  # frames buffered per request stream before the handler waits for the client to read


class _Disconnected(Exception):
    pass


@dataclass
class HttpSession:
    """One legacy-era session: its protocol state and its optional GET stream."""

    id: str
    session: Session = field(default_factory=Session)
    pending: Pending = field(default_factory=dict)
    last_seen: float = field(default_factory=time.monotonic)
    active: int = 0
    ended: trio.Event = field(default_factory=trio.Event)
    stream: trio.MemorySendChannel[bytes] | None = None


class RequestConn:
    """The dispatcher's view of one POST: frames for it land in `frames`."""

    def __init__(self, session: Session, pending: Pending | None = None) -> None:
        self.session = session
        self._send, self.frames = trio.open_memory_channel[bytes](FRAMES)
        self.peer = PeerLink(self.send, pending)

    async def send(self, data: bytes) -> None:
        try:
            await self._send.send(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client left; its request is being cancelled

    def abandon(self, ident: int | str | None) -> None:
        """The request was cancelled: no reply will come, so end the stream waiting for one."""
        self._send.close()


class StreamConn:
    """A session-wide sender for notifications that belong to no request (GET stream)."""

    def __init__(self, hs: HttpSession) -> None:
        self.session = hs.session
        self.hs = hs
        self.peer = PeerLink(self.send, hs.pending)

    async def send(self, data: bytes) -> None:
        if self.hs.stream is not None:
            try:
                self.hs.stream.send_nowait(data)
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # a slow or gone reader loses notifications, never blocks the server


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): val.decode("latin-1") for k, val in scope.get("headers", [])}


def _accepts(headers: dict[str, str]) -> tuple[bool, bool]:
    accept = headers.get("accept", "*/*").lower()
    anything = "*/*" in accept
    return anything or "application/json" in accept, anything or "text/event-stream" in accept


async def _respond(send: Send, status: int, body: bytes = b"", *, content_type: bytes | None = b"application/json",
                   headers: list[tuple[bytes, bytes]] | None = None) -> None:
    head = list(headers or [])
    if content_type is not None and body:
        head.append((b"content-type", content_type))
    head.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def _event(frame: bytes) -> bytes:
    return b"event: message\ndata: " + frame + b"\n\n"


def _reply_prefix(ident: int | str) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + encode(ident) + b","


class HttpTransport:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.cfg = app.config.http
        self.sessions: dict[str, HttpSession] = {}
        self._starting = 0  # initializes in flight
        self._nursery: trio.Nursery | None = None
        self.stopping = trio.Event()
        self.binds: list[str] = []
        self.allowed_hosts = [h.lower() for h in self.cfg.allowed_hosts] + [self.cfg.host.lower()]
        self.access_log = app.config.log_level == "debug"  # one line per request, only when debugging
        app.registry.on_change(self._on_change)

    # ------------------------------------------------------------------ the actor

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        config = HypercornConfig()
        host = f"[{self.cfg.host}]" if ":" in self.cfg.host else self.cfg.host
        config.bind = [f"{host}:{self.cfg.port}"]
        config.graceful_timeout = self.app.config.grace_period
        config.accesslog = None
        config.errorlog = None
        config.keep_alive_max_requests = 1_000_000  # hypercorn's default (1,000) recycles busy clients' connections
        async with trio.open_nursery() as nursery:
            self._nursery = nursery  # where listen-stream notifications are sent from
            app: Any = self.asgi
            try:
                self.binds = await nursery.start(lambda task_status: serve(
                    app, config, shutdown_trigger=self.stopping.wait, task_status=task_status))
            except BaseException as exc:
                error = self._bind_error(exc)
                if error is None:
                    raise
                raise error from None  # the setting is the whole story; hypercorn's frames are noise
            nursery.start_soon(self._reap)
            task_status.started()

    def _bind_error(self, exc: BaseException) -> ConfigError | None:
        """A failure to bind that only another host or port can fix, as a `ConfigError`."""
        cause = root_cause(exc)
        where = f"{self.cfg.host}:{self.cfg.port}"
        if isinstance(cause, socket.gaierror):
            return ConfigError(f"{self.cfg.host!r} is not an address this machine can resolve ({cause.strerror})",
                               setting="http.host")
        if not isinstance(cause, OSError):
            return None
        if cause.errno == errno.EADDRINUSE:
            return ConfigError(f"{where} is already in use (another server listens there); choose another port "
                               "with --port or SPECACTOR_HTTP_PORT", setting="http.port")
        if cause.errno == errno.EADDRNOTAVAIL:
            return ConfigError(f"{self.cfg.host} is not an address of this machine", setting="http.host")
        if cause.errno == errno.EACCES:
            return ConfigError(f"binding {where} is not permitted (ports below 1024 need privileges)",
                               setting="http.port")
        return None

    async def _reap(self) -> None:
        every = min(30.0, self.cfg.session_idle_timeout / 4)
        while True:
            await trio.sleep(every)
            self.reap_idle()

    def reap_idle(self) -> None:
        deadline = time.monotonic() - self.cfg.session_idle_timeout
        idle = [s for s in self.sessions.values() if s.active == 0 and s.stream is None and s.last_seen < deadline]
        for hs in idle:
            log.info("session idle; ended", session=hs.id)
            self._end(hs)

    def _end(self, hs: HttpSession) -> None:
        self.sessions.pop(hs.id, None)
        hs.ended.set()
        if hs.stream is not None:
            hs.stream.close()
        self.app.dispatcher.cancel_all(StreamConn(hs))

    def _on_change(self, kind: str, uri: str | None) -> None:
        if self._nursery is not None:
            for peer, method, params in self.app.core.deliveries(kind, uri):
                self._nursery.start_soon(peer.notify, method, params)
        for hs in self.sessions.values():
            if hs.stream is None or not hs.session.initialized:
                continue
            if kind == "resource":
                if uri in hs.session.subscriptions:
                    frame = encode({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                    "params": {"uri": uri}})
                    self._push(hs, frame)
            else:
                self._push(hs, encode({"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"}))

    @staticmethod
    def _push(hs: HttpSession, frame: bytes) -> None:
        assert hs.stream is not None
        try:
            hs.stream.send_nowait(frame)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            pass

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
            await _respond(send, 500, error_response(None, -32603, "Internal error"))

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        path, method = scope["path"], scope["method"]
        if path == "/healthz":
            await _respond(send, 200, b'{"status":"ok"}')
            return
        if not rules.host_allowed(headers.get("host"), self.allowed_hosts):
            await _respond(send, 421, error_response(None, INVALID_REQUEST, "Misdirected Request: Host not allowed"))
            return
        if not rules.origin_allowed(headers.get("origin"), self.cfg.allowed_origins):
            await _respond(send, 403, error_response(None, INVALID_REQUEST, "Forbidden: Origin not allowed"))
            return
        if self.cfg.token and not self._authorized(headers):
            await _respond(send, 401, error_response(None, INVALID_REQUEST, "Unauthorized: a bearer token is needed"),
                           headers=[(b"www-authenticate", b'Bearer realm="specactor"')])
            return
        if path == "/metrics" and method == "GET":
            await _respond(send, 200, exposition(self.app.metrics.statistics()),
                           content_type=b"text/plain; version=0.0.4; charset=utf-8")
            return
        if path != "/mcp":
            await _respond(send, 404, b'{"error":"not found"}')
            return
        modern_header = headers.get("mcp-protocol-version") in v.MODERN_VERSIONS
        if method == "POST":
            await self._post(scope, receive, send, headers)
        elif method in ("GET", "DELETE") and not modern_header:
            await (self._get if method == "GET" else self._delete)(receive, send, headers)
        else:
            await _respond(send, 405, headers=[(b"allow", b"POST" if modern_header else b"GET, POST, DELETE")])

    def _authorized(self, headers: dict[str, str]) -> bool:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.cfg.token.encode())

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
        wants_json, wants_sse = _accepts(headers)
        if not wants_json:
            await _respond(send, 406, error_response(None, INVALID_REQUEST,
                                                     "Not Acceptable: Accept must include application/json"))
            return
        ctype = headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if ctype != "application/json":
            await _respond(send, 415, error_response(None, INVALID_REQUEST,
                                                     "Unsupported Media Type: send application/json"))
            return
        body = await self._body(scope, receive, headers)
        if body is None:
            await _respond(send, 413, error_response(None, INVALID_REQUEST, "Payload Too Large: the body exceeds "
                                                     f"{self.cfg.max_body_bytes} bytes"))
            return
        parsed = parse(body, batches=True)
        single = parsed.messages[0] if len(parsed.messages) == 1 and not parsed.batch else None
        modern = headers.get("mcp-protocol-version") in v.MODERN_VERSIONS or (
            single is not None and _enveloped(single))
        if modern:
            await self._post_modern(receive, send, headers, parsed, single, wants_sse)
        else:
            await self._post_legacy(receive, send, headers, parsed, wants_sse)

    async def _post_modern(self, receive: Receive, send: Send, headers: dict[str, str], parsed: Any,
                           single: Incoming | None, wants_sse: bool) -> None:
        if parsed.errors and not parsed.messages:
            await _respond(send, 400, parsed.errors[0])
            return
        if single is None or single.kind == "response":
            await _respond(send, 400, error_response(None, INVALID_REQUEST, "Invalid Request: a 2026-07-28 POST "
                                                     "carries exactly one request or notification"))
            return
        if single.kind == "request" and single.method == "subscriptions/listen" and not wants_sse:
            await _respond(send, 406, error_response(single.id, INVALID_REQUEST,
                                                     "Not Acceptable: a listen stream needs text/event-stream"))
            return
        if single.kind == "request" and (single.method not in KNOWN or single.method in LEGACY_ONLY):
            await _respond(send, 404, error_response(single.id, METHOD_NOT_FOUND, f"Method not found: {single.method}"))
            return
        conn = RequestConn(Session())
        if single.kind == "notification":
            await self.app.dispatcher.submit(Job(conn, [single], at=time.time()))
            await _respond(send, 202)
            return
        try:
            params = msgspec.json.decode(bytes(single.frame.params) or b"{}")
            if not isinstance(params, dict):
                raise ProtocolError(INVALID_PARAMS, "params must be an object")
            meta = params.get("_meta")
            missing = [k for k in (v.META_PROTOCOL_VERSION, v.META_CLIENT_CAPABILITIES)
                       if not isinstance(meta, dict) or k not in meta]
            if missing:
                raise ProtocolError(INVALID_PARAMS, "params._meta is missing the required envelope key(s): "
                                    + ", ".join(missing))
            tool = self.app.registry.tools.get(params.get("name")) if single.method == "tools/call" else None
            rules.check_modern_headers(headers, single.method, params, tool.tool.inputSchema if tool else None)
        except ProtocolError as err:
            await _respond(send, 400, error_response(single.id, err.code, err.message, err.data))
            return
        except msgspec.DecodeError:
            await _respond(send, 400, error_response(single.id, PARSE_ERROR, "Parse error"))
            return
        await self._exchange(receive, send, conn, Job(conn, [single], at=time.time()), single.id, wants_sse,
                             rules.modern_status, [])

    async def _post_legacy(self, receive: Receive, send: Send, headers: dict[str, str], parsed: Parsed,
                           wants_sse: bool) -> None:
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in v.LEGACY_VERSIONS:
            await _respond(send, 400, error_response(None, INVALID_REQUEST,
                                                     f"Bad Request: unsupported MCP-Protocol-Version {version!r}"))
            return
        sid = headers.get("mcp-session-id")
        first = parsed.messages[0] if parsed.messages else None
        if sid is None and first is not None and first.method == "initialize" and not parsed.batch:
            await self._initialize(receive, send, first, wants_sse)
            return
        if sid is None:
            await _respond(send, 400, parsed.errors[0] if parsed.errors and not parsed.messages else error_response(
                None, INVALID_REQUEST, "Bad Request: the Mcp-Session-Id header is required"))
            return
        hs = self.sessions.get(sid)
        if hs is None:
            await _respond(send, 404, error_response(None, INVALID_REQUEST, "Not Found: the session has ended "
                                                     "or never existed; initialize a new one"))
            return
        hs.last_seen = time.monotonic()
        if parsed.batch and not self.app.core.accepts_batches(hs.session):
            await _respond(send, 400, error_response(None, INVALID_REQUEST, "Invalid Request: JSON-RPC batches are "
                                                     "not supported by this protocol version (only 2025-03-26)"))
            return
        conn = RequestConn(hs.session, hs.pending)
        for m in parsed.messages:
            if m.method == "notifications/cancelled":
                self.app.dispatcher.cancel(conn, self.app.core.notification(m, conn.session))
        requests = [m for m in parsed.messages if m.kind == "request"]
        job = Job(conn, parsed.messages, parsed.errors, parsed.batch, time.time())
        if not requests and not parsed.errors:
            await self.app.dispatcher.submit(job)
            await _respond(send, 202)
            return
        if not requests:
            await _respond(send, 400, parsed.errors[0])
            return
        hs.active += 1
        try:
            ident = None if parsed.batch else requests[0].id
            await self._exchange(receive, send, conn, job, ident, wants_sse, rules.legacy_status, [])
        finally:
            hs.active -= 1
            hs.last_seen = time.monotonic()

    async def _initialize(self, receive: Receive, send: Send, msg: Incoming, wants_sse: bool) -> None:
        if len(self.sessions) + self._starting >= self.cfg.max_sessions:
            self.reap_idle()
        if len(self.sessions) + self._starting >= self.cfg.max_sessions:
            await _respond(send, 503, error_response(None, INVALID_REQUEST, "Service Unavailable: too many sessions"))
            return
        hs = HttpSession(secrets.token_hex(16))
        conn = RequestConn(hs.session, hs.pending)
        self._starting += 1  # counted before the reply, so simultaneous initializes respect the cap
        try:
            reply = await self._exchange(receive, send, conn, Job(conn, [msg], at=time.time()),
                                         msg.id, wants_sse, rules.legacy_status,
                                         [(b"mcp-session-id", hs.id.encode())], session=hs)
        finally:
            self._starting -= 1
        if reply is not None and rules.error_code(reply) is None:
            log.info("session started", session=hs.id)

    async def _exchange(self, receive: Receive, send: Send, conn: RequestConn, job: Job, ident: int | str | None,
                        wants_sse: bool, status_of: Callable[[bytes], int], extra: list[tuple[bytes, bytes]],
                        session: HttpSession | None = None) -> bytes | None:
        """Submit one request (or batch) and stream what the dispatcher sends for it back."""
        prefix = _reply_prefix(ident) if ident is not None else b"["

        def is_reply(frame: bytes) -> bool:
            if ident is None:
                return frame.startswith(b"[")
            return frame.startswith(prefix) and frame[len(prefix):].startswith((b'"result"', b'"error"'))

        reply: bytes | None = None
        abandoned = False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_disconnect, receive, conn, ident, nursery.cancel_scope)
            await self.app.dispatcher.submit(job)
            try:
                frame = await conn.frames.receive()
            except trio.EndOfChannel:  # cancelled before anything was sent
                await _respond(send, 202)
                nursery.cancel_scope.cancel()
                return None
            if is_reply(frame) or not wants_sse:
                try:
                    while not is_reply(frame):  # JSON only: notifications have nowhere to go
                        frame = await conn.frames.receive()
                except trio.EndOfChannel:
                    await _respond(send, 202)
                    nursery.cancel_scope.cancel()
                    return None
                reply = frame
                if session is not None and rules.error_code(frame) is None:
                    self.sessions[session.id] = session
                else:
                    extra = [h for h in extra if h[0] != b"mcp-session-id"]
                await _respond(send, status_of(frame), frame, headers=extra)
            else:
                if session is not None:
                    self.sessions[session.id] = session
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + extra})
                while True:
                    if abandoned:
                        break
                    await send({"type": "http.response.body", "body": _event(frame), "more_body": True})
                    if is_reply(frame):
                        reply = frame
                        break
                    while True:
                        with trio.move_on_after(KEEPALIVE) as quiet:
                            try:
                                frame = await conn.frames.receive()
                            except trio.EndOfChannel:  # cancelled: end the stream without a reply
                                abandoned = True
                                break
                        if abandoned or not quiet.cancelled_caught:
                            break
                        await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            nursery.cancel_scope.cancel()
        return reply

    async def _watch_disconnect(self, receive: Receive, conn: RequestConn, ident: int | str | None,
                                scope: trio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.app.dispatcher.cancel(conn, ident)
        scope.cancel()

    # ------------------------------------------------------------------ GET and DELETE (legacy)

    def _session_of(self, headers: dict[str, str]) -> tuple[HttpSession | None, int, bytes]:
        sid = headers.get("mcp-session-id")
        if sid is None:
            return None, 400, error_response(None, INVALID_REQUEST,
                                             "Bad Request: the Mcp-Session-Id header is required")
        hs = self.sessions.get(sid)
        if hs is None:
            return None, 404, error_response(None, INVALID_REQUEST, "Not Found: the session has ended or never existed")
        return hs, 200, b""

    async def _get(self, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        if not _accepts(headers)[1]:
            await _respond(send, 406, error_response(None, INVALID_REQUEST, "Accept must include text/event-stream"))
            return
        hs, status, body = self._session_of(headers)
        if hs is None:
            await _respond(send, status, body)
            return
        if hs.stream is not None:
            await _respond(send, 409, error_response(None, INVALID_REQUEST, "Conflict: this session already has "
                                                     "a GET stream"))
            return
        # Notifications only; a reader that falls 256 behind loses the oldest-to-arrive ones.
        hs.stream, frames = trio.open_memory_channel[bytes](256)
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
                    body = b": keepalive\n\n" if quiet.cancelled_caught else _event(frame)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                nursery.cancel_scope.cancel()
        finally:
            if hs.stream is not None:
                hs.stream.close()
            hs.stream = None
        await send({"type": "http.response.body", "body": b""})

    async def _delete(self, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        hs, status, body = self._session_of(headers)
        if hs is None:
            await _respond(send, status, body)
            return
        self._end(hs)
        log.info("session ended by the client", session=hs.id)
        await _respond(send, 200)


def _enveloped(msg: Incoming) -> bool:
    params = bytes(msg.frame.params) if msg.frame.params else b""
    return v.META_PROTOCOL_VERSION.encode() in params
