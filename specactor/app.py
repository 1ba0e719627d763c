"""The application: one root nursery with a supervisor, the actors, and a transport.

`build` wires the pieces without doing I/O; `serve_stdio` runs them until stdin closes or a
SIGINT/SIGTERM arrives, then lets in-flight requests finish within the grace period,
cancels what is left, flushes the session log and returns 0. A `ConfigError` an actor finds
while starting (a port in use, a log folder it cannot write) propagates out of both, for the
command line to print as one line.
"""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import msgspec
import trio

from specactor import SERVER_NAME, __version__
from specactor.actors.cache_invalidator import CacheInvalidator
from specactor.actors.change_feed import ChangeFeed
from specactor.actors.dispatcher import Connection, Dispatcher
from specactor.actors.metrics import MetricsActor
from specactor.actors.resource_notifier import ResourceNotifier
from specactor.actors.runtime import TrioRuntime
from specactor.actors.session_log import Flush, SessionLogActor
from specactor.actors.stdio import StdioFds, StdioTransport
from specactor.actors.storage import StorageActor
from specactor.actors.storages import Storages
from specactor.actors.supervisor import ChildSpec, Supervisor
from specactor.actors.workspace_watcher import WorkspaceWatcher
from specactor.config import Config, ConfigError, HttpConfig
from specactor.logsetup import get_logger
from specactor.protocol.registry import Registry
from specactor.protocol.server import ServerCore
from specactor.toolsets import Services, register_toolsets, toolset_modules

log = get_logger("specactor.app")

INSTRUCTIONS = (
    "specactor serves a spec-driven workflow on this repository: OpenSpec workspaces (openspec/), "
    "the AirsSpec lifecycle (.airsspec/), and layered memory with a knowledge repository of ADRs and "
    "policies. Every tool answers with {success, data} or {success: false, error: "
    "{code, message, retryable, details}}."
)


class App(msgspec.Struct):
    config: Config
    services: Services
    registry: Registry
    core: ServerCore
    metrics: MetricsActor
    session_log: SessionLogActor
    storage: StorageActor
    dispatcher: Dispatcher
    supervisor: Supervisor
    extra: Callable[[Registry, Services], None] | None = None


def build(config: Config, extra: Callable[[Registry, Services], None] | None = None,
          *, name: str = SERVER_NAME, defer: bool = False) -> App:
    """Wire the actors, the registry and the core. `extra` registers more definitions (fixtures).

    With `defer`, the toolsets are registered later by `register_deferred` (after the first
    reply): `initialize` needs no registry, and importing the toolsets is most of start-up.
    Until then the dispatcher holds back every request that needs the registry.
    """
    runtime = TrioRuntime(config.worker_threads)
    metrics = MetricsActor()
    feed = ChangeFeed()
    storage = StorageActor(config.root_path, use_log=config.storage_log, feed=feed)
    registry = Registry(config.toolsets)

    def redacted(tool: str) -> bool:
        """The memory toolset's tools; any tool, before the toolsets are registered (a call may
        be logged before its tool is known: better hidden than leaked)."""
        entry = registry.tools.get(tool)  # read on the log's worker thread: a dict lookup is atomic
        return entry.toolset == "memory" if entry is not None else not dispatcher.registry_ready.is_set()

    logs = config.session_log
    session_log = SessionLogActor(config.session_log_dir, max_entry_bytes=logs.max_entry_bytes,
                                  max_age_days=logs.max_age_days, max_total_bytes=logs.max_total_bytes,
                                  redacts=redacted if logs.redact_memory else None)
    supervisor = Supervisor()
    services = Services(config=config, storage=storage, metrics=metrics, runtime=runtime, feed=feed,
                        supervisor=supervisor, storages=Storages(storage, supervisor, feed),
                        caches=CacheInvalidator(feed))
    instructions = INSTRUCTIONS
    if config.knowledge_repo_path.is_dir():  # its binding constraints, summarised (<= 2 KB, from a cache per tree)
        from specactor.context.reader import instructions_summary

        instructions = instructions_summary(config, INSTRUCTIONS)
    core = ServerCore(registry, name=name, version=__version__, instructions=instructions,
                      page_size=config.page_size)
    dispatcher = Dispatcher(core, runtime, metrics, session_log, max_concurrency=config.max_concurrency,
                            request_timeout=config.request_timeout)
    app = App(config, services, registry, core, metrics, session_log, storage, dispatcher, supervisor, extra)
    if not defer:
        register_toolsets(registry, services, toolset_modules(registry))
        if extra is not None:
            extra(registry, services)
        dispatcher.registry_ready.set()
    return app


GC_YOUNG = 5_000  # container allocations between the cyclic collector's young passes (CPython's default: 700)


def settle_heap() -> None:
    """Once the server is built: what start-up made (modules, the registry, its schemas) lives as
    long as the process, so the cyclic collector stops walking it (`gc.freeze`), and it makes its
    young pass every `GC_YOUNG` allocations instead of 700. A request's objects die with their
    references; the collector is only there for cycles (trio's cancellations and tracebacks),
    which now wait a little longer. One HTTP worker serving `echo`: ~20 us less CPU a call of
    ~390 (docs/decisions.md)."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, older, oldest)


async def register_deferred(app: App) -> None:
    """Register the toolsets of a deferred build: import on a worker thread, register here."""
    modules = await trio.to_thread.run_sync(toolset_modules, app.registry)
    register_toolsets(app.registry, app.services, modules)
    if app.extra is not None:
        app.extra(app.registry, app.services)
    app.dispatcher.registry_ready.set()


async def start_actors(app: App, nursery: trio.Nursery) -> None:
    """Start the supervised actors every transport needs, in dependency order; actors started
    later, on demand (`Supervisor.ensure`), run in `nursery` too."""
    app.supervisor.attach(nursery)
    notifier = ResourceNotifier(app.services.feed, app.registry)
    roots = dict.fromkeys([app.config.root_path, app.config.openspec_project[0]])
    watchers = [ChildSpec(f"workspace-watcher:{root}",
                          WorkspaceWatcher(root, app.services.feed, after=app.dispatcher.first_reply,
                                           quiet_for=app.dispatcher.quiet_for).run)
                for root in roots if root.is_dir()]
    for spec in (ChildSpec("metrics", app.metrics.run), ChildSpec("session-log", app.session_log.run),
                 ChildSpec("storage", app.storage.run), ChildSpec("resource-notifier", notifier.run),
                 ChildSpec("cache-invalidator", app.services.caches.run),
                 *watchers, ChildSpec("dispatcher", app.dispatcher.run)):
        await app.supervisor.start(nursery, spec)
    if app.config.graph_enabled:
        nursery.start_soon(start_graph_sync, app)


async def start_graph_sync(app: App) -> None:
    """Start graph sync once the first reply is out (or after a second of quiet): its imports and
    its reconcile of the whole workspace must not stand before a client's first answer. Its
    reconcile finds whatever was written meanwhile."""
    with trio.move_on_after(1.0):
        await app.dispatcher.first_reply.wait()
    from importlib import import_module

    await trio.to_thread.run_sync(import_module, "specactor.actors.graph_sync")  # httpx and all: off the loop
    graph = app.services.graph
    graph.quiet_for = app.dispatcher.quiet_for  # graph work waits for gaps between requests
    await app.supervisor.ensure(graph.spec)


def notify_changes(app: App, nursery: trio.Nursery, connections: Callable[[], Iterable[Connection]]) -> None:
    """Tell listen streams (2026-07-28) and initialized legacy sessions when a list changes, or
    a resource they subscribed to."""

    def on_change(kind: str, uri: str | None) -> None:
        for peer, method, params in app.core.deliveries(kind, uri, [(c.session, c.peer) for c in connections()]):
            nursery.start_soon(peer.notify, method, params)

    app.registry.on_change(on_change)


async def drain(app: App) -> None:
    """Give in-flight requests the grace period, then flush the session log."""
    with trio.move_on_after(app.config.grace_period) as scope:
        await app.dispatcher.wait_idle()
    if scope.cancelled_caught:
        log.warning("grace period over; cancelling requests still running", in_flight=app.dispatcher.in_flight)
    with trio.move_on_after(app.config.grace_period):
        await app.session_log.mailbox.call(Flush(), app.config.grace_period)


async def announce(app: App, **fields: object) -> None:
    """Log the start-up line once the first reply is out (or after a second of quiet), and the
    toolsets of a deferred build are registered.

    structlog is imported meanwhile on a worker thread, so neither its import nor the line
    itself stands between a client and its first answer.
    """
    from specactor import logsetup

    with trio.move_on_after(1.0):
        await app.dispatcher.first_reply.wait()
    await trio.to_thread.run_sync(logsetup.preload)
    await app.dispatcher.registry_ready.wait()
    log.info("specactor started", version=__version__, root=str(app.config.root_path), pid=os.getpid(),
             tools=len(app.registry.tools), toolsets=sorted(set(app.config.toolsets)), **fields)


async def watch_signals(stop: trio.Event, reason: list[str]) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            reason.append(signal.Signals(signum).name)
            stop.set()


async def serve_stdio(app: App, fds: StdioFds) -> int:
    """Serve MCP on stdin/stdout until EOF or a signal; returns the exit status."""
    transport = StdioTransport(app.dispatcher, fds, max_line=app.config.max_line_bytes)
    async with trio.open_nursery() as root:
        await start_actors(app, root)
        await app.supervisor.start(root, ChildSpec("stdio", transport.run, restart="transient"))


        async def finish_start() -> None:
            if not app.dispatcher.registry_ready.is_set():
                with trio.move_on_after(0.25):  # initialize first: it needs no toolset
                    await app.dispatcher.first_reply.wait()
                await register_deferred(app)
            settle_heap()
            # Wired after the toolsets are in, so registering them is not announced as a change.
            notify_changes(app, root, lambda: [transport.conn] if transport.conn is not None else [])

        root.start_soon(finish_start)
        stop, reason = trio.Event(), ["stdin closed"]
        root.start_soon(watch_signals, stop, reason)

        async def on_eof() -> None:
            await transport.closed.wait()
            stop.set()

        root.start_soon(on_eof)
        root.start_soon(lambda: announce(app, transport="stdio"))
        await stop.wait()
        log.info("shutting down", reason=reason[-1], in_flight=app.dispatcher.in_flight)
        await drain(app)
        root.cancel_scope.cancel()
    log.info("stopped")
    return 0


def check_public_bind(cfg: HttpConfig) -> None:
    """Raises:
        ConfigError: a non-loopback address without a bearer token.
    """
    from specactor.protocol.http_rules import is_loopback

    if not is_loopback(cfg.host) and not cfg.token:
        raise ConfigError(f"{cfg.host} is not a loopback address, and binding one needs a bearer token: set "
                          "SPECACTOR_HTTP_TOKEN (or http.token)", setting="http.host")


class WorkerRole(msgspec.Struct, frozen=True):
    """What a worker process of `serve --http --workers N` has from its parent (`http_worker`).

    fd: this worker's listening socket, on the port the parent holds. run_dir: the parent's runtime folder (the shared
    session table, the metrics snapshots). ready: tells the parent this worker serves, with its
    tool count. parent_gone: returns once the parent has exited.
    """

    fd: int
    run_dir: Path
    index: int
    ready: Callable[[int], None]
    parent_gone: Callable[[], Awaitable[None]]


async def serve_http(app: App, worker: WorkerRole | None = None) -> int:
    """Serve MCP over Streamable HTTP until SIGINT/SIGTERM; returns the exit status.

    As a `worker`, serve the parent's socket with the sessions and metrics all workers share,
    tell the parent when serving instead of logging the start-up line, and stop when the parent
    is gone too."""
    from specactor.actors.http import HttpTransport

    transport: HttpTransport
    if worker is None:
        check_public_bind(app.config.http)
        transport = HttpTransport(app.core, app.dispatcher, app.config, app.metrics)
    else:
        from specactor.actors.prometheus import exposition
        from specactor.actors.shared_sessions import SharedSessions
        from specactor.actors.worker_metrics import WorkerMetrics

        published = WorkerMetrics(app.metrics, worker.run_dir / "metrics")
        transport = HttpTransport(app.core, app.dispatcher, app.config, app.metrics, listen_fd=worker.fd,
                                  shared=SharedSessions(worker.run_dir / "sessions.db"),
                                  exposition=lambda: exposition(published.combined()))
    async with trio.open_nursery() as root:
        await start_actors(app, root)
        await app.supervisor.start(root, ChildSpec("http", transport.run, restart="transient"))
        settle_heap()
        stop, reason = trio.Event(), ["signal"]
        root.start_soon(watch_signals, stop, reason)
        from specactor import logsetup

        await trio.to_thread.run_sync(logsetup.preload)  # an HTTP server is found by this line: log it now
        if worker is None:
            urls = [f"http://{b.removeprefix('http://')}/mcp" for b in transport.binds]
            log.info("specactor started", transport="http", version=__version__, root=str(app.config.root_path),
                     urls=urls, pid=os.getpid(), tools=len(app.registry.tools))
        else:
            await root.start(published.publish_forever)

            async def orphaned() -> None:
                await worker.parent_gone()
                reason.append("parent exited")
                stop.set()

            root.start_soon(orphaned)
            log.info("http worker started", index=worker.index, pid=os.getpid(), tools=len(app.registry.tools))
            worker.ready(len(app.registry.tools))
        await stop.wait()
        log.info("shutting down", reason=reason[-1], in_flight=app.dispatcher.in_flight)
        transport.stopping.set()  # hypercorn stops accepting and gives open requests the grace period
        await drain(app)
        # A request answered is not yet a response written: hypercorn's own task writes it. Cancelling
        # before that cut a batch's answer off its stream whenever `drain` returned within a few passes
        # of the scheduler. Hypercorn returns once its connections have closed, or its grace is over.
        with trio.move_on_after(app.config.grace_period):
            await transport.stopped.wait()
        root.cancel_scope.cancel()
    log.info("stopped")
    return 0
