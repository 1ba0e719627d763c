"""The HTTP client: raw HTTP/1.1 over non-blocking sockets, one epoll loop, many connections.

Why not httpx: the client shares the machine's two cores with the server it measures, so
every microsecond it spends per request is taken from the server (and added to the measured
latency). Measured here against the HTTP floor, httpx.AsyncClient on trio cost 0.5-1.2 ms of
CPU per POST, more than the server's own cost; this client pre-encodes each request (headers
+ body, one `send`) and parses replies with `bytes.find`: 0.04-0.065 ms (the report's
"client CPU" rows keep it in view; bench/README.md has the comparison).

- `Endpoint`: where a server listens (host, port, path);
- `Era`: how a request is framed: `LEGACY` (2025-11-25: `initialize` opens a session whose
  `Mcp-Session-Id` and `MCP-Protocol-Version` go on every later POST) or `MODERN`
  (2026-07-28: stateless POSTs, `_meta` in params, `Mcp-Method`/`Mcp-Name` headers);
- `Worker`: one keep-alive connection with its own session and id counter;
- `closed_loop`: every worker sends `tools/call echo` back to back (the next request leaves
  when the previous reply is read) until the deadline, then drains; each request's latency
  runs from its `send` to the arrival of the last byte of its reply. A reply with
  `Connection: close` (hypercorn closes a keep-alive connection after 1,000 requests) makes
  the worker reconnect, and that connect counts in the next request's latency.

Replies may be plain JSON (`Content-Length`) or SSE (`Transfer-Encoding: chunked`,
`text/event-stream`); for SSE the JSON-RPC reply is the `data:` line carrying the request id.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from bench.transport import HarnessError

LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
_enc = msgspec.json.Encoder()


class _Head(msgspec.Struct):
    id: int | str | None = None
    method: str | None = None
    error: msgspec.Raw | None = None


_head = msgspec.json.Decoder(_Head)


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    path: str = "/mcp"


@dataclass(frozen=True)
class Era:
    name: str
    version: str
    stateful: bool  # True: initialize first, then carry Mcp-Session-Id

    def echo(self, mid: int, text: str) -> tuple[bytes, bytes]:
        """(extra header lines, body) for one `tools/call echo`."""
        params: dict[str, object] = {"name": "echo", "arguments": {"text": text}}
        head = b""
        if not self.stateful:
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": self.version,
                               "io.modelcontextprotocol/clientCapabilities": {}}
            head = b"Mcp-Method: tools/call\r\nMcp-Name: echo\r\n"
        return head, _enc.encode({"jsonrpc": "2.0", "id": mid, "method": "tools/call", "params": params})


LEGACY = Era("2025-11-25", LEGACY_VERSION, stateful=True)
MODERN = Era("2026-07-28", MODERN_VERSION, stateful=False)
INITIALIZE = {"protocolVersion": LEGACY_VERSION, "capabilities": {},
              "clientInfo": {"name": "specactor-bench", "version": "0.1.0"}}


@dataclass
class Response:
    status: int
    headers: dict[bytes, bytes]
    body: bytes

    @property
    def closing(self) -> bool:
        """The server will close the connection after this reply (e.g. hypercorn, every 1,000)."""
        return self.headers.get(b"connection", b"").lower() == b"close"

    def message(self, mid: int | None) -> bytes:
        """The JSON-RPC message in the body: the body itself, or the SSE `data:` line for `mid`."""
        if not self.headers.get(b"content-type", b"").startswith(b"text/event-stream"):
            return self.body
        for line in self.body.split(b"\n"):
            if line.startswith(b"data:"):
                data = line[5:].strip()
                if mid is None or _head.decode(data).id == mid:
                    return data
        raise ValueError(f"no reply for id {mid} in the SSE stream: {self.body[:300]!r}")


class _Parser:
    """Incremental HTTP/1.1 response parser (Content-Length or chunked bodies)."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[Response]:
        self.buf += data
        out = []
        while (r := self._one()) is not None:
            out.append(r)
        return out

    def _one(self) -> Response | None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = self.buf[:end].split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            body, stop = self._chunks(start)
            if body is None:
                return None
        else:
            stop = start + int(headers.get(b"content-length", b"0"))
            if len(self.buf) < stop:
                return None
            body = self.buf[start:stop]
        self.buf = self.buf[stop:]
        return Response(status, headers, body)

    def _chunks(self, pos: int) -> tuple[bytes | None, int]:
        parts: list[bytes] = []
        while True:
            eol = self.buf.find(b"\r\n", pos)
            if eol < 0:
                return None, 0
            size = int(self.buf[pos:eol].split(b";")[0], 16)
            if size == 0:
                trailer = self.buf.find(b"\r\n\r\n", eol)
                return (b"".join(parts), trailer + 4) if trailer >= 0 else (None, 0)
            if len(self.buf) < eol + 2 + size + 2:
                return None, 0
            parts.append(self.buf[eol + 2:eol + 2 + size])
            pos = eol + 2 + size + 2


@dataclass
class Worker:
    """One keep-alive connection, its session (legacy era) and its request ids."""

    endpoint: Endpoint
    era: Era
    session: bytes | None = None
    ids: int = 0
    sock: socket.socket | None = None
    last_used: float = 0.0
    parser: _Parser = field(default_factory=_Parser)

    def connect(self, timeout: float) -> None:
        self.close()
        self.sock = socket.create_connection((self.endpoint.host, self.endpoint.port), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.parser = _Parser()
        self.last_used = time.monotonic()

    def poll(self) -> tuple[int, list[Response]] | None:
        """A non-blocking read: (when it was read, the replies it completed), or None once the
        server has closed the connection."""
        assert self.sock is not None
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return time.perf_counter_ns(), []
        received = time.perf_counter_ns()
        return (received, self.parser.feed(data)) if data else None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _head(self, method: bytes, extra: bytes, length: int) -> bytes:
        ep = self.endpoint
        head = (b"%s %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: application/json, text/event-stream\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                % (method, ep.path.encode(), ep.host.encode(), ep.port, length))
        if self.era.stateful:
            if self.session is not None:
                head += b"Mcp-Session-Id: " + self.session + b"\r\n"
                head += b"MCP-Protocol-Version: " + self.era.version.encode() + b"\r\n"
        else:
            head += b"MCP-Protocol-Version: " + self.era.version.encode() + b"\r\n"
        return head + extra + b"\r\n"

    def next_echo(self, text: str = "hi") -> tuple[int, bytes]:
        self.ids += 1
        extra, body = self.era.echo(self.ids, text)
        return self.ids, self._head(b"POST", extra, len(body)) + body

    def roundtrip(self, method: bytes, body: bytes, timeout: float, extra: bytes = b"") -> Response:
        """One blocking request on this connection (handshakes, checks, DELETE)."""
        return self._exchange(self._head(method, extra, len(body)) + body, timeout)

    def _exchange(self, wire: bytes, timeout: float) -> Response:
        if self.sock is None:
            self.connect(timeout)
        assert self.sock is not None
        self.sock.settimeout(timeout)
        self.sock.sendall(wire)
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the server closed the connection")
            replies = self.parser.feed(data)
            if replies:
                self.last_used = time.monotonic()
                if replies[0].closing:
                    self.close()
                return replies[0]

    def handshake(self, timeout: float) -> dict[str, object]:
        """Legacy era: initialize (keeping Mcp-Session-Id) + notifications/initialized."""
        self.ids += 1
        r = self.roundtrip(b"POST", _enc.encode({"jsonrpc": "2.0", "id": self.ids, "method": "initialize",
                                                  "params": INITIALIZE}), timeout)
        if r.status != 200:
            raise HarnessError(f"initialize: HTTP {r.status}: {r.body[:300]!r}")
        self.session = r.headers.get(b"mcp-session-id")
        result = msgspec.json.decode(r.message(self.ids)).get("result") or {}
        n = self.roundtrip(b"POST", b'{"jsonrpc":"2.0","method":"notifications/initialized"}', timeout)
        if n.status not in (200, 202):
            raise HarnessError(f"notifications/initialized: HTTP {n.status}: {n.body[:300]!r}")
        return dict(result)

    def echo(self, text: str, timeout: float) -> bytes:
        """One blocking echo call; the JSON-RPC reply."""
        mid, wire = self.next_echo(text)
        r = self._exchange(wire, timeout)
        if r.status != 200:
            raise HarnessError(f"tools/call: HTTP {r.status}: {r.body[:300]!r}")
        return r.message(mid)

    def end_session(self, timeout: float) -> None:
        if self.session is not None and self.sock is not None:
            try:
                self.roundtrip(b"DELETE", b"", timeout)
            except OSError:
                pass
        self.close()


@dataclass
class LoopResult:
    latencies_ns: list[int]
    wall_ns: int  # loop start -> last reply
    client_cpu_s: float
    reconnects: int  # replies that closed their connection (the next request reconnected)


def closed_loop(workers: list[Worker], duration_s: float, timeout: float,
                fail: Callable[[str], HarnessError]) -> LoopResult:
    """Every worker calls echo back to back for `duration_s`, then waits for its last reply."""
    sel = selectors.DefaultSelector()
    inflight: dict[int, tuple[Worker, int, int]] = {}  # fd -> (worker, id, sent_ns)
    latencies: list[int] = []
    reconnects = 0
    cpu0 = time.process_time()
    start = time.perf_counter_ns()
    stop = start + int(duration_s * 1e9)
    deadline = stop + int(timeout * 1e9)
    last = start

    def send(w: Worker, sent: int) -> None:
        assert w.sock is not None
        mid, wire = w.next_echo()
        if w.sock.send(wire) != len(wire):  # a few hundred bytes into an idle socket: never partial
            raise fail("short write on an idle connection")
        inflight[w.sock.fileno()] = (w, mid, sent)

    def reconnect(w: Worker) -> None:
        """The server closes after this reply: a new connection, timed as part of the next request."""
        assert w.sock is not None
        sel.unregister(w.sock)
        w.connect(timeout)
        assert w.sock is not None
        w.sock.setblocking(False)
        sel.register(w.sock, selectors.EVENT_READ)

    try:
        for w in workers:
            assert w.sock is not None
            w.sock.setblocking(False)
            sel.register(w.sock, selectors.EVENT_READ)
            send(w, time.perf_counter_ns())
        while inflight:
            now = time.perf_counter_ns()
            if now > deadline:
                raise fail(f"timed out with {len(inflight)} replies missing")
            for key, _ in sel.select((deadline - now) / 1e9):
                w, mid, sent = inflight[key.fd]
                got = w.poll()
                if got is None:
                    raise fail("the server closed a connection with a request in flight")
                received, replies = got
                if not replies:
                    continue
                r = replies[0]
                if r.status != 200:
                    raise fail(f"HTTP {r.status}: {r.body[:300]!r}")
                head = _head.decode(r.message(mid))
                if head.id != mid or head.error is not None:
                    raise fail(f"bad reply to id {mid}: {r.body[:300]!r}")
                latencies.append(received - sent)
                last = received
                del inflight[key.fd]
                if r.closing:
                    reconnects += 1
                    if received < stop:
                        reconnect(w)
                        send(w, received)
                    else:
                        sel.unregister(w.sock)
                        w.close()
                elif received < stop:
                    send(w, time.perf_counter_ns())
    finally:
        sel.close()
        now_s = time.monotonic()
        for w in workers:
            if w.sock is not None:
                w.sock.setblocking(True)
                w.last_used = now_s
    return LoopResult(latencies, last - start, time.process_time() - cpu0, reconnects)
