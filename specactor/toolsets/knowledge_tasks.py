"""The knowledge tools' CPU-heavy work as pool tasks (`concurrency/tasks.py`): checking files
against constraints, and querying the items. Their shared state is a knowledge snapshot: a
worker gets its items once per tree, builds its own query index, and keeps both.

A check answers the tool's output already encoded as JSON (the bytes the envelope embeds raw):
its answer can be large (465 violations are ~150 KB), and encoding it where it was computed
spares the process that serves every request a decode and an encode per call.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from specactor.concurrency.tasks import Task
from specactor.domain.knowledge.api import Item, ItemSummary, KnowledgeCheckOut, KnowledgeQueryIn, Problem, Severity
from specactor.domain.knowledge.check import check
from specactor.domain.knowledge.sync import Snapshot
from specactor.wire.codec import encode

_items = msgspec.msgpack.Decoder(list[Item])


def snapshot_key(root: str, snap: Snapshot) -> str | None:
    """The cache key of `snap` (None: a snapshot of no tree, never shipped)."""
    return f"knowledge:{root}:{snap.tree}" if snap.tree else None


def _dump(snap: Snapshot) -> bytes:
    return msgspec.msgpack.encode(list(snap.items.values()))


def _load(data: bytes) -> Snapshot:
    return Snapshot(commit=None, tree=None, items={item.id: item for item in _items.decode(data)})


def _check(snap: Snapshot, ids: Sequence[str], files: Sequence[tuple[str, str]] | None,
           dependencies: Sequence[tuple[str, str | None]] | None, min_severity: Severity,
           problems: Sequence[Problem] = ()) -> bytes:
    """knowledge_check's output (`KnowledgeCheckOut`, with the snapshot's `problems`) as JSON."""
    found = check(snap.rules(ids), files, dependencies, min_severity)
    return encode(KnowledgeCheckOut(passed=found.passed, violations=found.violations, summary=found.summary,
                                    problems=list(problems), invalid_constraints=found.invalid))


def _query(snap: Snapshot, args: KnowledgeQueryIn) -> tuple[list[ItemSummary], int]:
    return snap.index().query(args)


CHECK: Task[Snapshot, bytes] = Task("knowledge_check", _check, _load, _dump, bytes)
QUERY: Task[Snapshot, tuple[list[ItemSummary], int]] = Task("knowledge_query", _query, _load, _dump,
                                                            tuple[list[ItemSummary], int])
