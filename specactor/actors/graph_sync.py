"""The graph-sync actor: mirrors the workspace's specs and changes into an Emergent project.

It reads the change feed, projects each touched unit (a spec, a change, an AirsSpec spec) with the
pure `domain.graph.projection`, and queues the difference against its state map in a durable
SQLite outbox (`sqlite/graph_outbox.py`) before anything is sent. A drain task empties the outbox
in dependency order (objects, then their relationships, then removals) through `GraphWriter`,
backing off while Emergent fails and probing at a long interval after many failures in a row.
No tool call ever waits for it: writers only publish on the feed. On start it probes Emergent
(logged) and reconciles every unit against the state map; `sync(force=True)` also lists the
graph's objects of this workspace and repairs what differs (missing, changed, duplicated).
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import trio

from specactor.actors.change_feed import ChangeFeed
from specactor.actors.emergent_client import EmergentClient
from specactor.actors.graph_writer import Counts, GraphWriter, remote_node
from specactor.actors.supervisor import ChildSpec
from specactor.concurrency.quiet import gap_between_requests
from specactor.config import Config
from specactor.domain.changes import Change
from specactor.domain.graph import projection
from specactor.domain.graph.api import DeadLetter, GraphStatusOut, GraphSyncOut, Outbox
from specactor.domain.graph.emergent import EmergentError
from specactor.domain.graph.model import Graph
from specactor.fs.files import ignore_in_git
from specactor.fs.workspace_reader import DrainLock, WorkspaceReader, folder_name, git_remote
from specactor.logsetup import get_logger
from specactor.sqlite import graph_outbox as ob

log = get_logger("specactor.graph_sync")
T = TypeVar("T")

# A burst of writes is a few hundred events; past that one rescan stands for what was missed,
# which for graph sync is a reconcile of every unit: cheap next to the network.
BUFFER = 1024
TAKE = 500  # outbox rows read per step
EVENTS_PER_BATCH = 256  # feed events coalesced into one projection and one outbox transaction
# Seconds a first event waits for more before the batch is projected, and a drain for more rows:
# a tool's burst of writes (or an assistant's run of them) costs one projection and one round,
# and the graph's work keeps out of the writes' way. Far below what a user notices.
DEBOUNCE = 0.1
QUIET = 0.02  # seconds without a request before graph work runs (a stream of writes leaves no such gap)
MAX_DEFER = 2.0  # but it waits no longer than this: under constant load the graph still follows
GIT_IGNORED = ("graph.db", "graph.db-wal", "graph.db-shm", "graph.db.lock")
LOCK_RETRY = 2.0  # seconds between tries for the drain lock another server on this workspace holds
STATUS_WAIT = 5.0  # seconds graph_status waits for an outbox being opened before it answers without its depth
PROBE_EVERY = 2.0  # seconds between /health probes while the drain backs off (short of a long outage)
IDLE_POLL = 2.0  # seconds between looks at an empty outbox: what another server queued is drained within it


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def workspace_id(config: Config) -> str:
    """The configured id, else the git remote's owner/name, else the folder's name."""
    if config.graph.workspace_id:
        return projection.workspace_id_from(None, config.graph.workspace_id)
    root = config.root_path
    return projection.workspace_id_from(git_remote(root), folder_name(root))


@dataclass
class _Health:
    connected: bool | None = None
    last_success: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    failures: int = 0
    next_attempt: float | None = None  # trio clock


class GraphSync:
    """Args:
        config: the `emergent` and `graph` sections, the root and the OpenSpec project.
        feed: the change feed it reads (subscribed here, once: events published while it restarts wait).
        client_factory: builds the Emergent client (tests give one with a transport of their own).
    """

    def __init__(self, config: Config, feed: ChangeFeed,
                 client_factory: Callable[[Config], EmergentClient] | None = None) -> None:
        self.config = config
        self.workspace = workspace_id(config)
        self.label = f"workspace:{self.workspace}"
        self.root = config.root_path
        self.openspec_root = config.openspec_project[0]
        self.db_path = config.graph_db_path
        self.feed = feed
        self.sub = feed.subscribe("graph-sync", BUFFER)
        # The feed's events up to here are covered by the start-up reconcile; later ones by `_consume`.
        self.consumed_seq = feed.last_seq
        self._consumed = trio.Event()  # set (and replaced) each time `_consume` has queued a batch
        self._client_factory = client_factory or _client
        self.health = _Health()
        self.counts = Counts()  # everything done since start (a sync reports its own difference)
        self.spec = ChildSpec("graph-sync", self.run, restart="permanent")
        self._conn: Any = None
        self._db_lock = trio.Lock()  # one connection, one statement sequence at a time
        self._project_lock = trio.Lock()
        self._drain_lock: DrainLock | None = None
        self._wake = trio.Event()  # new rows in the outbox
        self._kick = trio.Event()  # a `sync` call: try now, even while backing off
        self._round_done = trio.Event()  # set (and replaced) each time the drain finishes a round
        self._ready = trio.Event()
        self._client: EmergentClient | None = None
        self.rounds = 0
        self.unavailable: str | None = None  # why the outbox cannot be opened, while it cannot
        # How long the server has had no request to answer (the app wires the dispatcher's): graph
        # work waits for a quiet moment, so it does not slow the requests of a busy stream.
        self.quiet_for: Callable[[], float] = lambda: QUIET
        self._syncing = 0  # `sync` calls waiting: they are requests themselves, so nothing yields
        self._tried_open = trio.Event()  # the first try to open the outbox has an answer

    # ------------------------------------------------------------------ the actor

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()  # at once: an outbox that cannot be opened fails graph sync, never the server
        self._conn = await self._open()
        if self.db_path.parent == self.root / ".specactor":  # runtime state, never the repository's business
            failed = await trio.to_thread.run_sync(ignore_in_git, self.db_path.parent, GIT_IGNORED)
            if failed is not None:
                log.warning("could not write .gitignore for the graph outbox", error=str(failed))
        self._client = self._client_factory(self.config)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._probe)
                await self.reconcile_local()
                self._ready.set()
                nursery.start_soon(self._drain_loop)
                await self._consume()
        finally:
            with trio.CancelScope(shield=True):
                await self._client.aclose()
                await trio.to_thread.run_sync(self._conn.close)

    async def _open(self) -> Any:
        """The outbox database, trying again (with backoff) while it cannot be opened."""
        delay = 0.5
        while True:
            try:
                conn = await trio.to_thread.run_sync(ob.connect, self.db_path)
            except (OSError, sqlite3.Error) as err:
                self.unavailable = f"the graph outbox {self.db_path} cannot be opened: {err}"
                self._tried_open.set()
                log.error("graph sync cannot open its outbox; it tries again", path=str(self.db_path),
                          error=str(err), retry_in=delay)
                await trio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            self.unavailable = None
            self._tried_open.set()
            return conn

    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a `graph_outbox` function on the actor's connection, on a worker thread."""
        async with self._db_lock:
            return await trio.to_thread.run_sync(fn, self._conn, *args)

    async def _probe(self) -> None:
        """Check /health and list one object; log what was found. An unreachable server is an error
        in the log, never a reason not to serve."""
        assert self._client is not None
        cfg = self.config.emergent
        try:
            with trio.fail_after(cfg.timeout * 2):
                await self._client.health()
                page = await self._client.search_objects(limit=1)
        except (EmergentError, trio.TooSlowError) as err:
            message = err.message if isinstance(err, EmergentError) else "no answer in time"
            self._failed(message)
            log.error("Emergent is unreachable; graph sync will keep trying", url=cfg.url, error=message)
            return
        self.health.connected = True
        log.info("Emergent is reachable", url=cfg.url, project=cfg.project_id, workspace=self.workspace,
                 objects=page.total)

    # ------------------------------------------------------------------ the feed side

    def _units_of(self, change: Change) -> set[str] | None:
        """The units a change touches (None: all of them); units of another folder are not ours."""
        workspace = Path(change.workspace)
        if workspace not in (self.root, self.openspec_root):
            return set()
        if change.kind == "rescan":
            return None
        units = projection.units_of(change.paths)
        return {u for u in units if (workspace == self.openspec_root) == u.startswith("openspec:")
                or self.root == self.openspec_root}

    async def _yield_to_requests(self) -> None:
        """Wait until no request has been in flight for QUIET seconds, at most MAX_DEFER: graph
        work fills the gaps between requests instead of competing with them for the one core an
        interpreter has. A `sync` call waiting skips the wait (it is the request)."""
        await gap_between_requests(self.quiet_for, QUIET, MAX_DEFER, skip=lambda: bool(self._syncing))

    async def _consume(self) -> None:
        while True:
            change = await self.sub.receive()
            units: set[str] | None = self._units_of(change)
            last = change.seq
            # A burst of writes is projected once: take what arrives within DEBOUNCE of the first.
            with trio.move_on_after(DEBOUNCE):
                for _ in range(EVENTS_PER_BATCH):
                    more = await self.sub.receive()
                    extra = self._units_of(more)
                    units = None if units is None or extra is None else units | extra
                    last = max(last, more.seq)
            await self._yield_to_requests()
            if units is None:
                await self.reconcile_local()
            elif units:
                await self._enqueue(units)
            self.consumed_seq = max(self.consumed_seq, last)
            self._consumed.set()
            self._consumed = trio.Event()

    async def _enqueue(self, units: set[str] | None) -> ob.Queued:
        """Project `units` (None: every unit on disk or known) and queue the difference."""
        known_units = await self.db(ob.units) if units is None else set()

        def project() -> dict[str, Graph]:
            reader = WorkspaceReader(self.root, self.openspec_root)
            try:
                chosen = units if units is not None else projection.discover_units(reader) | known_units
                return {unit: projection.project_unit(self.workspace, unit, reader) for unit in sorted(chosen)}
            finally:
                if reader.skipped:
                    log.warning("files not mirrored into the graph", files=reader.skipped[:20])
                reader.close()

        async with self._project_lock:  # a projection read earlier never commits after one read later
            graphs = await trio.to_thread.run_sync(project)
            queued: ob.Queued = await self.db(ob.enqueue_units, graphs)
        self.counts.unchanged += queued.unchanged
        if queued.puts or queued.deletes:
            self._wake.set()
        return queued

    async def reconcile_local(self) -> ob.Queued:
        """Every unit against the state map: what differs is queued."""
        return await self._enqueue(None)

    # ------------------------------------------------------------------ the drain side

    def _failed(self, message: str) -> None:
        h = self.health
        h.connected, h.last_error, h.last_error_at = False, message, time.time()
        h.failures += 1

    def backoff(self) -> float:
        """Seconds before the next try: exponential from 0.5 s, capped; the long-outage interval
        after `long_outage_threshold` failures in a row (specmcp's rule)."""
        cfg = self.config.emergent
        failures = self.health.failures
        if failures >= cfg.long_outage_threshold:
            return cfg.long_outage_interval_mins * 60.0
        return float(min(self.config.graph.retry_max_seconds, 0.5 * 2 ** max(0, failures - 1)))

    def _round_finished(self) -> None:
        self._round_done.set()
        self._round_done = trio.Event()

    async def _drain_loop(self) -> None:
        # Two servers on one workspace (two assistants on one repository) share the outbox; one of
        # them drains it, the other queues and waits its turn.
        self._drain_lock = DrainLock(self.db_path.with_name(self.db_path.name + ".lock"))
        try:
            while not await trio.to_thread.run_sync(self._drain_lock.try_take):
                self._round_finished()
                with trio.move_on_after(LOCK_RETRY):
                    await _either(self._wake, self._kick)
            await self._drain()
        finally:
            self._drain_lock.release()

    async def _drain(self) -> None:
        while True:
            depth = await self.db(ob.depth)
            if depth.pending == 0:
                self._round_finished()
                with trio.move_on_after(IDLE_POLL):  # another server on this workspace may queue meanwhile
                    await _either(self._wake, self._kick)
                self._wake, self._kick = trio.Event(), trio.Event()
                continue
            if not self._kick.is_set():
                with trio.move_on_after(DEBOUNCE):  # let a burst's rows gather into one round
                    await self._kick.wait()
            await self._yield_to_requests()
            self._wake, self._kick = trio.Event(), trio.Event()
            try:
                progressed = await self.drain_once()
            except Exception as exc:
                # A reply we cannot use (a bug of ours or a server's odd answer) pauses the drain like
                # an outage instead of crashing: a crash loop would take the supervisor, and the server, down.
                err = exc if isinstance(exc, EmergentError) else EmergentError(
                    "PROVIDER_ERROR", f"graph sync failed unexpectedly: {type(exc).__name__}: {exc}")
                if not isinstance(exc, EmergentError):
                    log.error("graph sync round failed", exc_info=exc)
                self._failed(err.message)
                self._round_finished()
                delay = max(self.backoff(), err.retry_after or 0.0)  # honour a 429's Retry-After
                self.health.next_attempt = trio.current_time() + delay
                log.warning("graph sync paused; Emergent failed", error=err.message, code=err.code,
                            retry_in=round(delay, 1), failures=self.health.failures)
                await self._pause(delay)
                self._kick = trio.Event()
                self.health.next_attempt = None
                continue
            h = self.health
            h.connected, h.last_success, h.failures = True, time.time(), 0
            self._round_finished()
            if not progressed:  # rows wait for an end that waits itself: try again later, not in a busy loop
                with trio.move_on_after(0.5):
                    await _either(self._wake, self._kick)

    async def _pause(self, delay: float) -> None:
        """Wait `delay` before the next round, ending early on a `sync` call or, short of a long
        outage, as soon as Emergent's /health answers (looked at every PROBE_EVERY seconds): the
        backlog drains within seconds of the server's return, not at the end of a long backoff."""
        assert self._client is not None
        long_outage = self.health.failures >= self.config.emergent.long_outage_threshold
        deadline = trio.current_time() + delay
        while (left := deadline - trio.current_time()) > 0:
            with trio.move_on_after(left if long_outage else min(left, PROBE_EVERY)):
                await self._kick.wait()
                return
            if long_outage or trio.current_time() >= deadline:
                continue
            try:
                with trio.fail_after(PROBE_EVERY):
                    await self._client.health()
            except (EmergentError, trio.TooSlowError):
                continue
            return

    async def drain_once(self) -> bool:
        """One pass over the outbox in dependency order; whether it settled anything.

        Raises:
            EmergentError: the server or the network failed (what was done is recorded).
        """
        assert self._client is not None
        graph = self.config.graph
        writer = GraphWriter(self._client, self.db, self.label, batch=graph.batch_size, concurrency=graph.concurrency)
        before = await self.db(ob.depth)
        self.rounds += 1
        for kind, op in (("node", "put"), ("edge", "put"), ("edge", "delete"), ("node", "delete")):
            after = 0
            while True:
                items = await self.db(ob.take, kind, op, TAKE, after)
                if not items:
                    break
                after = items[-1].seq
                if (kind, op) == ("node", "put"):
                    await writer.put_nodes(items, self.counts)
                elif (kind, op) == ("edge", "put"):
                    await writer.put_edges(items, self.counts)
                elif kind == "edge":
                    await writer.delete_edges(items, self.counts)
                else:
                    await writer.delete_nodes(items, self.counts)
        now = await self.db(ob.depth)
        return now.pending < before.pending or now.dead > before.dead or now.pending == 0

    async def repair(self) -> None:
        """List the graph's objects of this workspace and bring the state map in line with them:
        duplicates removed, objects deleted or changed by hand sent again, strays removed.

        Raises:
            EmergentError: the listing or a removal failed.
        """
        assert self._client is not None
        graph = self.config.graph
        writer = GraphWriter(self._client, self.db, self.label, batch=graph.batch_size, concurrency=graph.concurrency)
        requeued = await self.db(ob.requeue_dead)
        listing = await writer.list_workspace()
        await writer.remove_duplicates(listing, self.counts)
        synced = await self.db(ob.synced_keys, "node")
        forget = [key for key, row in synced.items()
                  if key not in listing or str(listing[key][0].get("canonical_id")) != row.canonical_id
                  or remote_node(listing[key][0], row.unit).digest() != row.digest]
        await self.db(ob.forget, "node", forget)
        # What was forgotten may still be in the graph (changed by hand, a duplicate kept): the next
        # round lists the workspace again before creating anything.
        await self.db(ob.set_meta_now, "adopted", "0")
        # Relationships: upserts, so sending them all again is harmless and finds any removed by hand.
        await self.db(ob.forget, "edge", list((await self.db(ob.synced_keys, "edge")).keys()))
        queued = await self.reconcile_local()
        await self._remove_strays([copies[0] for copies in listing.values()])
        log.info("graph repaired", listed=len(listing), forgotten=len(forget), queued=queued.puts + queued.deletes,
                 dead_letters_retried=requeued)

    async def _remove_strays(self, candidates: list[dict[str, Any]]) -> None:
        """Objects of this workspace the projection has no key for (left by a lost state map)."""
        if not candidates:
            return
        wanted = await self.db(ob.wanted_keys, [str(obj.get("key")) for obj in candidates])
        strays = [obj for obj in candidates if obj.get("key") not in wanted]
        assert self._client is not None
        for obj in strays:
            try:
                await self._client.delete_object(str(obj.get("canonical_id") or obj["id"]))
                self.counts.deleted += 1
            except EmergentError as err:
                if err.code not in ("NOT_FOUND", "REFUSED"):
                    raise

    # ------------------------------------------------------------------ what the tools call

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def wait_round(self) -> None:
        """Wait until the drain finishes its next round (a success, a failure, or finding nothing to do)."""
        await self._round_done.wait()

    async def sync(self, *, force: bool, timeout: float) -> GraphSyncOut:
        """Reconcile now (with `force`, against the graph's own listing too) and wait until the
        outbox is drained, at most `timeout` seconds.

        Raises:
            EmergentError: Emergent failed, and nothing could be sent (the counts so far are in the log).
        """
        self._syncing += 1
        try:
            return await self._sync(force=force, timeout=timeout)
        finally:
            self._syncing -= 1

    async def _sync(self, *, force: bool, timeout: float) -> GraphSyncOut:
        start, before = time.monotonic(), dataclasses.replace(self.counts)
        with trio.move_on_after(timeout):
            await self._tried_open.wait()
            if self.unavailable is not None:
                raise GraphUnavailable(self.unavailable)
            await self._ready.wait()
        if not self._ready.is_set():
            raise GraphUnavailable(f"graph sync has not finished starting after {timeout:g} s (its start-up "
                                   "reconcile of the workspace); try again")
        failures_before = self.health.failures
        target = self.feed.last_seq  # every write published before this call is in the sync
        if force:
            await self.repair()
        else:  # edits the watcher has not published yet (or never will: a folder it missed) count too
            await self.reconcile_local()
        with trio.move_on_after(max(0.0, timeout - (time.monotonic() - start))):
            while self.consumed_seq < target:
                await self._consumed.wait()
        self._kick.set()
        with trio.move_on_after(max(0.0, timeout - (time.monotonic() - start))):
            while (await self.db(ob.depth)).pending and self.health.failures <= failures_before:
                await self._round_done.wait()
        depth = await self.db(ob.depth)
        after = dataclasses.replace(self.counts)
        if depth.pending and self.health.failures > failures_before and after == before:
            raise EmergentError("PROVIDER_ERROR", f"{self.health.last_error}; {depth.pending} items wait in the "
                                "outbox and go out when it answers again")
        return GraphSyncOut(created=after.created - before.created, updated=after.updated - before.updated,
                            deleted=after.deleted - before.deleted, unchanged=after.unchanged - before.unchanged,
                            failed=after.failed - before.failed, pending=depth.pending,
                            seconds=round(time.monotonic() - start, 3))

    async def status(self) -> GraphStatusOut:
        h = self.health
        with trio.move_on_after(STATUS_WAIT):  # the outbox is opening: its depth is a moment away
            await self._tried_open.wait()
        if self._conn is None or self.unavailable is not None:
            depth, dead = ob.Depth(0, None, 0, 0), []
        else:
            depth = await self.db(ob.depth)
            dead = await self.db(ob.dead_letters, 5)
        now = time.time()
        cfg = self.config.emergent
        next_in = None if h.next_attempt is None else max(0.0, round(h.next_attempt - trio.current_time(), 3))
        return GraphStatusOut(
            enabled=True, connected=h.connected, url=cfg.url, projectId=cfg.project_id, workspaceId=self.workspace,
            lastSuccess=iso(h.last_success), lastError=self.unavailable or h.last_error,
            lastErrorAt=iso(h.last_error_at),
            consecutiveFailures=h.failures, nextAttemptInSeconds=next_in,
            outbox=Outbox(pending=depth.pending, deadLetters=depth.dead,
                          oldestPendingSeconds=None if depth.oldest is None else round(max(0.0, now - depth.oldest),
                                                                                       3)),
            synced=depth.synced,
            recentDeadLetters=[DeadLetter(kind=d["kind"], key=d["key"], op=d["op"], type=d["type"], code=d["code"],
                                          status=d["status"], message=d["message"], at=iso(d["at"]) or "")
                               for d in dead])

    def query_client(self) -> EmergentClient:
        """A client for the query tools: one attempt (the tool layer retries), its own connections."""
        cfg = self.config.emergent
        return EmergentClient(cfg.url, cfg.api_key or "", cfg.project_id, timeout=min(cfg.timeout, 10.0),
                              max_attempts=1)


class GraphUnavailable(Exception):
    """Graph sync cannot work at all (its outbox cannot be opened): the message says why."""


def _client(config: Config) -> EmergentClient:
    cfg = config.emergent
    return EmergentClient(cfg.url, cfg.api_key or "", cfg.project_id, timeout=cfg.timeout,
                          max_attempts=cfg.max_retries + 1, backoff_initial=0.2, backoff_max=2.0)


async def _either(a: trio.Event, b: trio.Event) -> None:
    async with trio.open_nursery() as nursery:
        async def wait(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(wait, a)
        nursery.start_soon(wait, b)
