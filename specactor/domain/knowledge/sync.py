"""Knowledge → memory sync, planned purely: the delta, the pointer memories, the manifest.

The actor lists the items at HEAD, asks `to_examine` which files to read (all of them on a full
sync, else those `git diff` names since the last synced commit plus those that failed last
time), parses them, and `plan` decides what each pointer memory must become. An item's sync hash
covers its path and bytes, so a rename of an item that keeps its id is an update (its pointer
may change layer); a rename that changes the id is a delete plus an add.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from specactor.domain.knowledge.api import Item, Problem, SeverityCounts, SyncStats
from specactor.domain.knowledge.parse import item_scope
from specactor.domain.knowledge.query import QueryIndex, binds
from specactor.domain.memory.layers import Identifiers, Layer

if TYPE_CHECKING:
    from specactor.domain.knowledge.check import Rules

RULE_SETS = 64  # sets of items whose rules a snapshot keeps (`Snapshot.rules`)

MANIFEST = "manifest.json"
POINTER_CONSTRAINTS = 3


@dataclass(frozen=True)
class Stored:
    """What the last sync recorded of one item."""

    id: str
    path: str
    hash: str


@dataclass
class Plan:
    upserts: list[tuple[Item, str]] = field(default_factory=list)  # (item, sync hash)
    orphans: list[str] = field(default_factory=list)  # ids of items gone from the repository
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    failures: list[Problem] = field(default_factory=list)

    @property
    def deleted(self) -> int:
        return len(self.orphans)


def sync_hash(path: str, data: bytes) -> str:
    return hashlib.sha256(path.encode() + b"\0" + data).hexdigest()


def item_paths(listing: Iterable[str]) -> set[str]:
    return {p for p in listing if item_scope(p) is not None}


def to_examine(listing: Iterable[str], changed: set[str] | None, failed: Iterable[str]) -> list[str]:
    """The item files a sync must read: all (`changed` None), else the changed and the failed ones."""
    items = item_paths(listing)
    if changed is None:
        return sorted(items)
    return sorted(items & (changed | set(failed)))


def plan(old: Mapping[str, Stored], listing: Iterable[str], examined: Mapping[str, tuple[Item | Problem, str]],
         *, force: bool) -> Plan:
    """What to write, given the last sync's records and the freshly parsed files."""
    present = item_paths(listing)
    kept = {i: s for i, s in old.items() if s.path in present and s.path not in examined}
    kept_broken: set[str] = set()
    fresh: dict[str, tuple[Item, str]] = {}
    out = Plan()
    for path in sorted(examined):
        result, digest = examined[path]
        if isinstance(result, Problem):
            out.failures.append(result)
            for i, s in old.items():
                if s.path == path:  # the file is still there, just unreadable now: keep its pointer
                    kept[i] = s
                    kept_broken.add(i)
            continue
        other = kept[result.id].path if result.id in kept else fresh[result.id][0].path if result.id in fresh else None
        if other is not None:
            out.failures.append(Problem(file=path, error=f"duplicate id '{result.id}': {other} has it too"))
            continue
        fresh[result.id] = (result, digest)
    for item_id, (item, digest) in sorted(fresh.items()):
        before = old.get(item_id)
        if force or before is None:
            out.added += 1
        elif before.hash != digest:
            out.updated += 1
        else:
            out.unchanged += 1
            continue
        out.upserts.append((item, digest))
    out.unchanged += len(kept) - len(kept_broken)
    out.orphans = sorted(i for i in old if i not in kept and i not in fresh)
    return out


def pointer_layer(item: Item) -> Layer:
    return item.layer


def pointer_identifiers(item: Item, company_id: str) -> dict[str, str]:
    """The memory identifiers of an item's pointer: its scope, from the folder it lives in."""
    if item.layer == "company":
        return {"companyId": company_id}
    return {f"{item.layer}Id": item.scope or ""}


def pointer_content(item: Item) -> str:
    """The pointer memory's text: title, summary, type, up to three block constraints, id."""
    lines = [item.title, item.summary, f"[{item.type.upper()}]"]
    blocks = [c for c in item.constraints or () if c.severity == "block"][:POINTER_CONSTRAINTS]
    if blocks:
        lines.append("Constraints:")
        lines += [f"- {c.message}" if c.message else f"- {c.operator}: {c.pattern} [{c.target}]" for c in blocks]
    lines.append(f"({item.id})")
    return "\n".join(line for line in lines if line)


def pointer_metadata(item: Item, synced_at: str, orphaned: bool = False) -> dict[str, Any]:
    return {"type": "knowledge_pointer", "knowledgePointer": {
        "sourceType": item.type, "sourceId": item.id, "contentHash": item.content_hash, "syncedAt": synced_at,
        "sourceLayer": item.layer, "isOrphaned": orphaned}}


def manifest_entry(item: Item) -> dict[str, Any]:
    counts = SeverityCounts()
    for c in item.constraints or ():
        setattr(counts, c.severity, getattr(counts, c.severity) + 1)
    entry: dict[str, Any] = {
        "id": item.id, "type": item.type, "layer": item.layer, "path": item.path, "title": item.title,
        "summary": item.summary, "status": item.status, "contentHash": item.content_hash,
        "hasConstraints": bool(item.constraints), "tags": item.tags, "updatedAt": item.updated_at}
    if item.constraints:
        entry["constraintSeverity"] = {"info": counts.info, "warn": counts.warn, "block": counts.block}
    return entry


def manifest(entries: Mapping[str, Mapping[str, Any]], commit: str | None, generated_at: str) -> dict[str, Any]:
    """The repository manifest (reference §5) from every item's entry."""
    by: dict[str, dict[str, list[str]]] = {"byLayer": {}, "byType": {}, "byStatus": {}}
    for item_id in sorted(entries):
        entry = entries[item_id]
        for key, field_name in (("byLayer", "layer"), ("byType", "type"), ("byStatus", "status")):
            by[key].setdefault(str(entry[field_name]), []).append(item_id)
    return {"version": "1.0", "generatedAt": generated_at, "commitHash": commit,
            "items": {i: dict(entries[i]) for i in sorted(entries)}, **by}


def manifest_bytes(manifest: Mapping[str, Any], old: bytes | None) -> bytes | None:
    """The manifest file's new bytes, or None when the old one says the same (bar `generatedAt`)."""
    if old is not None:
        try:
            previous = msgspec.json.decode(old)
        except msgspec.DecodeError:
            previous = None
        if isinstance(previous, dict) and {**previous, "generatedAt": None} == {**manifest, "generatedAt": None}:
            return None
    return msgspec.json.format(msgspec.json.encode(manifest), indent=2) + b"\n"


@dataclass
class SyncRecord:
    revision: int = 0
    last_commit: str | None = None
    last_sync_at: str | None = None
    stats: SyncStats = field(default_factory=SyncStats)
    last_result: dict[str, int] = field(default_factory=dict)
    failures: list[Problem] = field(default_factory=list)
    items: dict[str, Stored] = field(default_factory=dict)


@dataclass(frozen=True)
class SyncApply:
    plan: Plan
    base_revision: int
    commit: str | None
    company_id: str
    duration_ms: float
    vectors: Mapping[str, bytes] = field(default_factory=dict)  # item id -> its new pointer's packed vector
    backfill: Sequence[Backfill] = ()  # vectors for pointers written without (the endpoint was down)


@dataclass(frozen=True)
class Backfill:
    """A vector for a pointer memory written without one, set only if the row still holds `content`."""

    rowid: int
    content: str
    vector: bytes


@dataclass(frozen=True)
class Unembedded:
    """A live pointer memory without a vector."""

    rowid: int
    knowledge_id: str
    content: str


def to_embed(plan: Plan, unembedded: Iterable[Unembedded]) -> tuple[list[str], list[str], list[Unembedded]]:
    """What a sync asks the embeddings endpoint for: the texts (the new pointers' first, then those of the
    pointers still without a vector that the plan does not rewrite), the ids of the new pointers' items,
    and the pointers to backfill, in the texts' order."""
    rewritten = {item.id for item, _ in plan.upserts}
    ids = [item.id for item, _ in plan.upserts]
    late = [u for u in unembedded if u.knowledge_id not in rewritten]
    return [pointer_content(item) for item, _ in plan.upserts] + [u.content for u in late], ids, late


@dataclass
class Snapshot:
    """The knowledge items committed at one tree, and what is worked out from them once (a commit
    never changes, so neither do they): the query index, the items binding each caller."""

    commit: str | None
    tree: str | None
    items: dict[str, Item] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    _index: QueryIndex | None = field(default=None, repr=False, compare=False)
    _bound: dict[tuple[str | None, str | None, str | None], list[Item]] = field(
        default_factory=dict, repr=False, compare=False)
    _rules: dict[tuple[str, ...], Rules] = field(default_factory=dict, repr=False, compare=False)

    def index(self) -> QueryIndex:
        """The items' query index, built on first use."""
        if self._index is None:
            self._index = QueryIndex(self.items.values())
        return self._index

    def rules(self, ids: Sequence[str]) -> Rules:
        """The constraints of the items `ids`, made ready for `check` once (a few sets of items are
        checked again and again: those binding each caller)."""
        from specactor.domain.knowledge.check import rules_of  # RE2 and the globs: only once checking

        key = tuple(ids)
        found = self._rules.get(key)
        if found is None:
            if len(self._rules) >= RULE_SETS:
                self._rules.clear()
            found = self._rules[key] = rules_of(self.items[i] for i in key)
        return found

    def binding(self, ids: Identifiers) -> list[Item]:
        """The accepted items with constraints that bind a caller with these identifiers (`binds`)."""
        key = (ids.org_id, ids.team_id, ids.project_id)
        found = self._bound.get(key)
        if found is None:
            found = self._bound[key] = [i for i in self.items.values()
                                        if i.status == "accepted" and i.constraints and binds(i, ids)]
        return found
