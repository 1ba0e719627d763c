"""The knowledge sync actor: knowledge items into pointer memories, one sync at a time.

A sync plans from git (the knowledge reader), then applies its whole delta and the new sync
state in one transaction (the memory store), so a sync that dies half way leaves the previous
state and the next run redoes it. Each caller gets a sync that saw every commit made before its
call: a call made while a sync of the same kind (force flag, company) runs on the commit that is
still HEAD shares that sync; any other call queues, and all those queued when the next sync
begins share it. A hundred concurrent calls after a commit cost one sync.
A sync that wrote or orphaned pointers is published on the change feed once, after its commit
(toolset and kind `knowledge`, the items' paths in the knowledge repository); then its manifest
goes to the first caller's `publish`, still in turn with other syncs.

With an embeddings client, a sync embeds the pointers it writes, as memory_add embeds a memory, and
those an earlier sync had to write without a vector (at most BACKFILL a sync); the vectors go in the
sync's own transaction. An endpoint that fails or takes longer than its timeout costs the sync no
more than that: the pointers are written without vectors, and the next sync embeds them.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from specactor.actors.change_feed import ChangeFeed
from specactor.actors.embeddings import EMBED_BATCH, EmbeddingsClient
from specactor.actors.knowledge_reader import KnowledgeReader
from specactor.actors.mailbox import ActorError, Letter, Mailbox
from specactor.actors.memory_store import MemoryStoreActor
from specactor.actors.storage import atomic_write
from specactor.actors.supervisor import ChildSpec
from specactor.domain.changes import Change
from specactor.domain.knowledge import sync as plans
from specactor.domain.knowledge.sync import Backfill, SyncApply
from specactor.domain.memory.embeddings import pack
from specactor.logsetup import get_logger
from specactor.protocol.errors import ToolError
from specactor.sqlite.memory_db import (
    EntriesAt,
    ItemsAt,
    SyncConflict,
    apply_sync,
    load_sync,
    now_iso,
    unembedded_pointers,
)

SyncResult = tuple[plans.Plan, str | None, float, dict[str, Any]]  # plan, commit synced, ms, manifest
Publish = Callable[[dict[str, Any]], Awaitable[None]]
QUEUE = 256  # one letter per sync_now call waiting; they share the next sync
CALL_TIMEOUT = 300.0  # a first sync of a large repository parses every item
BACKFILL = 4 * EMBED_BATCH  # pointers left without a vector embedded per sync, at most
SYNC_TRIES = 8  # syncs planned again after another process committed first; each retry finds less to do
CONFLICT_PAUSE = 0.002  # seconds: the most a retry waits, times its number, before planning again
log = get_logger("specactor.knowledge_sync")


@dataclass(frozen=True)
class Sync:
    force: bool
    company_id: str
    publish: Publish | None = None


@dataclass
class _Flight:
    """The sync running now: its kind, the commit it syncs (None until read), its outcome."""

    key: tuple[bool, str]
    commit: str | None = None
    done: trio.Event = field(default_factory=trio.Event)
    result: SyncResult | None = None
    error: Exception | None = None


class KnowledgeSync:
    """Args:
        reader: the knowledge repository. store: the memory database (both running).
        feed, workspace: where a sync that changed items is published, naming the server's root.
        embeddings: the client that embeds the pointers (running when a sync is asked for), or None.
    """

    def __init__(self, reader: KnowledgeReader, store: MemoryStoreActor, *, feed: ChangeFeed | None = None,
                 workspace: str = "", embeddings: EmbeddingsClient | None = None) -> None:
        self.reader = reader
        self.store = store
        self.embeddings = embeddings
        self.feed = feed
        self.workspace = workspace
        self.mailbox: Mailbox[Sync] = Mailbox("knowledge-sync", QUEUE)
        # Permanent: what it caches is read again from the database after a restart.
        self.spec = ChildSpec("knowledge-sync", self.run, restart="permanent")
        self._forget()

    def _forget(self) -> None:
        self._flight: _Flight | None = None
        self._items_at: ItemsAt | None = None  # what the last sync state read or written said (committed)
        self._entries_at: EntriesAt | None = None
        self._manifest: tuple[dict[str, Any], str | None, dict[str, Any]] | None = None  # (entries, commit, it)

    async def sync(self, *, force: bool, company_id: str, publish: Publish | None = None) -> SyncResult:
        """One sync, shared with the calls queued with this one. Returns the plan, the commit synced,
        the milliseconds taken and the manifest.

        Raises:
            RepoMissing, GitFailed: as the reader's `git`. ToolError: CONFLICT, another process
                synced meanwhile; INTERNAL, the database cannot be opened. ActorError: as a call.
        """
        flight = self._flight
        if (flight is not None and flight.key == (force, company_id) and flight.commit is not None
                and not flight.done.is_set() and self.reader.head_from_files() == flight.commit):
            return await self._join(flight)  # no commit since that sync read HEAD: it is this call's too
        result: SyncResult = await self.mailbox.call(Sync(force, company_id, publish), CALL_TIMEOUT)
        return result

    async def _join(self, flight: _Flight) -> SyncResult:
        with trio.fail_after(CALL_TIMEOUT):
            await flight.done.wait()
        if flight.error is not None:
            raise flight.error
        if flight.result is None:
            raise ActorError("the knowledge sync ended before its sync completed")
        return flight.result

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the queued calls, one sync per (force, company) among them, until cancelled."""
        self._forget()
        task_status.started()
        async for first in self.mailbox:
            with contextlib.ExitStack() as held:  # a crash tells every caller taken so far at once
                groups: dict[tuple[bool, str], list[Letter[Sync]]] = {}
                letter: Letter[Sync] | None = first
                while letter is not None:  # take what is queued, one letter at a time
                    held.enter_context(letter)
                    if not isinstance(letter.body, Sync):  # a sender's bug: crash, and be restarted clean
                        raise TypeError(f"the knowledge sync got a message it does not know: {letter.body!r}")
                    groups.setdefault((letter.body.force, letter.body.company_id), []).append(letter)
                    try:
                        letter = self.mailbox.receive_nowait()
                    except trio.WouldBlock:
                        letter = None
                for (force, company_id), group in groups.items():
                    await self._serve(group, force=force, company_id=company_id)

    async def _serve(self, group: list[Letter[Sync]], *, force: bool, company_id: str) -> None:
        publish = group[0].body.publish
        flight = self._flight = _Flight((force, company_id))
        try:
            result = await self._sync_once(force=force, company_id=company_id)
            if publish is not None:
                await publish(result[3])
        except Exception as exc:  # the same error for every caller of the sync
            flight.error = exc
            for letter in group:
                letter.fail(exc)
        else:
            flight.result = result
            for letter in group:
                letter.reply(result)
        finally:  # callers that joined it learn the outcome (none, if the actor is cancelled or crashed)
            self._flight = None
            flight.done.set()

    async def _sync_once(self, *, force: bool, company_id: str) -> SyncResult:
        """One sync; when another process committed a sync between this one's read and its write (a
        second server on the same store, HTTP workers), it is planned again from that state, which
        is cheap (the other already did the work), up to `SYNC_TRIES` times, then CONFLICT."""
        for tries_left in reversed(range(SYNC_TRIES)):
            try:
                return await self._sync_attempt(force=force, company_id=company_id)
            except SyncConflict as err:
                if not tries_left:
                    raise ToolError("CONFLICT", str(err)) from None
                # Two servers syncing back to back can meet in lockstep, each committing while the
                # other plans; a random pause of up to a few ms lets one of them through.
                await trio.sleep(random.uniform(0, CONFLICT_PAUSE * (SYNC_TRIES - tries_left)))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _sync_attempt(self, *, force: bool, company_id: str) -> SyncResult:
        started = time.perf_counter()
        reader, known = self.reader, self._items_at
        commit = reader.head_from_files()  # first, with no await before it: later calls may join this sync
        if self._flight is not None:
            self._flight.commit = commit
        record = await self.store.read(lambda conn: load_sync(conn, known=known))
        self._items_at = (record.revision, record.items)
        listing = reader.listed(commit)  # listed at this very commit, so the folder had files in it
        if listing is None:
            commit, tree = await reader.head()  # a new commit: its tree tells whether the folder has files
            if self._flight is not None:
                self._flight.commit = commit
            listing = await reader.listing(commit if tree else None)
        changed = None
        if not force and record.last_commit and commit:
            changed = await reader.changed_since(record.last_commit, commit)
        examine = plans.to_examine(listing, changed, [f.file for f in record.failures])
        parsed = await reader.parse(listing, examine)
        examined = {p: (parsed[p], plans.sync_hash(p, listing[p].encode())) for p in examine}
        plan = plans.plan(record.items, listing, examined, force=force)
        vectors, backfill = await self._embed(plan)
        job = SyncApply(plan, record.revision, commit, company_id, (time.perf_counter() - started) * 1000,
                        vectors, backfill)
        entries_at = self._entries_at
        revision, entries = await self.store.write(lambda conn: apply_sync(conn, job, entries_at))
        # Committed: what this sync wrote is the state at `revision` (read again when another writes).
        self._entries_at = (revision, entries)
        if not plan.upserts and not plan.orphans:
            self._items_at = (revision, record.items)
        elif self.feed is not None:
            self.feed.publish(Change(workspace=self.workspace, toolset="knowledge", kind="knowledge",
                                     written=tuple(item.path for item, _ in plan.upserts),
                                     removed=tuple(record.items[i].path for i in plan.orphans)))
        last = self._manifest
        if last is not None and last[0] is entries and last[1] == commit:  # the same entries at the same commit
            manifest = {**last[2], "generatedAt": now_iso()}
        else:
            manifest = plans.manifest(entries, commit, now_iso())
            self._manifest = (entries, commit, manifest)
        return plan, commit, (time.perf_counter() - started) * 1000, manifest

    async def _embed(self, plan: plans.Plan) -> tuple[dict[str, bytes], list[Backfill]]:
        """Vectors for the plan's pointers and for those still without one; none when the endpoint fails."""
        client = self.embeddings
        if client is None:
            return {}, []
        late = await self.store.read(lambda conn: unembedded_pointers(conn, BACKFILL))
        texts, ids, late = plans.to_embed(plan, late)
        found: list[list[float]] = []
        # A stalled endpoint delays the sync by its timeout at most, not by the client's retries.
        with trio.move_on_after(client.endpoint.timeout) as budget:
            try:
                for start in range(0, len(texts), EMBED_BATCH):
                    found += await client.embed(texts[start:start + EMBED_BATCH])
            except (ToolError, ActorError) as exc:
                log.warning("pointers written without vectors; the next sync embeds them",
                            error=f"{type(exc).__name__}: {exc}", texts=len(texts), embedded=len(found))
                return {}, []
        if budget.cancelled_caught:
            log.warning("pointers written without vectors; the next sync embeds them",
                        error="the embeddings endpoint did not answer in time", texts=len(texts))
            return {}, []
        packed = [pack(v) for v in found]
        return dict(zip(ids, packed[:len(ids)], strict=True)), [Backfill(u.rowid, u.content, v) for u, v in
                                                      zip(late, packed[len(ids):], strict=True)]

    async def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Write `manifest.json` into the knowledge folder (atomically, and only when it changed)."""
        path = self.reader.root / plans.MANIFEST

        def write() -> None:
            try:
                old: bytes | None = path.read_bytes()
            except FileNotFoundError:
                old = None
            data = plans.manifest_bytes(manifest, old)
            if data is not None:
                atomic_write(path, data)

        await trio.to_thread.run_sync(write)
