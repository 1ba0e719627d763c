"""The measurement sequence: every server side by side in one run, interleaved.

Machines drift (frequency scaling, other tenants), so the servers are never measured one
after the other: each phase cycles through them, so drift lands on all of them alike.

1. first reply: `spawns` fresh processes per server (round-robin); the time from just before
   the spawn to the arrival of the `initialize` reply;
2. the measured processes: one per server, all alive together; handshake (`initialize` then
   `notifications/initialized`), one checked `echo` call, `idle` seconds of rest, then VmRSS,
   summed over the server's process tree (worker processes that run at idle count too);
3. warm-up: `warmup` sequential echo calls each, not recorded;
4. single call: `samples` sequential echo calls each, in blocks of `block` calls, servers
   taking turns block by block; CPU time is read around each block;
5. burst: `rounds` rounds per server (one unrecorded first), turn by turn; a round writes
   `burst` echo requests at once on the one connection and waits for every reply; each
   request's latency runs from that write to its reply's arrival, and the round's throughput
   is `burst` / (last arrival - write);
6. VmHWM (peak RSS, summed over the process tree), then EOF on stdin and the exit code.

Server CPU is read over the process tree found once after the warm-up (`echo` starts no worker).

The client's garbage collector is off while measuring (collected between blocks).
"""

from __future__ import annotations

import contextlib
import gc
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from bench import procstat
from bench.transport import Connection, HarnessError, Reply, ServerSpec, Transport

PROTOCOL_VERSION = "2025-11-25"
PROBE = "hi"
CLOSE_TIMEOUT = 10.0

_encoder = msgspec.json.Encoder()


def request(mid: int, method: str, params: dict[str, Any]) -> bytes:
    return _encoder.encode({"jsonrpc": "2.0", "id": mid, "method": method, "params": params})


INITIALIZE_PARAMS = {
    "protocolVersion": PROTOCOL_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "specactor-bench", "version": "0.1.0"},
}
INITIALIZED = _encoder.encode({"jsonrpc": "2.0", "method": "notifications/initialized"})


def echo_call(mid: int, text: str = PROBE) -> bytes:
    return request(mid, "tools/call", {"name": "echo", "arguments": {"text": text}})


def waiting_call(mid: int) -> bytes:
    """specactor's fixture `sleep` for 0 s: a tool that awaits (one checkpoint), so it runs in a task
    of its own with a cancel scope and a concurrency slot, unlike `echo`, which cannot wait and is
    answered in the transport's task (docs/decisions.md)."""
    return request(mid, "tools/call", {"name": "sleep", "arguments": {"seconds": 0}})


@dataclass
class Config:
    samples: int = 5000
    rounds: int = 50
    spawns: int = 15
    warmup: int = 300
    burst: int = 100
    idle: float = 0.5
    block: int = 100
    timeout: float = 30.0


@dataclass
class ServerRun:
    """Everything measured for one server; latencies in ms, memory in MB (10**6 bytes)."""

    spec: ServerSpec
    first_reply_ms: list[float] = field(default_factory=list)
    server_info: dict[str, Any] = field(default_factory=dict)
    idle_rss_mb: float | None = None
    peak_rss_mb: float | None = None
    single_ms: list[float] = field(default_factory=list)
    single_cpu_s: float = 0.0
    waiting_ms: list[float] = field(default_factory=list)  # specactor only: `waiting_call`
    burst_ms: list[float] = field(default_factory=list)
    burst_tput: list[float] = field(default_factory=list)
    burst_cpu_s: float = 0.0
    exit_codes: list[int | None] = field(default_factory=list)


class Live:
    """A running server and its id counter."""

    def __init__(self, run: ServerRun, conn: Connection, cfg: Config) -> None:
        self.run = run
        self.conn = conn
        self.cfg = cfg
        self.ids = 1

    def next_id(self) -> int:
        self.ids += 1
        return self.ids

    def fail(self, what: str) -> HarnessError:
        return HarnessError(f"{self.run.spec.label}: {what}\n--- stderr tail ---\n{self.conn.stderr_tail()}")

    def check(self, reply: Reply) -> None:
        if reply.error is not None:
            raise self.fail(f"request {reply.id} failed: {reply.error.decode(errors='replace')}")

    def sequential(self, n: int, call: Callable[[int], bytes] = echo_call) -> list[float]:
        out: list[float] = []
        for _ in range(n):
            mid = self.next_id()
            (reply,) = self.conn.request_many([(mid, call(mid))], self.cfg.timeout)
            self.check(reply)
            out.append(reply.latency_ns / 1e6)
        return out

    def burst(self) -> tuple[list[float], float]:
        messages = [(mid, echo_call(mid)) for mid in (self.next_id() for _ in range(self.cfg.burst))]
        replies = self.conn.request_many(messages, self.cfg.timeout)
        for reply in replies:
            self.check(reply)
        wall_ns = max(r.received_ns for r in replies) - replies[0].sent_ns
        return [r.latency_ns / 1e6 for r in replies], len(replies) / (wall_ns / 1e9)


def _handshake(conn: Connection, spec: ServerSpec, timeout: float) -> tuple[float, dict[str, Any]]:
    """initialize + initialized; (ms from spawn to the initialize reply, the result)."""
    (reply,) = conn.request_many([(1, request(1, "initialize", INITIALIZE_PARAMS))], timeout)
    if reply.error is not None:
        raise HarnessError(f"{spec.label}: initialize failed: {reply.error.decode(errors='replace')}")
    result = msgspec.json.decode(reply.body).get("result") or {}
    if "protocolVersion" not in result or "serverInfo" not in result:
        raise HarnessError(f"{spec.label}: not an InitializeResult: {reply.body[:300]!r}")
    conn.notify(INITIALIZED)
    return (reply.received_ns - conn.spawned_ns) / 1e6, result


def _echo_text(body: bytes) -> str | None:
    """The echoed text in a tools/call reply: plain (the SDK) or in a {success, data} envelope."""
    result = msgspec.json.decode(body).get("result") or {}
    content = result.get("content") or [{}]
    if result.get("isError") or content[0].get("type") != "text":
        return None
    text = content[0].get("text")
    try:
        envelope = msgspec.json.decode(text)
    except (msgspec.DecodeError, TypeError):
        return text if isinstance(text, str) else None
    if isinstance(envelope, dict) and envelope.get("success") is True:
        return str((envelope.get("data") or {}).get("text"))
    return text if isinstance(text, str) else None


@contextlib.contextmanager
def _spawned(transport: Transport, spec: ServerSpec, run: ServerRun) -> Iterator[Connection]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{spec.key}-") as tmp:
        conn = transport.open(spec, Path(tmp))
        try:
            yield conn
        finally:
            run.exit_codes.append(conn.close(CLOSE_TIMEOUT))


def measure(transport: Transport, specs: list[ServerSpec], cfg: Config,
            progress: Callable[[str], None]) -> dict[str, ServerRun]:
    runs = {spec.key: ServerRun(spec) for spec in specs}
    progress(f"first reply: {cfg.spawns} fresh processes per server")
    for _ in range(cfg.spawns):
        for spec in specs:
            with _spawned(transport, spec, runs[spec.key]) as conn:
                ms, _ = _handshake(conn, spec, cfg.timeout)
                runs[spec.key].first_reply_ms.append(ms)

    with contextlib.ExitStack() as stack:
        lives: list[Live] = []
        for spec in specs:
            run = runs[spec.key]
            conn = stack.enter_context(_spawned(transport, spec, run))
            _, run.server_info = _handshake(conn, spec, cfg.timeout)
            live = Live(run, conn, cfg)
            mid = live.next_id()
            (reply,) = conn.request_many([(mid, echo_call(mid, "bench-check"))], cfg.timeout)
            live.check(reply)
            if _echo_text(reply.body) != "bench-check":
                raise live.fail(f"echo did not echo: {reply.body[:300]!r}")
            lives.append(live)
        time.sleep(cfg.idle)
        for live in lives:
            # the process tree: pool workers running at idle would count too (issue 15)
            live.run.idle_rss_mb = procstat.summed(procstat.rss_mb, procstat.tree(live.conn.pid))

        gc.collect()
        gc.disable()
        try:
            _timed_phases(lives, cfg, progress)
        finally:
            gc.enable()
        for live in lives:
            live.run.peak_rss_mb = procstat.summed(procstat.peak_rss_mb, procstat.tree(live.conn.pid))
    return runs


def _timed_phases(lives: list[Live], cfg: Config, progress: Callable[[str], None]) -> None:
    progress(f"warm-up: {cfg.warmup} calls per server")
    for live in lives:
        live.sequential(cfg.warmup)
    trees = {id(live): procstat.tree(live.conn.pid) for live in lives}

    def cpu(live: Live) -> float:
        return procstat.summed(procstat.cpu_seconds, trees[id(live)])

    progress(f"single call: {cfg.samples} sequential calls per server, in blocks of {cfg.block}")
    done = 0
    while done < cfg.samples:
        n = min(cfg.block, cfg.samples - done)
        for live in lives:
            before = cpu(live)
            live.run.single_ms += live.sequential(n)
            live.run.single_cpu_s += cpu(live) - before
        gc.collect()
        done += n
    waiting = [live for live in lives if live.run.spec.key == "specactor"]
    if waiting:
        progress(f"single call of a tool that awaits: {cfg.samples // 5} sequential calls (specactor)")
        for live in waiting:
            live.sequential(cfg.warmup, waiting_call)
            live.run.waiting_ms = live.sequential(cfg.samples // 5, waiting_call)
    progress(f"burst: {cfg.rounds} rounds of {cfg.burst} pipelined calls per server")
    for live in lives:
        live.burst()  # unrecorded: the first burst grows buffers and task pools
    for _ in range(cfg.rounds):
        for live in lives:
            before = cpu(live)
            latencies, tput = live.burst()
            live.run.burst_cpu_s += cpu(live) - before
            live.run.burst_ms += latencies
            live.run.burst_tput.append(tput)
        gc.collect()
