"""The `memory` toolset: Aeterna's eight tools (memory_add/search/delete, knowledge_query/show/check,
sync_now, sync_status), as glue over the memory actors (`MemoryActors`).

Settings come from `config.memory` and `config.knowledge` (docs/configuration.md), the paths as
`Config` resolves them. Each actor is started on first use, under the app's supervisor in its
root nursery (`Supervisor.ensure`): no memory tool, no SQLite, git or httpx. A memory write is
published on the change feed after its commit; a sync publishes its own (`KnowledgeSync`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from specactor.actors.knowledge_reader import GitFailed, RepoMissing
from specactor.actors.memory_actors import embeddings_endpoint
from specactor.actors.storage import Tx
from specactor.actors.supervisor import ChildSpec
from specactor.config import Config
from specactor.domain.changes import Change
from specactor.domain.knowledge import api as k
from specactor.domain.knowledge.sync import MANIFEST, Snapshot, manifest_bytes
from specactor.domain.memory import api as m
from specactor.domain.memory.embeddings import pack
from specactor.domain.memory.layers import (
    Identifiers,
    MissingIdentifier,
    merge,
    scope_identifiers,
    scope_key,
    search_scopes,
)
from specactor.domain.memory.records import EmbeddingsEndpoint, NewMemory, SearchSpec
from specactor.domain.memory.scoring import Mode
from specactor.protocol.context import RequestContext
from specactor.protocol.errors import NotFound, ProviderError, ToolError
from specactor.protocol.registry import Registry
from specactor.sqlite.memory_db import delete_memory, insert_memory, load_sync

if TYPE_CHECKING:
    from specactor.concurrency.tasks import Task
    from specactor.toolsets import Services

TOOLSET = "memory"
T = TypeVar("T")


@dataclass(frozen=True)
class MemorySettings:
    """What the tools need to know besides the actors, resolved from the configuration."""

    mode: Mode = "lexical"  # SPECACTOR_MEMORY_MODE, default hybrid when an embeddings URL is set
    embeddings: EmbeddingsEndpoint | None = None  # SPECACTOR_EMBEDDINGS_URL / _MODEL / _API_KEY, timeout
    user_id: str | None = None  # SPECACTOR_MEMORY_USER_ID, default the login name
    project_id: str | None = None  # SPECACTOR_MEMORY_PROJECT_ID, default the workspace folder's name
    team_id: str | None = None  # SPECACTOR_MEMORY_TEAM_ID
    org_id: str | None = None  # SPECACTOR_MEMORY_ORG_ID
    company_id: str = "default"  # SPECACTOR_MEMORY_COMPANY_ID

    @classmethod
    def from_config(cls, config: Config) -> MemorySettings:
        """The tools' settings from `config.memory` (docs/configuration.md)."""
        mem = config.memory
        endpoint = embeddings_endpoint(config)
        return cls(mode=mem.mode or ("hybrid" if endpoint else "lexical"), embeddings=endpoint,
                   user_id=mem.user_id or _login(), project_id=mem.project_id or config.root_path.name or None,
                   team_id=mem.team_id, org_id=mem.org_id, company_id=mem.company_id)

    def identifiers(self, ctx: RequestContext) -> Identifiers:
        """The defaults of a call: configuration, then the session (its id, the client's name as agent)."""
        return Identifiers(agent_id=ctx.session.client_name or None, user_id=self.user_id,
                           session_id=ctx.session.id, project_id=self.project_id, team_id=self.team_id,
                           org_id=self.org_id, company_id=self.company_id)


def _login() -> str | None:
    try:
        import getpass

        return getpass.getuser() or None
    except (OSError, KeyError):
        return None


def _missing(err: MissingIdentifier) -> ToolError:
    # Which identifiers exist depends on configuration and session, so the rule cannot live in the
    # input schema; NOT_FOUND (of the identifier) rather than INVALID_INPUT keeps schema-valid input
    # from ever being INVALID_INPUT.
    return ToolError("NOT_FOUND", str(err), {"kind": "identifier", "id": err.name, "layer": err.layer,
                                             "field": f"identifiers.{err.name}"})


def _repo_error(err: Exception, root: Path) -> ToolError:
    if isinstance(err, RepoMissing):
        return ToolError("NOT_FOUND", f"{err}; set SPECACTOR_KNOWLEDGE_REPO", {
            "kind": "knowledge repository", "id": str(root)})
    return ProviderError(str(err), {"repository": str(root)})


def register(registry: Registry, services: Services) -> None:
    if not registry.wants(TOOLSET):
        return
    config = services.config
    settings = MemorySettings.from_config(config)
    workspace, knowledge_root = str(config.root_path), config.knowledge_repo_path
    actors = services.memory
    store, reader, sync = actors.store, actors.reader, actors.sync
    embedder = actors.embeddings if settings.mode != "lexical" else None
    searcher = actors.searcher
    # What a search needs running: the store, the embeddings client when the mode asks for vectors, and
    # the searcher over them.
    searching = [a.spec for a in (store, embedder, searcher) if a is not None]

    async def up(*specs: ChildSpec) -> None:
        await actors.up(services.supervisor, *specs)

    async def vector(text: str) -> list[float] | None:
        if embedder is None:
            return None
        await up(embedder.spec)
        return (await embedder.embed([text]))[0]

    def published(written: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> None:
        """A committed memory write, on the change feed."""
        services.feed.publish(Change(workspace=workspace, toolset=TOOLSET, kind="memory", written=written,
                                     removed=removed))

    @registry.tool("memory_add", description="Remember something in a memory layer (default: user). Returns the "
                   "entry with its memoryId.", input=m.MemoryAddIn, output=m.MemoryEntry, toolset=TOOLSET)
    async def memory_add(args: m.MemoryAddIn, ctx: RequestContext) -> m.MemoryEntry:
        ids = merge(settings.identifiers(ctx), args.identifiers)
        try:
            key = scope_key(args.layer, ids)
        except MissingIdentifier as err:
            raise _missing(err) from None
        found = await vector(args.content)
        new = NewMemory(args.content, args.layer, key, scope_identifiers(args.layer, ids), args.tags,
                        args.metadata, pack(found) if found is not None else None)
        await up(store.spec)
        entry = await store.write(lambda conn: insert_memory(conn, new))
        published(written=(f"memory/{entry.memory_id}",))
        return entry

    @registry.tool("memory_search", description="Search memories: results by layer precedence (agent first, "
                   "company last), then score in [0, 1]; only scores at or above threshold (default 0.7).",
                   input=m.MemorySearchIn, output=m.MemorySearchOut, toolset=TOOLSET)
    async def memory_search(args: m.MemorySearchIn, ctx: RequestContext) -> m.MemorySearchOut:
        ids = merge(settings.identifiers(ctx), args.identifiers)
        try:
            scopes = search_scopes(ids, args.layers)
        except MissingIdentifier as err:
            raise _missing(err) from None
        await up(*searching)
        if searcher.pool is None:  # a burst's searches are scored in the pool's workers (the first search's import)
            await up(services.pool.spec)
            searcher.pool = services.pool
        return await searcher.search(SearchSpec(args.query, scopes, args.limit, args.threshold, args.tags,
                                                settings.mode))

    @registry.tool("memory_delete", description="Forget a memory by its memoryId.", input=m.MemoryDeleteIn,
                   output=m.MemoryDeleteOut, toolset=TOOLSET)
    async def memory_delete(args: m.MemoryDeleteIn, ctx: RequestContext) -> m.MemoryDeleteOut:
        await up(store.spec)
        if not await store.write(lambda conn: delete_memory(conn, args.memory_id)):
            raise NotFound("memory", args.memory_id)
        published(removed=(f"memory/{args.memory_id}",))
        return m.MemoryDeleteOut(memory_id=args.memory_id, deleted=True, message="memory deleted")

    async def heavy(task: Task[Snapshot, T], snap: Snapshot, *args: Any) -> T:
        """`task` on `snap`, through the worker pool (in-process when nothing else is heavy)."""
        from specactor.toolsets import knowledge_tasks  # imported by the first knowledge call, not at start

        await up(services.pool.spec)
        return await services.pool.call(task, knowledge_tasks.snapshot_key(workspace, snap), snap, *args)

    async def snapshot() -> Snapshot:
        await up(reader.spec)
        try:
            return await reader.snapshot()
        except (RepoMissing, GitFailed) as err:
            raise _repo_error(err, knowledge_root) from None

    @registry.tool("knowledge_query", description="Find knowledge items (ADRs, policies, patterns, specs) by words "
                   "and filters; returns summaries, never full content. Default status: accepted.",
                   input=k.KnowledgeQueryIn, output=k.KnowledgeQueryOut, toolset=TOOLSET)
    async def knowledge_query(args: k.KnowledgeQueryIn, ctx: RequestContext) -> k.KnowledgeQueryOut:
        snap = await snapshot()
        from specactor.toolsets.knowledge_tasks import QUERY

        items, total = await heavy(QUERY, snap, args)
        return k.KnowledgeQueryOut(items=items, total_count=total, problems=snap.problems)

    @registry.tool("knowledge_show", description="One knowledge item in full, with its constraints and, on "
                   "request, its git history.", input=k.KnowledgeShowIn, output=k.KnowledgeShowOut, toolset=TOOLSET)
    async def knowledge_show(args: k.KnowledgeShowIn, ctx: RequestContext) -> k.KnowledgeShowOut:
        snap = await snapshot()
        item = snap.items.get(args.id)
        if item is None:
            raise NotFound("knowledge item", args.id)
        if not args.include_constraints:
            item = msgspec.structs.replace(item, constraints=None)
        history = None
        if args.include_history:
            try:
                history = await reader.history(item.path)
            except (RepoMissing, GitFailed) as err:
                raise _repo_error(err, knowledge_root) from None
        return k.KnowledgeShowOut(item=item, history=history)

    @registry.tool("knowledge_check", description="Check files and dependencies against the constraints of the "
                   "accepted knowledge items that bind this project (or of knowledgeItemIds). passed is false "
                   "when a block-level constraint is violated.", input=k.KnowledgeCheckIn,
                   output=k.KnowledgeCheckOut, toolset=TOOLSET)
    async def knowledge_check(args: k.KnowledgeCheckIn, ctx: RequestContext) -> msgspec.Raw:
        snap = await snapshot()
        if args.knowledge_item_ids is not None:
            unknown = [i for i in args.knowledge_item_ids if i not in snap.items]
            if unknown:
                raise NotFound("knowledge item", unknown[0])
            items = [snap.items[i] for i in dict.fromkeys(args.knowledge_item_ids)]
        else:
            items = snap.binding(settings.identifiers(ctx))
        files = [(f.path, f.content) for f in args.files] if args.files is not None else None
        deps = [(d.name, d.version) for d in args.dependencies] if args.dependencies is not None else None
        from specactor.toolsets.knowledge_tasks import CHECK

        found = await heavy(CHECK, snap, [i.id for i in items], files, deps, args.min_severity, snap.problems)
        return msgspec.Raw(found)  # KnowledgeCheckOut, encoded where it was computed

    @registry.tool("sync_now", description="Sync knowledge into pointer memories: a delta from git since the last "
                   "synced commit, or everything with force.", input=k.SyncNowIn, output=k.SyncNowOut,
                   toolset=TOOLSET)
    async def sync_now(args: k.SyncNowIn, ctx: RequestContext) -> k.SyncNowOut:
        await up(store.spec, reader.spec, sync.spec, *([embedder.spec] if embedder is not None else []))  # it embeds
        try:
            plan, commit, ms, _ = await sync.sync(force=args.force, company_id=settings.company_id,
                                                  publish=write_manifest)
        except (RepoMissing, GitFailed) as err:
            raise _repo_error(err, knowledge_root) from None
        return k.SyncNowOut(added=plan.added, updated=plan.updated, deleted=plan.deleted, unchanged=plan.unchanged,
                            failures=plan.failures, duration_ms=round(ms, 3), last_knowledge_commit=commit,
                            message=f"synced {plan.added + plan.updated} items, orphaned {plan.deleted}, "
                                    f"{len(plan.failures)} failed")

    async def write_manifest(manifest: dict[str, Any]) -> None:
        """Inside the workspace the storage actor writes (under the workspace lock); elsewhere the sync."""
        target = knowledge_root.resolve() / MANIFEST
        if not target.is_relative_to(config.root_path):
            await sync.write_manifest(manifest)
            return
        rel = target.relative_to(config.root_path).as_posix()

        def update(tx: Tx) -> None:
            data = manifest_bytes(manifest, tx.read(rel))
            if data is not None:
                tx.write(rel, data)

        await services.storage.transact(update, toolset="knowledge", kind="knowledge")

    @registry.tool("sync_status", description="When knowledge was last synced, from which commit, with what "
                   "result, and whether the sync is healthy.", input=k.SyncStatusIn, output=k.SyncStatusOut,
                   toolset=TOOLSET)
    async def sync_status(args: k.SyncStatusIn, ctx: RequestContext) -> k.SyncStatusOut:
        await up(store.spec)
        record = await store.read(lambda conn: load_sync(conn, items=False))
        try:
            head = await reader.head_commit()
            reachable = True
        except (RepoMissing, GitFailed):
            head, reachable = None, False
        last = record.last_result
        return k.SyncStatusOut(
            healthy=reachable and record.last_sync_at is not None and not record.failures,
            last_sync_at=record.last_sync_at, last_knowledge_commit=record.last_commit, head_commit=head,
            time_since_sync=_since(record.last_sync_at), failed_items=len(record.failures),
            failures=record.failures, stats=record.stats, added=last.get("added", 0),
            updated=last.get("updated", 0), deleted=last.get("deleted", 0), unchanged=last.get("unchanged", 0))

    from specactor.toolsets import context as session_context  # the prompt and resource use these actors

    session_context.register(registry, services, budget=config.context.budget)


def _since(stamp: str | None) -> str | None:
    if stamp is None:
        return None
    import calendar

    then = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
    seconds = max(0, int(time.time() - then))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return f"{seconds} seconds ago"
