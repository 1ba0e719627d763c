"""The application: one root nursery with a supervisor, the actors, and a transport.

`build` wires the pieces without doing I/O; `serve_stdio` runs them until stdin closes or a
SIGINT/SIGTERM arrives, then lets in-flight requests finish within the grace period,
cancels what is left, flushes the session log and returns 0.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

import structlog
import trio

from specactor import SERVER_NAME, __version__
from specactor.actors.dispatcher import Dispatcher
from specactor.actors.metrics import MetricsActor
from specactor.actors.runtime import TrioRuntime
from specactor.actors.session_log import Flush, SessionLogActor
from specactor.actors.stdio import StdioFds, StdioTransport
from specactor.actors.storage import StorageActor
from specactor.actors.supervisor import ChildSpec, Supervisor
from specactor.config import Config
from specactor.protocol.registry import Registry
from specactor.protocol.server import ServerCore
from specactor.toolsets import Services, build_registry

log = structlog.get_logger("specactor.app")

INSTRUCTIONS = (
    "specactor serves a spec-driven workflow on this repository: OpenSpec workspaces (openspec/), "
    "the AirsSpec lifecycle (.airsspec/), layered memory and a knowledge repository of ADRs and "
    "policies, and graph sync. Every tool answers with {success, data} or {success: false, error: "
    "{code, message, retryable, details}}."
)


@dataclass
class App:
    config: Config
    services: Services
    registry: Registry
    core: ServerCore
    metrics: MetricsActor
    session_log: SessionLogActor
    storage: StorageActor
    dispatcher: Dispatcher
    supervisor: Supervisor


def build(config: Config, extra: Callable[[Registry, Services], None] | None = None,
          *, name: str = SERVER_NAME) -> App:
    """Wire the actors, the registry and the core. `extra` registers more definitions (fixtures)."""
    runtime = TrioRuntime(config.worker_threads)
    metrics = MetricsActor()
    storage = StorageActor(config.root_path)
    session_log = SessionLogActor(config.session_log_dir, max_entry_bytes=config.session_log.max_entry_bytes)
    services = Services(config=config, storage=storage, metrics=metrics, runtime=runtime)
    registry = build_registry(services)
    if extra is not None:
        extra(registry, services)
    core = ServerCore(registry, name=name, version=__version__, instructions=INSTRUCTIONS,
                      page_size=config.page_size)
    dispatcher = Dispatcher(core, runtime, metrics, session_log, max_concurrency=config.max_concurrency,
                            request_timeout=config.request_timeout)
    return App(config, services, registry, core, metrics, session_log, storage, dispatcher, Supervisor())


async def start_actors(app: App, nursery: trio.Nursery) -> None:
    """Start the supervised actors every transport needs, in dependency order."""
    for spec in (ChildSpec("metrics", app.metrics.run), ChildSpec("session-log", app.session_log.run),
                 ChildSpec("storage", app.storage.run), ChildSpec("dispatcher", app.dispatcher.run)):
        await app.supervisor.start(nursery, spec)


async def drain(app: App) -> None:
    """Give in-flight requests the grace period, then flush the session log."""
    with trio.move_on_after(app.config.grace_period) as scope:
        await app.dispatcher.wait_idle()
    if scope.cancelled_caught:
        log.warning("grace period over; cancelling requests still running", in_flight=app.dispatcher.in_flight)
    with trio.move_on_after(app.config.grace_period):
        await app.session_log.mailbox.call(Flush(), app.config.grace_period)


async def _watch_signals(stop: trio.Event, reason: list[str]) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            reason.append(signal.Signals(signum).name)
            stop.set()


async def serve_stdio(app: App, fds: StdioFds) -> int:
    """Serve MCP on stdin/stdout until EOF or a signal; returns the exit status."""
    transport = StdioTransport(app.core, app.dispatcher, fds, max_line=app.config.max_line_bytes)
    async with trio.open_nursery() as root:
        await start_actors(app, root)
        await app.supervisor.start(root, ChildSpec("stdio", transport.run, restart="transient"))

        def on_change(kind: str, uri: str | None) -> None:
            session, conn = transport.session, transport.conn
            if conn is None or session.era != "legacy" or not session.initialized:
                return
            if kind == "resource":
                if uri in session.subscriptions:
                    root.start_soon(conn.peer.notify, "notifications/resources/updated", {"uri": uri})
            else:
                root.start_soon(conn.peer.notify, f"notifications/{kind}/list_changed", {})

        app.registry.on_change(on_change)
        stop, reason = trio.Event(), ["stdin closed"]
        root.start_soon(_watch_signals, stop, reason)

        async def on_eof() -> None:
            await transport.closed.wait()
            stop.set()

        root.start_soon(on_eof)
        log.info("specactor started", transport="stdio", version=__version__, root=str(app.config.root_path),
                 toolsets=sorted({e.toolset for e in app.registry.tools.values()} | set(app.config.toolsets)),
                 tools=len(app.registry.tools), pid=os.getpid())
        await stop.wait()
        log.info("shutting down", reason=reason[-1], in_flight=app.dispatcher.in_flight)
        await drain(app)
        root.cancel_scope.cancel()
    log.info("stopped")
    return 0


async def serve_http(app: App) -> int:
    """Serve MCP over Streamable HTTP until SIGINT/SIGTERM; returns the exit status."""
    from specactor.actors.http import HttpTransport
    from specactor.protocol.http_rules import is_loopback

    cfg = app.config.http
    if not is_loopback(cfg.host) and not cfg.token:
        log.error("refusing to bind a non-loopback address without a bearer token; set SPECACTOR_HTTP_TOKEN "
                  "(or http.token)", host=cfg.host)
        return 2
    transport = HttpTransport(app)
    async with trio.open_nursery() as root:
        await start_actors(app, root)
        await app.supervisor.start(root, ChildSpec("http", transport.run, restart="transient"))
        stop, reason = trio.Event(), ["signal"]
        root.start_soon(_watch_signals, stop, reason)
        log.info("specactor started", transport="http", version=__version__, root=str(app.config.root_path),
                 urls=[f"http://{b.removeprefix('http://')}/mcp" for b in transport.binds], pid=os.getpid())
        await stop.wait()
        log.info("shutting down", reason=reason[-1], in_flight=app.dispatcher.in_flight)
        transport.stopping.set()  # hypercorn stops accepting and gives open requests the grace period
        await drain(app)
        root.cancel_scope.cancel()
    log.info("stopped")
    return 0
