"""The Emergent graph of one project, in memory, with the v0.7.0 server's semantics (no I/O, no locks).

Rows are versions: a change inserts a row with a new id, `version + 1` and the same `canonical_id`,
and points the previous HEAD's `supersedes_id` at it; the HEAD is the row nothing supersedes.
Relationships are upserted on the (type, src_id, dst_id) they are given, ids taken as sent. Where
the server checks "deleted" on the row a request names (not on its HEAD), so does this store.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

from specactor.testing.emergent_rows import (
    Clock,
    ObjectQuery,
    ObjectRow,
    RelRow,
    bad_request,
    change_summary,
    document,
    matches,
    not_found,
    parse_uuid,
    words,
)


def _index(index: dict[str, set[str]], key: str, member: str, add: bool) -> None:
    if add:
        index.setdefault(key, set()).add(member)
    elif key in index:
        index[key].discard(member)
        if not index[key]:
            del index[key]


class Graph:
    """One project's objects and relationships, indexed so 20,000 objects search fast (by type,
    key, label and word over HEADs; relationships by (type, src, dst) and by either end).

    Every operation that fails raises `ApiError` with the server's status, code and message.

    Args:
        project_id: the project every row belongs to.
        clock: shared by the projects of one double, so timestamps never repeat.
        everywhere: object rows of every project by id (relationship endpoints are looked up
            across projects, as the server does, to answer `relationship_project_mismatch`).
        inverse_types: relationship type → the inverse type a template pack declares.
    """

    def __init__(self, project_id: str, clock: Clock, everywhere: dict[str, ObjectRow],
                 inverse_types: Mapping[str, str]) -> None:
        self.project_id = project_id
        self.clock = clock
        self.everywhere = everywhere
        self.inverse_types = inverse_types
        self.rows: dict[str, ObjectRow] = {}
        self.heads: dict[str, ObjectRow] = {}  # canonical_id → HEAD row
        self._by: dict[str, dict[str, set[str]]] = {"type": {}, "key": {}, "label": {}, "word": {}}
        self._words: dict[str, Counter[str]] = {}  # canonical_id → its HEAD's document
        self.rels: dict[str, RelRow] = {}
        self.rel_heads: dict[str, RelRow] = {}
        self._rel_by_triple: dict[tuple[str, str, str], str] = {}  # → canonical_id
        self._rel_by_end: dict[str, dict[str, set[str]]] = {"src": {}, "dst": {}}

    # ------------------------------------------------------------------ objects

    def _set_head(self, row: ObjectRow, previous: ObjectRow | None) -> None:
        canonical = row.canonical_id
        if previous is not None:
            previous.supersedes_id = row.id
            for label in previous.labels:
                _index(self._by["label"], label, canonical, add=False)
            for word in self._words.pop(canonical):
                _index(self._by["word"], word, canonical, add=False)
        else:
            _index(self._by["type"], row.type, canonical, add=True)
            if row.key is not None:
                _index(self._by["key"], row.key, canonical, add=True)
        for label in row.labels:
            _index(self._by["label"], label, canonical, add=True)
        self._words[canonical] = document(row)
        for word in self._words[canonical]:
            _index(self._by["word"], word, canonical, add=True)
        self.rows[row.id] = row
        self.everywhere[row.id] = row
        self.heads[canonical] = row

    def create_object(self, type_: str, key: str | None, status: str | None,
                      properties: dict[str, Any] | None, labels: list[str] | None) -> ObjectRow:
        row_id = str(uuid.uuid4())
        row = ObjectRow(row_id, self.project_id, row_id, 1, type_, key, status, dict(properties or {}),
                        list(labels or []), self.clock.now_us())
        self._set_head(row, None)
        return row

    def _new_version(self, head: ObjectRow, *, properties: dict[str, Any], labels: list[str],
                     status: str | None, deleted: bool, summary: dict[str, Any] | None = None) -> ObjectRow:
        now = self.clock.now_us()
        row = ObjectRow(str(uuid.uuid4()), self.project_id, head.canonical_id, head.version + 1, head.type,
                        head.key, status, properties, labels, now, deleted_us=now if deleted else None,
                        change_summary=summary)
        self._set_head(row, head)
        return row

    def object_row(self, row_id: str) -> ObjectRow:
        row = self.rows.get(row_id)
        if row is None:
            raise not_found()
        return row

    def get_object(self, row_id: str, resolve_head: bool) -> ObjectRow:
        row = self.object_row(row_id)
        return self.heads[row.canonical_id] if resolve_head and row.supersedes_id is not None else row

    def patch_object(self, row_id: str, properties: dict[str, Any] | None, labels: list[str] | None,
                     replace_labels: bool, status: str | None) -> ObjectRow:
        # The server checks the row it was given, then versions the HEAD: patching a deleted object
        # through an older id (its canonical id, say) revives it.
        if self.object_row(row_id).deleted_us is not None:
            raise bad_request("cannot patch deleted object")
        head = self.heads[self.rows[row_id].canonical_id]
        merged = dict(head.properties)
        for name, value in (properties or {}).items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        if replace_labels:
            new_labels = list(labels or [])
        else:
            new_labels = list(dict.fromkeys([*head.labels, *(labels or [])]))
        return self._new_version(head, properties=merged, labels=new_labels,
                                 status=status if status is not None else head.status, deleted=False,
                                 summary=change_summary(head.properties, merged))

    def delete_object(self, row_id: str) -> ObjectRow:
        if self.object_row(row_id).deleted_us is not None:
            raise bad_request("object already deleted")
        head = self.heads[self.rows[row_id].canonical_id]
        return self._new_version(head, properties=dict(head.properties), labels=list(head.labels),
                                 status=head.status, deleted=True)

    def restore_object(self, row_id: str) -> ObjectRow:
        if self.object_row(row_id).deleted_us is None:
            raise bad_request("object is not deleted")
        head = self.heads[self.rows[row_id].canonical_id]
        return self._new_version(head, properties=dict(head.properties), labels=list(head.labels),
                                 status=head.status, deleted=False)

    def history(self, row_id: str) -> list[ObjectRow]:
        canonical = self.object_row(row_id).canonical_id
        versions = [r for r in self.rows.values() if r.canonical_id == canonical]
        return sorted(versions, key=lambda r: -r.version)

    def edges(self, row_id: str) -> tuple[list[RelRow], list[RelRow]]:
        """Live HEAD relationships whose dst / src is exactly this id (no canonical resolution)."""
        def live(end: str) -> list[RelRow]:
            rows = (self.rel_heads[c] for c in self._rel_by_end[end].get(row_id, ()))
            return sorted((r for r in rows if r.deleted_us is None), key=lambda r: (r.created_us, r.id))
        return live("dst"), live("src")

    def search_objects(self, q: ObjectQuery) -> tuple[list[ObjectRow], int, bool]:
        """One page of HEADs, the total matching (cursor aside) and whether more follow."""
        candidates: list[set[str]] = []
        if q.type is not None:
            candidates.append(self._by["type"].get(q.type, set()))
        elif q.types:
            candidates.append(set().union(*(self._by["type"].get(t, set()) for t in q.types)))
        if q.key is not None:
            candidates.append(self._by["key"].get(q.key, set()))
        if q.label is not None:
            candidates.append(self._by["label"].get(q.label, set()))
        elif q.labels:
            candidates.append(set().union(*(self._by["label"].get(label, set()) for label in q.labels)))
        pool = min(candidates, key=len) if candidates else self.heads.keys()
        rows = [row for row in (self.heads[c] for c in pool) if self._wanted(row, q)]
        rows.sort(key=lambda r: (r.created_us, r.id), reverse=q.order != "asc")
        total = len(rows)
        if q.cursor is not None:
            after = q.cursor
            rows = [r for r in rows if ((r.created_us, r.id) > after if q.order == "asc"
                                        else (r.created_us, r.id) < after)]
        return rows[:q.limit], total, len(rows) > q.limit

    @staticmethod
    def _wanted(row: ObjectRow, q: ObjectQuery) -> bool:
        return ((q.include_deleted or row.deleted_us is None)
                and (q.type is None or row.type == q.type)
                and (q.type is not None or not q.types or row.type in q.types)
                and (q.key is None or row.key == q.key)
                and (q.label is None or q.label in row.labels)
                and (q.label is not None or not q.labels or not set(q.labels).isdisjoint(row.labels))
                and (q.status is None or row.status == q.status)
                and (not q.ids or row.id in q.ids)
                and all(matches(row.properties, f) for f in q.property_filters))

    def text_search(self, query: str, *, every_word: bool, types: list[str], labels: list[str],
                    status: str | None, include_deleted: bool) -> list[tuple[ObjectRow, float]]:
        """HEADs ranked by word overlap with `query`: all words (FTS's websearch AND) or any (hybrid)."""
        wanted = [w for w in dict.fromkeys(words(query))]
        sets = [self._by["word"].get(w, set()) for w in wanted]
        if not sets:
            return []
        pool = set.intersection(*sets) if every_word else set().union(*sets)
        found: list[tuple[ObjectRow, float]] = []
        for canonical in pool:
            row, document = self.heads[canonical], self._words[canonical]
            if ((include_deleted or row.deleted_us is None) and (not types or row.type in types)
                    and (not labels or not set(labels).isdisjoint(row.labels))
                    and (status is None or row.status == status)):
                hits = sum(1 for w in wanted if w in document)
                found.append((row, round(hits / len(wanted), 6)))
        found.sort(key=lambda pair: (-pair[1], -pair[0].created_us, pair[0].id))
        return found

    def tags(self, type_: str | None, prefix: str | None, limit: int) -> list[str]:
        labels = {label for row in self.heads.values() if row.deleted_us is None
                  and (type_ is None or row.type == type_) for label in row.labels}
        found = sorted(label for label in labels if prefix is None or label.startswith(prefix))
        return found[:limit] if limit > 0 else found

    def bulk_update_status(self, ids: list[str], status: str) -> tuple[int, list[dict[str, Any]]]:
        """Sets `status` in place (no new version) on live HEADs named by id, as the server's UPDATE
        does. Every parseable id reports success, updated or not; the count is the truth."""
        results: list[dict[str, Any]] = []
        updated = 0
        for text in ids:
            row_id = parse_uuid(text)
            if row_id is None:
                results.append({"id": text, "success": False, "error": "invalid UUID"})
                continue
            results.append({"id": text, "success": True})
            row = self.rows.get(row_id)
            if row is not None and row.supersedes_id is None and row.deleted_us is None:
                row.status = status
                updated += 1
        return updated, results

    # ------------------------------------------------------------------ relationships

    def _endpoint(self, row_id: str, end: str) -> ObjectRow:
        row = self.everywhere.get(row_id)
        if row is None:
            raise not_found(f"{end}_object_not_found")
        return row

    def create_relationship(self, type_: str, src_id: str, dst_id: str, properties: dict[str, Any] | None,
                            weight: float | None) -> dict[str, Any]:
        """The upsert: returns the relationship's JSON, with `inverse_relationship` when a new one
        made the template pack's inverse too."""
        if src_id == dst_id:
            raise bad_request("self_loop_not_allowed")
        src, dst = self._endpoint(src_id, "src"), self._endpoint(dst_id, "dst")
        for row, end in ((src, "src"), (dst, "dst")):
            if row.deleted_us is not None:
                raise bad_request(f"{end}_object_deleted")
        if src.project_id != self.project_id or dst.project_id != self.project_id:
            raise bad_request("relationship_project_mismatch")
        props = dict(properties or {})
        existing = self._rel_head(type_, src_id, dst_id)
        if existing is None:
            created = self._insert_rel(type_, src_id, dst_id, props, weight)
            out = created.to_json()
            inverse = self._maybe_inverse(type_, src_id, dst_id, props, weight)
            if inverse is not None:
                out["inverse_relationship"] = inverse.to_json()
            return out
        summary = change_summary(existing.properties, props)
        if existing.deleted_us is None and summary is None:
            return existing.to_json()  # weight is not compared, as on the server
        return self._rel_version(existing, props, weight, deleted=False, summary=summary).to_json()

    def _maybe_inverse(self, type_: str, src_id: str, dst_id: str, props: dict[str, Any],
                       weight: float | None) -> RelRow | None:
        inverse = self.inverse_types.get(type_)
        if not inverse:
            return None
        # Types that name each other: only the alphabetically first one makes the inverse (no loop).
        if self.inverse_types.get(inverse) == type_ and type_ > inverse:
            return None
        existing = self._rel_head(inverse, dst_id, src_id)
        if existing is None:
            return self._insert_rel(inverse, dst_id, src_id, dict(props), weight)
        if existing.deleted_us is None:
            return existing
        return self._rel_version(existing, dict(props), weight, deleted=False,
                                 summary=change_summary(existing.properties, props))

    def _rel_head(self, type_: str, src_id: str, dst_id: str) -> RelRow | None:
        canonical = self._rel_by_triple.get((type_, src_id, dst_id))
        return None if canonical is None else self.rel_heads[canonical]

    def _insert_rel(self, type_: str, src_id: str, dst_id: str, props: dict[str, Any],
                    weight: float | None) -> RelRow:
        row_id = str(uuid.uuid4())
        row = RelRow(row_id, self.project_id, row_id, 1, type_, src_id, dst_id, props, weight,
                     self.clock.now_us(), change_summary=change_summary({}, props))
        self.rels[row_id] = self.rel_heads[row_id] = row
        self._rel_by_triple[(type_, src_id, dst_id)] = row_id
        _index(self._rel_by_end["src"], src_id, row_id, add=True)
        _index(self._rel_by_end["dst"], dst_id, row_id, add=True)
        return row

    def _rel_version(self, head: RelRow, props: dict[str, Any], weight: float | None, *, deleted: bool,
                     summary: dict[str, Any] | None) -> RelRow:
        now = self.clock.now_us()
        row = RelRow(str(uuid.uuid4()), self.project_id, head.canonical_id, head.version + 1, head.type,
                     head.src_id, head.dst_id, props, weight, now, deleted_us=now if deleted else None,
                     change_summary=summary)
        head.supersedes_id = row.id
        self.rels[row.id] = self.rel_heads[row.canonical_id] = row
        return row

    def rel_row(self, row_id: str) -> RelRow:
        row = self.rels.get(row_id)
        if row is None:
            raise not_found()
        return row

    def get_relationship(self, row_id: str) -> RelRow:
        row = self.rel_row(row_id)
        if row.deleted_us is not None:
            raise not_found()
        return row

    def patch_relationship(self, row_id: str, properties: dict[str, Any] | None, weight: float | None) -> RelRow:
        current = self.rel_row(row_id)
        if current.deleted_us is not None:
            raise bad_request("cannot patch deleted relationship")
        if self.rel_heads[current.canonical_id] is not current:
            raise bad_request("cannot_patch_non_head_version")
        merged = dict(current.properties)
        for name, value in (properties or {}).items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        summary = change_summary(current.properties, merged)
        if summary is None and (weight is None or weight == current.weight):
            raise bad_request("no_effective_change")
        return self._rel_version(current, merged, weight if weight is not None else current.weight,
                                 deleted=False, summary=summary)

    def delete_relationship(self, row_id: str) -> RelRow:
        head = self.rel_heads[self.rel_row(row_id).canonical_id]
        if head.deleted_us is not None:
            raise bad_request("already_deleted")
        return self._rel_version(head, dict(head.properties), head.weight, deleted=True, summary=None)

    def restore_relationship(self, row_id: str) -> RelRow:
        head = self.rel_heads[self.rel_row(row_id).canonical_id]
        if head.deleted_us is None:
            raise bad_request("relationship_not_deleted")
        return self._rel_version(head, dict(head.properties), head.weight, deleted=False, summary=None)

    def relationship_history(self, row_id: str) -> list[RelRow]:
        canonical = self.rel_row(row_id).canonical_id
        return sorted((r for r in self.rels.values() if r.canonical_id == canonical), key=lambda r: -r.version)

    def search_relationships(self, *, type_: str | None, src_id: str | None, dst_id: str | None,
                             include_deleted: bool, limit: int, cursor: tuple[int, str] | None,
                             order: str) -> tuple[list[RelRow], bool]:
        pools = [self._rel_by_end[end].get(i, set()) for end, i in (("src", src_id), ("dst", dst_id)) if i]
        pool = min(pools, key=len) if pools else self.rel_heads.keys()
        rows = [r for r in (self.rel_heads[c] for c in pool)
                if (type_ is None or r.type == type_) and (src_id is None or r.src_id == src_id)
                and (dst_id is None or r.dst_id == dst_id) and (include_deleted or r.deleted_us is None)]
        descending = order == "desc"  # anything else pages ascending, the relationship default
        rows.sort(key=lambda r: (r.created_us, r.id), reverse=descending)
        if cursor is not None:
            rows = [r for r in rows if ((r.created_us, r.id) < cursor if descending else (r.created_us, r.id) > cursor)]
        return rows[:limit], len(rows) > limit

    # ------------------------------------------------------------------ inspection

    def duplicate_keys(self) -> list[tuple[str, str]]:
        seen = Counter((r.type, r.key) for r in self.heads.values() if r.deleted_us is None and r.key is not None)
        return sorted((t, k) for (t, k), n in seen.items() if k is not None and n > 1)
