"""The HTTP worker supervisor: one address, N server processes taking its connections.

`serve` (the parent of `specactor serve --http --workers N`, N > 1) binds the address itself, so
port 0 and a bad address behave as in one process (each worker then listens on that port:
`bind`), makes a private runtime folder (mode 0700: the shared session table, the workers'
metrics snapshots) and a signing key, and starts N `python -m specactor http-worker` processes
(`cli.worker_main`; `read_handoff`, `answer` and `parent_gone` are their side of the pipe).
Each gets its settings as one JSON line on its stdin, which it keeps open: EOF means the parent
is gone, and the worker stops (a worker never outlives its parent, however the parent dies). A
worker that dies is replaced (at most `MAX_RESTARTS` within `RESTART_WINDOW` seconds, then the
server stops with status 1); SIGTERM or SIGINT stops every worker with SIGTERM and waits the
grace period (SIGKILL after). Workers run in their own process group, so a terminal's Ctrl-C
reaches only the parent, which decides.
"""

from __future__ import annotations

import importlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import trio

from specactor import __version__
from specactor.actors import shared_sessions, worker_metrics
from specactor.actors.http import bind_error
from specactor.config import Config, ConfigError, HttpConfig
from specactor.logsetup import get_logger

log = get_logger("specactor.http_workers")

MAX_RESTARTS = 10
RESTART_WINDOW = 60.0
BACKOFF_MAX = 2.0  # seconds before a replacement starts, doubling from 0.05 with recent restarts
READY_TIMEOUT = 120.0  # a worker imports and builds everything before it is ready
BACKLOG = 100  # hypercorn's default, which each worker sets again on the socket
WORKER_COMMAND = "http-worker"  # `python -m specactor http-worker`: cli.worker_main


class Handoff(msgspec.Struct, frozen=True):
    """What a worker gets on its stdin."""

    config: dict[str, Any]  # Config, as builtins
    port: int  # the port the parent holds: the worker listens on it too (SO_REUSEPORT)
    run_dir: str
    secret: str  # hex: the key every worker signs 2026-07-28 requestState with
    index: int
    extra: str | None = None  # "module:function" registering more definitions (the fixture server)
    name: str | None = None  # serverInfo.name, when not specactor's


class Ready(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a worker answers on its stdout: ready (with its tool count), or a setting it cannot use."""

    tools: int = 0
    error: str | None = None
    setting: str | None = None
    source: str | None = None


def reference(fn: Callable[..., Any] | None) -> str | None:
    """`fn` as "module:qualname", for a worker to import.

    Raises:
        ValueError: `fn` cannot be imported by name (a closure, a lambda).
    """
    if fn is None:
        return None
    module = fn.__module__
    if module == "__main__":  # `python -m pkg.mod`: the worker imports it by its real name
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        module = spec.name if spec is not None else module
    ref = f"{module}:{fn.__qualname__}"
    if "<" in ref or module == "__main__":
        raise ValueError(f"{ref} cannot be imported by a worker process")
    return ref


def bind(cfg: HttpConfig, *, listen: bool) -> socket.socket:
    """A socket on `cfg`'s address with SO_REUSEPORT, bound as hypercorn binds it.

    The parent binds without listening: it holds the port (and finds port 0's number, or why the
    address cannot be had) but takes no connections. Each worker then binds its own listening
    socket to that port, and the kernel spreads new connections over the workers by their
    address hash. One socket shared by all workers was measured first: whichever worker woke
    first accepted a burst of keep-alive connections, and 2 workers served 0.96x one at c=10.

    Raises:
        ConfigError: the address cannot be bound (in use, not this machine's, not permitted).
    """
    host = cfg.host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, cfg.port))
        if listen:
            sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        error = bind_error(cfg, exc)
        if error is None:
            raise
        raise error from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/mcp" if sock.family == socket.AF_INET6 else f"http://{host}:{port}/mcp"


@dataclass
class Worker:
    index: int
    proc: trio.Process
    stdin: trio.abc.SendStream  # kept open: its EOF tells the worker the parent is gone


@dataclass
class HttpWorkers:
    """Args:
        config: the resolved settings (`http.worker_count` workers).
        extra, name: as `app.build`'s, passed to each worker by reference.
    """

    config: Config
    extra: Callable[..., None] | None = None
    name: str | None = None
    workers: dict[int, Worker] = field(default_factory=dict)
    stopping: bool = False
    restarts: list[float] = field(default_factory=list)
    failed: trio.Event = field(default_factory=trio.Event)

    async def serve(self) -> int:
        """Serve until SIGINT/SIGTERM (0), or until workers keep dying (1).

        Raises:
            ConfigError: the socket cannot be bound, or a worker refused a setting while starting.
        """
        from specactor.app import check_public_bind, watch_signals

        check_public_bind(self.config.http)
        count = self.config.http.worker_count
        sock = bind(self.config.http, listen=False)
        run_dir = Path(tempfile.mkdtemp(prefix="specactor-run-"))  # 0700
        try:
            shared_sessions.create(run_dir / "sessions.db")
            (run_dir / "metrics").mkdir()
            handoff = Handoff(msgspec.to_builtins(self.config), sock.getsockname()[1], str(run_dir),
                              secrets.token_hex(32), 0, reference(self.extra), self.name)
            self.table = shared_sessions.SharedSessions(run_dir / "sessions.db")  # to forget dead workers' streams
            async with trio.open_nursery() as nursery:
                ready = [await nursery.start(self._start, msgspec.structs.replace(handoff, index=i))
                         for i in range(count)]
                for i in range(count):
                    nursery.start_soon(self._supervise, msgspec.structs.replace(handoff, index=i))
                stop, reason = trio.Event(), ["signal"]
                nursery.start_soon(watch_signals, stop, reason)

                async def on_failure() -> None:
                    await self.failed.wait()
                    reason.append("workers keep failing")
                    stop.set()

                nursery.start_soon(on_failure)
                from specactor import logsetup

                await trio.to_thread.run_sync(logsetup.preload)
                log.info("specactor started", transport="http", version=__version__,
                         root=str(self.config.root_path), urls=[url_of(sock)], pid=os.getpid(), tools=ready[0],
                         workers=count)
                await stop.wait()
                log.info("shutting down", reason=reason[-1], workers=len(self.workers))
                await self._stop_all()
                nursery.cancel_scope.cancel()
            self.table.close()
        finally:
            for worker in self.workers.values():  # after a failed start: none may stay behind
                if worker.proc.returncode is None:
                    worker.proc.kill()
            sock.close()
            shutil.rmtree(run_dir, ignore_errors=True)
        log.info("stopped")
        return 1 if self.failed.is_set() else 0

    async def _start(self, handoff: Handoff, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Start worker `handoff.index` and wait until it serves; its tool count."""
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "specactor", WORKER_COMMAND], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            process_group=0)
        assert proc.stdin is not None and proc.stdout is not None
        self.workers[handoff.index] = Worker(handoff.index, proc, proc.stdin)
        await proc.stdin.send_all(msgspec.json.encode(handoff) + b"\n")
        line = b""
        with trio.move_on_after(READY_TIMEOUT):
            while not line.endswith(b"\n"):
                chunk = await proc.stdout.receive_some(4096)
                if not chunk:
                    break
                line += chunk
        await proc.stdout.aclose()
        try:
            ready = msgspec.json.decode(line, type=Ready)
        except msgspec.DecodeError:
            proc.kill()
            raise RuntimeError(f"HTTP worker {handoff.index} exited before it was ready "
                               f"(status {await proc.wait()})") from None
        if ready.error is not None:
            await proc.wait()
            raise ConfigError(ready.error, setting=ready.setting, source=ready.source)
        log.debug("http worker ready", index=handoff.index, worker_pid=proc.pid)
        task_status.started(ready.tools)

    async def _supervise(self, handoff: Handoff) -> None:
        """Replace worker `handoff.index` each time it dies, within the restart intensity."""
        while True:
            worker = self.workers[handoff.index]
            status = await worker.proc.wait()
            await worker.stdin.aclose()
            self.table.forget_worker(worker.proc.pid)
            worker_metrics.forget(Path(handoff.run_dir) / "metrics", worker.proc.pid)
            if self.stopping:
                return
            now = trio.current_time()
            self.restarts = [t for t in self.restarts if t > now - RESTART_WINDOW] + [now]
            if len(self.restarts) > MAX_RESTARTS:
                log.critical("HTTP workers keep dying; stopping", restarts=len(self.restarts),
                             within=RESTART_WINDOW, status=status)
                self.failed.set()
                return
            delay = min(BACKOFF_MAX, 0.05 * 2 ** (len(self.restarts) - 1))
            log.warning("HTTP worker died; replacing it", index=handoff.index, worker_pid=worker.proc.pid,
                        status=status, restart_in=delay)
            await trio.sleep(delay)
            try:
                await self._start(handoff)
            except (RuntimeError, ConfigError) as err:
                log.error("HTTP worker could not be replaced", index=handoff.index, error=str(err))

    async def _stop_all(self) -> None:
        """SIGTERM every worker; those still running after the grace period (and a margin for
        their own shutdown) are killed."""
        self.stopping = True
        procs = [w.proc for w in self.workers.values() if w.proc.returncode is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        with trio.move_on_after(self.config.grace_period * 2 + 5):
            for proc in procs:
                await proc.wait()
        for proc in procs:
            if proc.returncode is None:
                log.warning("HTTP worker did not stop in time; killed", worker_pid=proc.pid)
                proc.kill()
                await proc.wait()


# ---------------------------------------------------------------------------- the worker's side


def read_handoff() -> Handoff:
    """The worker's `Handoff`: the first line on its stdin (blocking; before the event loop)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(0, 65536)
        if not chunk:
            break
        line += chunk
    return msgspec.json.decode(line, type=Handoff)


def answer(ready: Ready) -> None:
    """Tell the parent this worker is ready, or what setting stopped it."""
    try:
        os.write(1, msgspec.json.encode(ready) + b"\n")
    except OSError:  # the parent stopped listening (it had our first answer) or is gone
        pass


async def parent_gone() -> None:
    """Return when stdin, the parent's end of the pipe it keeps open, reaches EOF."""
    async with trio.lowlevel.FdStream(os.dup(0)) as stream:
        while await stream.receive_some(1024):
            pass


def imported(ref: str | None) -> Callable[..., Any] | None:
    """The function `reference` named."""
    if ref is None:
        return None
    module, _, name = ref.partition(":")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    fn: Callable[..., Any] = target
    return fn
