"""Callers: any JSON-RPC request to a server process, one at a time or a burst, over stdio or HTTP.

`StdioCaller` wraps `stdio_driver.StdioConnection` (one pipe): a call is one request written and
its reply read; a burst is every request written at once on the one pipe (pipelined), each timed
from that write to its own reply. `HttpCaller` starts the server with `--http --port 0`
(`http_harness.HttpServer` reads the announced URL) and speaks the 2025-11-25 era
(`http_driver.Worker`: `initialize` opens a session per connection): a call goes on one
keep-alive connection; a burst of n uses n connections, each with its own session, one request
each, all sent back to back, each timed from its own `send` to the last byte of its reply.
Connections are (re)opened untimed before a call or a burst when closed or idle over `STALE_S`.

Every reply comes back decoded (`Timed.reply`: the JSON-RPC message); checking it is the caller's job.
"""

from __future__ import annotations

import selectors
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench.harness import INITIALIZE_PARAMS, INITIALIZED, request
from bench.http_driver import LEGACY, Worker
from bench.http_harness import STALE_S, HttpServer
from bench.stdio_driver import StdioConnection
from bench.transport import HarnessError, ServerSpec

Call = tuple[str, dict[str, Any]]  # (method, params)
_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


@dataclass
class Timed:
    ms: float
    reply: dict[str, Any]


class StdioCaller:
    def __init__(self, spec: ServerSpec, root: Path, timeout: float) -> None:
        self.label = spec.label
        self.timeout = timeout
        self.conn = StdioConnection(spec, root)
        self.pid = self.conn.pid
        self._ids = 1
        try:
            init = self.conn.request_many([(1, request(1, "initialize", INITIALIZE_PARAMS))], timeout)[0]
            if init.error is not None:
                raise self.fail(f"initialize: {init.error!r}")
            self.conn.notify(INITIALIZED)
        except HarnessError:
            self.conn.close(2.0)
            raise

    def fail(self, what: str) -> HarnessError:
        return HarnessError(f"{self.label} (stdio, pid {self.pid}): {what}\n--- stderr tail ---\n"
                            f"{self.conn.stderr_tail()}")

    def open_pool(self, n: int) -> None:
        """Nothing to open: a stdio burst is pipelined on the one pipe."""

    def burst(self, calls: Sequence[Call]) -> list[Timed]:
        """Every request written at once; the results in call order."""
        first = self._ids + 1
        self._ids += len(calls)
        messages = [(first + k, request(first + k, method, params)) for k, (method, params) in enumerate(calls)]
        replies = self.conn.request_many(messages, self.timeout)
        out: list[Timed | None] = [None] * len(calls)
        for r in replies:
            out[r.id - first] = Timed(r.latency_ns / 1e6, _dec.decode(r.body))
        return [t for t in out if t is not None]

    def one(self, call: Call) -> Timed:
        return self.burst([call])[0]

    def close(self) -> int | None:
        return self.conn.close(10.0)


class HttpCaller:
    def __init__(self, spec: ServerSpec, root: Path, timeout: float) -> None:
        self.label = spec.label
        self.timeout = timeout
        self.server = HttpServer(spec, root)
        self.pid = self.server.pid
        self.pool: list[Worker] = []
        try:
            self.endpoint = self.server.wait_ready(timeout)
            self.main = self._worker(retry=True)
        except HarnessError:
            self.server.close(2.0)
            raise

    def fail(self, what: str) -> HarnessError:
        return self.server.fail(what)

    def _worker(self, retry: bool = False) -> Worker:
        w = Worker(self.endpoint, LEGACY)
        deadline = time.monotonic() + self.timeout
        while True:  # the URL may be announced just before the socket accepts
            try:
                w.connect(self.timeout)
                w.handshake(self.timeout)
                return w
            except ConnectionRefusedError as err:
                if not retry or time.monotonic() > deadline:
                    raise self.fail(f"connecting: {err}") from err
                time.sleep(0.005)
            except (OSError, ValueError) as err:
                raise self.fail(f"opening a session: {err}") from err

    def _ready(self, w: Worker) -> None:
        if w.sock is None or time.monotonic() - w.last_used > STALE_S:
            try:
                w.connect(self.timeout)
            except OSError as err:
                raise self.fail(f"reconnecting: {err}") from err

    def _wire(self, w: Worker, method: str, params: dict[str, Any]) -> tuple[int, bytes]:
        w.ids += 1
        body = _enc.encode({"jsonrpc": "2.0", "id": w.ids, "method": method, "params": params})
        return w.ids, w._head(b"POST", b"", len(body)) + body  # the driver's own framing (session headers)

    def one(self, call: Call) -> Timed:
        w = self.main
        self._ready(w)
        mid, wire = self._wire(w, *call)
        try:
            started = time.perf_counter_ns()
            r = w._exchange(wire, self.timeout)
            ms = (time.perf_counter_ns() - started) / 1e6
            if r.status != 200:
                raise self.fail(f"{call[0]}: HTTP {r.status}: {r.body[:300]!r}")
            return Timed(ms, _dec.decode(r.message(mid)))
        except (OSError, ValueError) as err:
            raise self.fail(f"{call[0]}: {err}") from err

    def open_pool(self, n: int) -> None:
        """Open the connections (and sessions) a burst of `n` uses, so a burst's CPU is the calls' own."""
        while len(self.pool) < n:
            self.pool.append(self._worker())

    def burst(self, calls: Sequence[Call]) -> list[Timed]:
        """One request on each of len(calls) connections, all sent back to back; results in call order."""
        self.open_pool(len(calls))
        workers = self.pool[:len(calls)]
        for w in workers:
            self._ready(w)
        wires = [self._wire(w, *call) for w, call in zip(workers, calls, strict=True)]
        sel = selectors.DefaultSelector()
        sent: dict[int, tuple[int, Worker, int, int]] = {}  # fd -> (index, worker, id, sent_ns)
        got: list[tuple[float, bytes] | None] = [None] * len(calls)  # decoded once the burst is over
        try:
            for k, (w, (mid, wire)) in enumerate(zip(workers, wires, strict=True)):
                assert w.sock is not None
                w.sock.settimeout(self.timeout)
                started = time.perf_counter_ns()
                w.sock.sendall(wire)
                sent[w.sock.fileno()] = (k, w, mid, started)
                sel.register(w.sock, selectors.EVENT_READ)
            deadline = time.monotonic() + self.timeout
            while sent:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self.fail(f"burst: timed out with {len(sent)} replies missing")
                for key, _ in sel.select(left):
                    k, w, mid, started = sent[key.fd]
                    assert w.sock is not None
                    data = w.sock.recv(1 << 16)
                    received = time.perf_counter_ns()
                    if not data:
                        raise self.fail("burst: the server closed a connection with a request in flight")
                    replies = w.parser.feed(data)
                    if not replies:
                        continue
                    r = replies[0]
                    if r.status != 200:
                        raise self.fail(f"burst: HTTP {r.status}: {r.body[:300]!r}")
                    got[k] = ((received - started) / 1e6, r.message(mid))
                    sel.unregister(w.sock)
                    del sent[key.fd]
                    w.last_used = time.monotonic()
                    if r.closing:
                        w.close()
        except (OSError, ValueError) as err:
            raise self.fail(f"burst: {err}") from err
        finally:
            sel.close()
        return [Timed(ms, _dec.decode(body)) for ms, body in filter(None, got)]

    def close(self) -> int | None:
        for w in [self.main, *self.pool]:
            w.end_session(self.timeout)
        return self.server.close(10.0)
