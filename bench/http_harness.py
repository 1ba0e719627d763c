"""The Streamable HTTP measurement sequence: closed loops at several concurrencies, interleaved.

A *target* is a server spoken to in one protocol era: specactor, the SDK peer and the floor
in the 2025-11-25 (legacy, session) era, the main comparison; specactor and the SDK peer
again in the 2026-07-28 (stateless) era. One process per server serves both of its eras.
The TS SDK peer serves the 2025-11-25 era only, as two servers: `ts` with sessions and
`ts-stateless` (its `initialize` opens no session, so the workers send no `Mcp-Session-Id`).

1. start: each server is spawned (`--http --port 0`, fresh temporary directory) and its URL
   read from its stderr; startup = spawn → the reply to a first `initialize` (legacy);
   one checked `echo` per target (the text must come back);
2. idle RSS after `idle` seconds of rest;
3. for each concurrency c in `levels`: every target gets c workers, each with its own
   keep-alive connection and (legacy) its own session (`initialize` + `initialized`, not
   timed); one unrecorded warm-up loop of `warmup_s` per target; then `rounds` rounds in
   which the targets take turns running a closed loop of `slice_s` seconds (so machine drift
   lands on all alike). Server CPU (/proc) and client CPU (`time.process_time`) are read
   around each loop. The sessions are then ended (DELETE) and the connections closed;
4. peak RSS (VmHWM), then SIGTERM and the exit code.

A server may answer from child processes (`specactor --http --workers N`): CPU and RSS are
summed over its process tree (`HttpServer.tree`, found from /proc/*/stat once per level, as
workers live as long as the server); RSS so counts a shared page in every process that maps it.

Keep-alive connections idle longer than `STALE_S` (hypercorn and uvicorn drop them after
5 s) are reopened, untimed, before a loop. The client's garbage collector is off while
measuring (collected between loops).
"""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench import procstat
from bench.harness import _echo_text
from bench.http_driver import LEGACY, MODERN, Endpoint, Era, Worker, closed_loop
from bench.transport import HarnessError, ServerSpec

STALE_S = 2.0
CLOSE_TIMEOUT = 10.0


@dataclass(frozen=True)
class Target:
    key: str
    label: str
    server: str  # the ServerSpec key
    era: Era


TARGETS = (
    Target("specactor", "specactor", "specactor", LEGACY),
    Target("sdk", "SDK peer", "sdk", LEGACY),
    Target("floor", "floor", "floor", LEGACY),
    Target("specactor-2026", "specactor 2026-07-28", "specactor", MODERN),
    Target("specactor-1w", "specactor 1 worker", "specactor-1w", LEGACY),
    Target("specactor-1w-2026", "specactor 1 worker 2026-07-28", "specactor-1w", MODERN),
    Target("sdk-2026", "SDK peer 2026-07-28", "sdk", MODERN),
    Target("ts", "TS SDK sessions", "ts", LEGACY),
    Target("ts-stateless", "TS SDK stateless", "ts-stateless", LEGACY),
)


@dataclass
class HttpConfig:
    levels: tuple[int, ...] = (1, 10, 100)
    rounds: int = 3
    slice_s: float = 1.0
    warmup_s: float = 0.3
    idle: float = 0.5
    timeout: float = 30.0


@dataclass
class Level:
    """One target at one concurrency: every recorded request, over all rounds."""

    latencies_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    slice_calls_per_s: list[float] = field(default_factory=list)


@dataclass
class HttpRun:
    target: Target
    startup_ms: float | None = None  # spawn -> first initialize reply (legacy targets only)
    server_info: dict[str, Any] = field(default_factory=dict)
    idle_rss_mb: float | None = None
    peak_rss_mb: float | None = None
    levels: dict[int, Level] = field(default_factory=dict)
    exit_code: int | None = None


class HttpServer:
    """A server process serving HTTP; its URL comes from its stderr's JSON log lines."""

    def __init__(self, spec: ServerSpec, workdir: Path) -> None:
        self.spec = spec
        env = dict(os.environ)
        env.update(spec.env)
        self.spawned_ns = time.perf_counter_ns()
        self.proc = subprocess.Popen(spec.command(workdir, http=True), cwd=workdir, env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self.endpoint: Endpoint | None = None
        self._ready = threading.Event()
        self._tail: collections.deque[bytes] = collections.deque(maxlen=30)
        self._drain = threading.Thread(target=self._read_stderr, name=f"stderr-{spec.key}", daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._tail.append(line)
            if self.endpoint is None and b'"urls"' in line:
                with contextlib.suppress(ValueError, KeyError, IndexError):
                    url = urlsplit(json.loads(line)["urls"][0])
                    self.endpoint = Endpoint(url.hostname or "127.0.0.1", url.port or 80, url.path or "/mcp")
                    self._ready.set()
        self._ready.set()

    def stderr_tail(self) -> str:
        return b"".join(self._tail)[-4000:].decode(errors="replace")

    def tree(self) -> list[int]:
        """This server's pid and every process below it."""
        return procstat.tree(self.pid)

    def fail(self, what: str) -> HarnessError:
        return HarnessError(f"{self.spec.label} over HTTP (pid {self.pid}): {what}\n--- stderr tail ---\n"
                            f"{self.stderr_tail()}")

    def wait_ready(self, timeout: float) -> Endpoint:
        self._ready.wait(timeout)
        if self.endpoint is None:
            raise self.fail(f"no URL announced within {timeout} s (exit code {self.proc.poll()})")
        return self.endpoint

    def close(self, timeout: float) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        self._drain.join(2)
        return code


def _targets(specs: list[ServerSpec]) -> list[Target]:
    keys = {s.key for s in specs if s.http_argv}
    return [t for t in TARGETS if t.server in keys]


@contextlib.contextmanager
def _started(spec: ServerSpec, runs: list[HttpRun]) -> Iterator[HttpServer]:
    with tempfile.TemporaryDirectory(prefix=f"bench-http-{spec.key}-") as tmp:
        server = HttpServer(spec, Path(tmp))
        try:
            yield server
        finally:
            code = server.close(CLOSE_TIMEOUT)
            for run in runs:
                run.exit_code = code


def _check(run: HttpRun, server: HttpServer, endpoint: Endpoint, timeout: float) -> None:
    """The first legacy initialize (timed from spawn for startup) and one checked echo."""
    worker = Worker(endpoint, run.target.era)
    try:
        if run.target.era.stateful:
            deadline = time.monotonic() + timeout
            while True:  # the URL may be announced just before the socket accepts
                try:
                    run.server_info = worker.handshake(timeout)
                    break
                except ConnectionRefusedError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.005)
            if run.target.server == run.target.key:
                run.startup_ms = (time.perf_counter_ns() - server.spawned_ns) / 1e6
        reply = worker.echo("bench-check", timeout)
    except (OSError, ValueError, HarnessError) as err:
        raise server.fail(f"{run.target.label}: {err}") from err
    finally:
        worker.end_session(timeout)
    if _echo_text(reply) != "bench-check":
        raise server.fail(f"{run.target.label}: echo did not echo: {reply[:300]!r}")


def measure_http(specs: list[ServerSpec], cfg: HttpConfig, progress: Callable[[str], None]) -> dict[str, HttpRun]:
    targets = _targets(specs)
    runs = {t.key: HttpRun(t) for t in targets}
    servers: dict[str, HttpServer] = {}
    with contextlib.ExitStack() as stack:
        for spec in specs:
            mine = [r for r in runs.values() if r.target.server == spec.key]
            if not mine:
                continue
            server = servers[spec.key] = stack.enter_context(_started(spec, mine))
            endpoint = server.wait_ready(cfg.timeout)
            for run in mine:
                _check(run, server, endpoint, cfg.timeout)
        time.sleep(cfg.idle)
        for run in runs.values():
            if run.target.server == run.target.key:
                run.idle_rss_mb = procstat.summed(procstat.rss_mb, servers[run.target.server].tree())
        gc.collect()
        gc.disable()
        try:
            for c in cfg.levels:
                _level(c, targets, runs, servers, cfg, progress)
        finally:
            gc.enable()
        for run in runs.values():
            if run.target.server == run.target.key:
                run.peak_rss_mb = procstat.summed(procstat.peak_rss_mb, servers[run.target.server].tree())
    return runs


def _level(c: int, targets: list[Target], runs: dict[str, HttpRun], servers: dict[str, HttpServer],
           cfg: HttpConfig, progress: Callable[[str], None]) -> None:
    progress(f"http c={c}: {c} connections per target, {cfg.rounds} x {cfg.slice_s:g} s per target")
    pools: dict[str, list[Worker]] = {}
    try:
        for t in targets:
            server = servers[t.server]
            pools[t.key] = []
            for _ in range(c):
                w = Worker(server.wait_ready(cfg.timeout), t.era)
                pools[t.key].append(w)
                try:
                    w.connect(cfg.timeout)
                    if t.era.stateful:
                        w.handshake(cfg.timeout)
                except (OSError, ValueError, HarnessError) as err:
                    raise server.fail(f"{t.label}: opening connection {len(pools[t.key])} of {c}: {err}") from err
        for t in targets:
            _loop(pools[t.key], servers[t.server], t, cfg.warmup_s, cfg)
        level = {t.key: runs[t.key].levels.setdefault(c, Level()) for t in targets}
        trees = {key: server.tree() for key, server in servers.items()}
        for _ in range(cfg.rounds):
            for t in targets:
                server = servers[t.server]
                cpu0 = procstat.summed(procstat.cpu_seconds, trees[t.server])
                result = _loop(pools[t.key], server, t, cfg.slice_s, cfg)
                lv = level[t.key]
                lv.server_cpu_s += procstat.summed(procstat.cpu_seconds, trees[t.server]) - cpu0
                lv.client_cpu_s += result.client_cpu_s
                lv.wall_s += result.wall_ns / 1e9
                lv.latencies_ms += [ns / 1e6 for ns in result.latencies_ns]
                lv.slice_calls_per_s.append(len(result.latencies_ns) / (result.wall_ns / 1e9))
                gc.collect()
    finally:
        for pool in pools.values():
            for w in pool:
                w.end_session(cfg.timeout)


def _loop(pool: list[Worker], server: HttpServer, t: Target, seconds: float, cfg: HttpConfig) -> Any:
    now = time.monotonic()
    try:
        for w in pool:
            if w.sock is None or now - w.last_used > STALE_S:
                w.connect(cfg.timeout)
    except OSError as err:
        raise server.fail(f"{t.label}: reconnecting: {err}") from err

    def fail(what: str) -> HarnessError:
        return server.fail(f"{t.label}, c={len(pool)}: {what}")

    try:
        return closed_loop(pool, seconds, cfg.timeout, fail)
    except (OSError, ValueError) as err:
        raise fail(str(err)) from err
