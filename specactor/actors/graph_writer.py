"""The graph-sync actor's hands: one drain step of each kind, from outbox rows to Emergent requests.

Owned and called by `GraphSync` (actors/graph_sync.py), never by anything else. Every object
create is preceded by a lookup by (type, key) unless the state map knows the object, so a create
whose reply was lost (or whose process was killed before recording it) is found, not made again.
Creates go in bulk (1 to `batch` items); patches and deletes, which Emergent has no bulk form of, go
`concurrency` at a time. Item-level refusals (any 4xx but 401/403/404/429) go to the dead letters;
a failure of the server or the network stops the step with `EmergentError`, after recording what
was done, and the rows not done wait in the outbox for the next round.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import trio

from specactor.actors.emergent_client import EmergentClient
from specactor.domain.graph.emergent import EmergentError
from specactor.domain.graph.model import Node
from specactor.sqlite import graph_outbox as ob
from specactor.sqlite.graph_outbox import Done, Failed, Known, Pending

T = TypeVar("T")
Db = Callable[..., Awaitable[Any]]  # runs a graph_outbox function on the actor's connection
LISTING_PAST = 200  # more creates than this in one step: list the workspace's objects once, not a lookup each


@dataclass
class Counts:
    created: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"created": self.created, "updated": self.updated, "deleted": self.deleted,
                "unchanged": self.unchanged, "failed": self.failed}


@dataclass
class _Step:
    """What one step did: recorded together, even when the step stops on an error."""

    done: list[Done] = field(default_factory=list)
    failed: list[Failed] = field(default_factory=list)


def same_content(node: Node, remote: dict[str, Any]) -> bool:
    """Whether an object in the graph already says what `node` says."""
    return (remote.get("properties") or {}) == node.properties and sorted(remote.get("labels") or []) == sorted(
        node.labels) and (remote.get("status") or None) == (node.status or None)


def remote_node(remote: dict[str, Any], unit: str) -> Node:
    """A graph object as a `Node`, for its digest (what the state map compares)."""
    return Node(key=str(remote.get("key") or ""), type=str(remote.get("type") or ""), unit=unit,
                properties=dict(remote.get("properties") or {}), labels=tuple(sorted(remote.get("labels") or [])),
                status=remote.get("status") or None)


def _refusal(err: EmergentError) -> bool:
    return err.code == "REFUSED"


class GraphWriter:
    """Args:
        client: the Emergent client (its own retries for idempotent requests).
        db: runs a `graph_outbox` function on the actor's connection, on a worker thread.
        label: this workspace's label (`workspace:<id>`), which scopes lookups.
        batch: items per bulk request; concurrency: single requests in flight at once.
    """

    def __init__(self, client: EmergentClient, db: Db, label: str, *, batch: int, concurrency: int) -> None:
        self.client = client
        self.db = db
        self.label = label
        self.batch = batch
        self.limit = trio.CapacityLimiter(concurrency)
        # The workspace's objects as listed once this round, when many creates made that cheaper
        # than a lookup each. Enough for the round: what it creates meanwhile is in the state map,
        # and a round that fails (a lost reply) ends, so the next one lists again.
        self._listing: dict[str, list[dict[str, Any]]] | None = None
        self._adopted: bool | None = None

    async def _each(self, items: Sequence[T], fn: Callable[[T], Awaitable[None]]) -> None:
        """`fn` over `items`, `concurrency` at a time; the first server or network failure stops them all."""
        async def one(item: T) -> None:
            async with self.limit:
                await fn(item)

        try:
            async with trio.open_nursery() as nursery:
                for item in items:
                    nursery.start_soon(one, item)
        except BaseExceptionGroup as group:
            errors = [e for e in _leaves(group) if isinstance(e, EmergentError)]
            if errors and len(errors) == len(_leaves(group)):
                raise errors[0] from None
            raise

    @staticmethod
    def _refuse_all(items: list[Pending], err: EmergentError, step: _Step, counts: Counts) -> None:
        """A bulk request refused as a whole (a 4xx): each of its items is a dead letter with the reason."""
        for it in items:
            step.failed.append(Failed(it, err.code, err.message, err.status, dead=True))
            counts.failed += 1

    async def _record(self, step: _Step) -> None:
        if step.done or step.failed:
            with trio.CancelScope(shield=True):  # what the graph already did must reach the state map
                await self.db(ob.settle, step.done, step.failed)

    # ------------------------------------------------------------------ objects

    async def list_workspace(self) -> dict[str, list[dict[str, Any]]]:
        """Every live object carrying this workspace's label, by key (duplicates kept, smallest
        canonical id first)."""
        found: dict[str, list[dict[str, Any]]] = {}
        async for obj in self.client.iter_objects(label=self.label):
            key = obj.get("key")
            if isinstance(key, str) and not obj.get("deleted_at"):
                found.setdefault(key, []).append(obj)
        for copies in found.values():
            copies.sort(key=lambda o: str(o.get("canonical_id") or o.get("id")))
        return found

    async def put_nodes(self, items: list[Pending], counts: Counts) -> None:
        known = await self.db(ob.known, "node", [it.key for it in items])
        step = _Step()
        try:
            updates = [it for it in items if it.key in known]
            creates = [it for it in items if it.key not in known]
            if creates:
                await self._create_nodes(creates, step, counts)
            await self._each(updates, lambda it: self._update_node(it, known[it.key], step, counts))
        finally:
            await self._record(step)

    async def _create_nodes(self, items: list[Pending], step: _Step, counts: Counts) -> None:
        found: dict[str, dict[str, Any] | None] = {}
        if self._adopted is None:
            self._adopted = await self.db(ob.get_meta, "adopted") == "1"
        # Once the graph's objects of this workspace were listed (`adopted`), a key never sent since
        # cannot be there: only keys whose create went out (and may have landed) are looked up.
        # Before that (a new outbox, or one whose state map was lost) everything is.
        unsure = [it for it in items if it.sent or not self._adopted]
        if unsure and (len(unsure) > LISTING_PAST or self._listing is not None or not self._adopted):
            if self._listing is None:
                self._listing = await self.list_workspace()
                await self.db(ob.set_meta_now, "adopted", "1")
                self._adopted = True
            listing = self._listing
            found = {it.key: copies[0] if (copies := listing.get(it.key)) else None for it in unsure}
        elif unsure:
            async def look(it: Pending) -> None:
                found[it.key] = await self.client.find_by_key(it.type, it.key, label=self.label)

            await self._each(unsure, look)
        fresh: list[Pending] = []
        existing: list[tuple[Pending, dict[str, Any]]] = []
        for it in items:
            remote = found.get(it.key)
            if remote is None:
                fresh.append(it)
            else:
                existing.append((it, remote))

        async def adopt(pair: tuple[Pending, dict[str, Any]]) -> None:
            it, remote = pair
            node = it.node()
            canonical = str(remote.get("canonical_id") or remote["id"])
            if same_content(node, remote):
                step.done.append(Done(it, canonical))
                counts.unchanged += 1
                return
            old = remote_node(remote, it.unit)
            await self._patch(it, node, canonical, old, step, counts)

        await self._each(existing, adopt)

        async def create(chunk: list[Pending]) -> None:
            bodies = [_create_body(it.node()) for it in chunk]
            await self.db(ob.mark_sent, [it.key for it in chunk if not it.sent])
            try:
                result = await self.client.bulk_create_objects(bodies)
            except EmergentError as err:
                if not _refusal(err):
                    raise
                self._refuse_all(chunk, err, step, counts)
                return
            for index, outcome in enumerate(result.results):
                it = chunk[outcome.index if outcome.index is not None else index]
                if outcome.success and outcome.object is not None:
                    step.done.append(Done(it, str(outcome.object.get("canonical_id") or outcome.object["id"])))
                    counts.created += 1
                else:
                    step.failed.append(Failed(it, "REFUSED", outcome.error or "the server refused the item",
                                              None, dead=True))
                    counts.failed += 1

        await self._each([fresh[i:i + self.batch] for i in range(0, len(fresh), self.batch)], create)

    async def _update_node(self, it: Pending, known: Known, step: _Step, counts: Counts) -> None:
        node = it.node()
        old = msgspec.json.decode(known.body, type=Node) if known.body else None
        if known.deleted or known.deleting:  # removed, or maybe (a removal cut short): restore first
            try:
                await self.client.restore_object(known.canonical_id)
            except EmergentError as err:
                if err.code == "NOT_FOUND":
                    await self.db(ob.forget, "node", [it.key])  # gone for good: the next round creates it
                    step.failed.append(Failed(it, err.code, err.message, err.status))
                    return
                if not _refusal(err):  # "not deleted" (restored meanwhile) falls through to the patch
                    raise
        await self._patch(it, node, known.canonical_id, old, step, counts)

    async def _patch(self, it: Pending, node: Node, canonical: str, old: Node | None, step: _Step,
                     counts: Counts) -> None:
        properties: dict[str, Any] = dict(node.properties)
        for name in (old.properties if old is not None else {}):
            properties.setdefault(name, None)  # null deletes a property the projection no longer has
        try:
            await self.client.patch_object(canonical, properties=properties, labels=list(node.labels),
                                           replace_labels=True, status=node.status)
        except EmergentError as err:
            if err.code == "NOT_FOUND":  # deleted from the graph by hand: forget it, the next round creates it
                await self.db(ob.forget, "node", [it.key])
                step.failed.append(Failed(it, err.code, err.message, err.status))
                return
            if _refusal(err) and "deleted" in err.message:
                await self.client.restore_object(canonical)
                await self.client.patch_object(canonical, properties=properties, labels=list(node.labels),
                                               replace_labels=True, status=node.status)
            elif _refusal(err):
                step.failed.append(Failed(it, err.code, err.message, err.status, dead=True))
                counts.failed += 1
                return
            else:
                raise
        step.done.append(Done(it, canonical))
        counts.updated += 1

    async def delete_nodes(self, items: list[Pending], counts: Counts) -> None:
        known = await self.db(ob.known, "node", [it.key for it in items])
        await self.db(ob.mark_deleting, "node", [it.key for it in items])
        step = _Step()

        async def delete(it: Pending) -> None:
            row = known.get(it.key)
            if row is not None and row.deleted:
                step.done.append(Done(it, row.canonical_id, deleted=True))
                return
            canonical = row.canonical_id if row is not None else None
            if canonical is None:  # sent once without an answer: it may be there
                remote = await self.client.find_by_key(it.type, it.key, label=self.label)
                canonical = str(remote.get("canonical_id") or remote["id"]) if remote else None
            if canonical is not None:
                try:
                    await self.client.delete_object(canonical)
                    counts.deleted += 1
                except EmergentError as err:
                    if err.code not in ("NOT_FOUND", "REFUSED"):  # gone, or already deleted: the goal holds
                        raise
            step.done.append(Done(it, canonical, deleted=canonical is not None))

        try:
            await self._each(items, delete)
        finally:
            await self._record(step)

    # ------------------------------------------------------------------ relationships

    async def put_edges(self, items: list[Pending], counts: Counts) -> int:
        """Send relationships whose two ends are in the graph; returns how many wait for an end still queued."""
        edges = {it.key: it.edge() for it in items}
        ends = await self.db(ob.known, "node", {k for e in edges.values() for k in (e.src, e.dst)})
        step = _Step()
        ready: list[tuple[Pending, dict[str, Any]]] = []
        waiting = 0
        for it in items:
            edge = edges[it.key]
            src, dst = ends.get(edge.src), ends.get(edge.dst)
            if src is not None and dst is not None and not (src.deleted or src.deleting or dst.deleted
                                                            or dst.deleting):
                ready.append((it, {"type": edge.type, "src_id": src.canonical_id, "dst_id": dst.canonical_id}))
                continue
            missing = edge.src if src is None or src.deleted or src.deleting else edge.dst
            if await self.db(ob.is_pending, "node", missing):
                waiting += 1  # its end is on the way
            else:
                step.failed.append(Failed(it, "REFUSED", f"its end {missing} is not in the graph (refused, or "
                                          "removed); see that key's dead letter", None, dead=True))
                counts.failed += 1
        async def create(chunk: list[tuple[Pending, dict[str, Any]]]) -> None:
            try:
                result = await self.client.bulk_create_relationships([body for _, body in chunk])
            except EmergentError as err:
                if not _refusal(err):
                    raise
                self._refuse_all([it for it, _ in chunk], err, step, counts)
                return
            for index, outcome in enumerate(result.results):
                it = chunk[outcome.index if outcome.index is not None else index][0]
                if outcome.success and outcome.relationship is not None:
                    rel = outcome.relationship
                    step.done.append(Done(it, str(rel.get("canonical_id") or rel["id"])))
                    counts.created += 1
                else:
                    step.failed.append(Failed(it, "REFUSED", outcome.error or "the server refused the item",
                                              None, dead=True))
                    counts.failed += 1

        try:
            await self._each([ready[i:i + self.batch] for i in range(0, len(ready), self.batch)], create)
        finally:
            await self._record(step)
        return waiting

    async def delete_edges(self, items: list[Pending], counts: Counts) -> None:
        known = await self.db(ob.known, "edge", [it.key for it in items])
        await self.db(ob.mark_deleting, "edge", [it.key for it in items])
        step = _Step()

        async def delete(it: Pending) -> None:
            row = known.get(it.key)
            if row is not None:
                try:
                    await self.client.delete_relationship(row.canonical_id)
                    counts.deleted += 1
                except EmergentError as err:
                    if err.code not in ("NOT_FOUND", "REFUSED"):
                        raise
            step.done.append(Done(it, None))

        try:
            await self._each(items, delete)
        finally:
            await self._record(step)

    async def remove_duplicates(self, listing: dict[str, list[dict[str, Any]]], counts: Counts) -> None:
        """Delete every copy of a key but the one with the smallest canonical id (what lookups pick)."""
        extra = [obj for copies in listing.values() for obj in copies[1:]]

        async def delete(obj: dict[str, Any]) -> None:
            try:
                await self.client.delete_object(str(obj.get("canonical_id") or obj["id"]))
                counts.deleted += 1
            except EmergentError as err:
                if err.code not in ("NOT_FOUND", "REFUSED"):
                    raise

        await self._each(extra, delete)


def _create_body(node: Node) -> dict[str, Any]:
    body: dict[str, Any] = {"type": node.type, "key": node.key, "properties": node.properties,
                            "labels": list(node.labels)}
    if node.status is not None:
        body["status"] = node.status
    return body


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
