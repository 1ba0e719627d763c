"""The `memory` toolset: Aeterna's eight tools (memory_add/search/delete, knowledge_query/show/check,
sync_now, sync_status) over the memory store actor.

Settings come from `config.memory` and `config.knowledge` (docs/configuration.md).
The actor is created here and started on first use, as a system task of the running trio loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from specactor.actors.memory_store import GitFailed, MemoryStoreActor, RepoMissing
from specactor.actors.storage import Tx
from specactor.config import Config
from specactor.domain.knowledge import api as k
from specactor.domain.knowledge.check import check
from specactor.domain.knowledge.sync import MANIFEST, Snapshot, manifest_bytes
from specactor.domain.memory import api as m
from specactor.domain.memory.embeddings import pack
from specactor.domain.memory.layers import (
    LAYERS,
    Identifiers,
    MissingIdentifier,
    accessible,
    merge,
    scope_identifiers,
    scope_key,
)
from specactor.domain.memory.records import EmbeddingsEndpoint, NewMemory, SearchSpec
from specactor.domain.memory.scoring import Mode
from specactor.protocol.context import RequestContext
from specactor.protocol.errors import NotFound, ProviderError, ToolError
from specactor.protocol.registry import Registry
from specactor.sqlite.memory_db import delete_memory, insert_memory, load_sync, search

if TYPE_CHECKING:
    from specactor.toolsets import Services

TOOLSET = "memory"


@dataclass(frozen=True)
class MemorySettings:
    """What the toolset needs to know, resolved from the configuration."""

    db_path: Path  # SPECACTOR_MEMORY_DB, default $XDG_DATA_HOME/specactor/memory.db
    knowledge_repo: Path  # SPECACTOR_KNOWLEDGE_REPO, default <root>/knowledge
    mode: Mode = "lexical"  # SPECACTOR_MEMORY_MODE, default hybrid when an embeddings URL is set
    embeddings: EmbeddingsEndpoint | None = None  # SPECACTOR_EMBEDDINGS_URL / _MODEL / _API_KEY
    user_id: str | None = None  # SPECACTOR_MEMORY_USER_ID, default the login name
    project_id: str | None = None  # SPECACTOR_MEMORY_PROJECT_ID, default the workspace folder's name
    team_id: str | None = None  # SPECACTOR_MEMORY_TEAM_ID
    org_id: str | None = None  # SPECACTOR_MEMORY_ORG_ID
    company_id: str = "default"  # SPECACTOR_MEMORY_COMPANY_ID

    @classmethod
    def from_config(cls, config: Config, environ: Mapping[str, str]) -> MemorySettings:
        """The toolset's settings from `config.memory` and `config.knowledge` (docs/configuration.md)."""
        mem, root = config.memory, config.root_path
        data_home = Path(environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
        emb = mem.embeddings
        endpoint = EmbeddingsEndpoint(emb.url, emb.model, emb.api_key) if emb.url else None
        return cls(
            db_path=Path(mem.db or data_home / "specactor" / "memory.db").expanduser(),
            knowledge_repo=Path(config.knowledge.repo or root / "knowledge").expanduser(),
            mode=mem.mode or ("hybrid" if endpoint else "lexical"),
            embeddings=endpoint,
            user_id=mem.user_id or _login(),
            project_id=mem.project_id or root.name or None,
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


def _repo_error(err: Exception, store: MemoryStoreActor) -> ToolError:
    if isinstance(err, RepoMissing):
        return ToolError("NOT_FOUND", f"{err}; set SPECACTOR_KNOWLEDGE_REPO", {
            "kind": "knowledge repository", "id": str(store.knowledge_root)})
    return ProviderError(str(err), {"repository": str(store.knowledge_root)})


def register(registry: Registry, services: Services) -> None:
    if not registry.wants(TOOLSET):
        return
    settings = MemorySettings.from_config(services.config, os.environ)
    store = MemoryStoreActor(settings.db_path, settings.knowledge_repo, embeddings=settings.embeddings)
    semantic = settings.mode != "lexical"

    @registry.tool("memory_add", description="Remember something in a memory layer (default: user). Returns the "
                   "entry with its memoryId.", input=m.MemoryAddIn, output=m.MemoryEntry, toolset=TOOLSET)
    async def memory_add(args: m.MemoryAddIn, ctx: RequestContext) -> m.MemoryEntry:
        ids = merge(settings.identifiers(ctx), args.identifiers)
        try:
            key = scope_key(args.layer, ids)
        except MissingIdentifier as err:
            raise _missing(err) from None
        vector = (await store.embed([args.content]))[0] if semantic else None
        new = NewMemory(args.content, args.layer, key, scope_identifiers(args.layer, ids), args.tags,
                        args.metadata, pack(vector) if vector is not None else None)
        return await store.write(lambda conn: insert_memory(conn, new))

    @registry.tool("memory_search", description="Search memories: results by layer precedence (agent first, "
                   "company last), then score in [0, 1]; only scores at or above threshold (default 0.7).",
                   input=m.MemorySearchIn, output=m.MemorySearchOut, toolset=TOOLSET)
    async def memory_search(args: m.MemorySearchIn, ctx: RequestContext) -> m.MemorySearchOut:
        ids = merge(settings.identifiers(ctx), args.identifiers)
        layers = sorted(set(args.layers), key=LAYERS.index) if args.layers is not None else accessible(ids)
        try:
            scopes = [(layer, scope_key(layer, ids)) for layer in layers]
        except MissingIdentifier as err:
            raise _missing(err) from None
        vector = (await store.embed([args.query]))[0] if semantic else None
        spec = SearchSpec(args.query, scopes, args.limit, args.threshold, args.tags, settings.mode, vector)
        return await store.read(lambda conn: search(conn, spec))

    @registry.tool("memory_delete", description="Forget a memory by its memoryId.", input=m.MemoryDeleteIn,
                   output=m.MemoryDeleteOut, toolset=TOOLSET)
    async def memory_delete(args: m.MemoryDeleteIn, ctx: RequestContext) -> m.MemoryDeleteOut:
        if not await store.write(lambda conn: delete_memory(conn, args.memory_id)):
            raise NotFound("memory", args.memory_id)
        return m.MemoryDeleteOut(memory_id=args.memory_id, deleted=True, message="memory deleted")

    async def snapshot() -> Snapshot:
        try:
            return await store.snapshot()
        except (RepoMissing, GitFailed) as err:
            raise _repo_error(err, store) from None

    @registry.tool("knowledge_query", description="Find knowledge items (ADRs, policies, patterns, specs) by words "
                   "and filters; returns summaries, never full content. Default status: accepted.",
                   input=k.KnowledgeQueryIn, output=k.KnowledgeQueryOut, toolset=TOOLSET)
    async def knowledge_query(args: k.KnowledgeQueryIn, ctx: RequestContext) -> k.KnowledgeQueryOut:
        snap = await snapshot()
        items, total = snap.index().query(args)
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
                history = await store.history(item.path)
            except (RepoMissing, GitFailed) as err:
                raise _repo_error(err, store) from None
        return k.KnowledgeShowOut(item=item, history=history)

    @registry.tool("knowledge_check", description="Check files and dependencies against the constraints of the "
                   "accepted knowledge items that bind this project (or of knowledgeItemIds). passed is false "
                   "when a block-level constraint is violated.", input=k.KnowledgeCheckIn,
                   output=k.KnowledgeCheckOut, toolset=TOOLSET)
    async def knowledge_check(args: k.KnowledgeCheckIn, ctx: RequestContext) -> k.KnowledgeCheckOut:
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
        found = await services.runtime.run_sync(check, items, files, deps, args.min_severity)
        return k.KnowledgeCheckOut(passed=found.passed, violations=found.violations, summary=found.summary,
                                   problems=snap.problems, invalid_constraints=found.invalid)

    @registry.tool("sync_now", description="Sync knowledge into pointer memories: a delta from git since the last "
                   "synced commit, or everything with force.", input=k.SyncNowIn, output=k.SyncNowOut,
                   toolset=TOOLSET)
    async def sync_now(args: k.SyncNowIn, ctx: RequestContext) -> k.SyncNowOut:
        try:
            plan, commit, ms, _ = await store.sync(force=args.force, company_id=settings.company_id,
                                                   publish=write_manifest)
        except (RepoMissing, GitFailed) as err:
            raise _repo_error(err, store) from None
        return k.SyncNowOut(added=plan.added, updated=plan.updated, deleted=plan.deleted, unchanged=plan.unchanged,
                            failures=plan.failures, duration_ms=round(ms, 3), last_knowledge_commit=commit,
                            message=f"synced {plan.added + plan.updated} items, orphaned {plan.deleted}, "
                                    f"{len(plan.failures)} failed")

    async def write_manifest(manifest: dict[str, Any]) -> None:
        """Inside the workspace the storage actor writes (under the workspace lock); elsewhere the store."""
        root = services.config.root_path
        target = (settings.knowledge_repo.resolve() / MANIFEST)
        if not target.is_relative_to(root):
            await store.write_manifest(manifest)
            return
        rel = target.relative_to(root).as_posix()

        def update(tx: Tx) -> None:
            data = manifest_bytes(manifest, tx.read(rel))
            if data is not None:
                tx.write(rel, data)

        await services.storage.transact(update)

    @registry.tool("sync_status", description="When knowledge was last synced, from which commit, with what "
                   "result, and whether the sync is healthy.", input=k.SyncStatusIn, output=k.SyncStatusOut,
                   toolset=TOOLSET)
    async def sync_status(args: k.SyncStatusIn, ctx: RequestContext) -> k.SyncStatusOut:
        record = await store.read(lambda conn: load_sync(conn, items=False))
        try:
            head = await store.head_commit()
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
