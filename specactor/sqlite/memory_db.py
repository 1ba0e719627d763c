"""The memory database: SQLite statements and transactions the memory store actor runs on its
worker threads (`specactor.actors.memory_store`). Nothing here touches the event loop; every
function takes the connection it works on.
"""

from __future__ import annotations

import functools
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import outcome

from specactor.domain.knowledge import sync as plans
from specactor.domain.knowledge.api import Item, Problem, SyncStats
from specactor.domain.knowledge.sync import SyncApply, SyncRecord
from specactor.domain.memory import embeddings as emb
from specactor.domain.memory import scoring
from specactor.domain.memory.api import MemoryEntry, MemorySearchOut, SearchHit
from specactor.domain.memory.layers import PRECEDENCE, Identifiers, Layer, scope_key
from specactor.domain.memory.records import NewMemory, SearchSpec
from specactor.domain.memory.schema import SCOPE_SHIFT, pending
from specactor.sqlite.lexicon import Counts, Lexicon
from specactor.sqlite.vector_cache import VectorCache, bump_changed
from specactor.sqlite.vector_search import cosines, scan, shared_dots, unit_query
from specactor.sqlite.wal_mode import use_wal

if TYPE_CHECKING:
    from specactor.domain.memory.vectors import Doubles, Floats, Matrix

T = TypeVar("T")
SCOPE_SPAN = (1 << SCOPE_SHIFT) - 1


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def now_iso() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"


# ---------------------------------------------------------------------- SQLite (worker threads only)


def connect(path: Path, *, writer: bool, existing: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), usable from any one thread at
    a time. The writer's also switches the database to WAL and migrates it, safely while another
    process opens the same database (each waits for the other, up to the 30 s busy timeout).
    With `existing` (a reader only), a missing file is an error rather than an empty database.

    Raises:
        ValueError: the database's schema is newer than this code.
        sqlite3.Error: the database cannot be opened, switched or migrated.
    """
    if existing and not writer:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=30.0)
    else:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    try:
        if writer:
            use_wal(conn)
            _migrate(conn)
        conn.execute("PRAGMA synchronous=FULL")  # durable: a reply is only sent after the WAL is on disk
        if not writer:
            conn.execute("PRAGMA query_only=1")
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    if not pending(conn.execute("PRAGMA user_version").fetchone()[0]):
        return  # a version only goes up: current now is current for good
    # The version is read again inside the write transaction: another process may have migrated
    # since, and its migrations must not run twice. Every pending step and its version number
    # commit together, or not at all.
    conn.execute("BEGIN IMMEDIATE")
    try:
        for version, sql in pending(conn.execute("PRAGMA user_version").fetchone()[0]):
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> Iterator[str]:
    """`script`'s statements one at a time (`executescript` would commit the open transaction)."""
    statement = ""
    for piece in script.split(";"):
        statement += piece + ";"
        if sqlite3.complete_statement(statement):  # not a ";" inside a string or a trigger's body
            if statement.strip("; \t\n"):
                yield statement
            statement = ""
    if statement.strip("; \t\n"):
        raise ValueError(f"a migration ends in an incomplete statement: {statement[:80]!r}")


def scope_id(conn: sqlite3.Connection, layer: str, key: str, *, create: bool) -> int | None:
    if create:
        conn.execute("INSERT INTO scopes (layer, key) VALUES (?, ?) ON CONFLICT DO NOTHING", (layer, key))
    row = conn.execute("SELECT id FROM scopes WHERE layer = ? AND key = ?", (layer, key)).fetchone()
    return int(row[0]) if row else None


def insert_memory(conn: sqlite3.Connection, new: NewMemory) -> MemoryEntry:
    scope = scope_id(conn, new.layer, new.scope_key, create=True)
    assert scope is not None
    seq = conn.execute("UPDATE scopes SET next_seq = next_seq + 1 WHERE id = ? RETURNING next_seq - 1",
                       (scope,)).fetchone()[0]
    rowid = (scope << SCOPE_SHIFT) | seq
    memory_id = new.memory_id or f"mem_{uuid.uuid4().hex}"
    stamp = now_iso()
    tags = list(dict.fromkeys(new.tags))
    conn.execute("INSERT INTO memories (rowid, id, layer, content, tags, metadata, identifiers, knowledge_id, "
                 "embedding, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (rowid, memory_id, new.layer, new.content, _json(tags), _json(new.metadata), _json(new.identifiers),
                  new.knowledge_id, new.embedding, new.created_at or stamp, stamp))
    conn.executemany("INSERT INTO memory_tags (tag, memory) VALUES (?, ?)", [(t, rowid) for t in tags])
    conn.execute("INSERT INTO memory_fts (rowid, content) VALUES (?, ?)", (rowid, new.content))
    conn.execute("UPDATE counters SET value = value + 1 WHERE name = 'fts_rows'")
    return MemoryEntry(memory_id=memory_id, content=new.content, layer=new.layer, identifiers=new.identifiers,
                       tags=tags, metadata=new.metadata, created_at=new.created_at or stamp, updated_at=stamp)


def _unindex(conn: sqlite3.Connection, rowid: int, content: str) -> None:
    conn.execute("INSERT INTO memory_fts (memory_fts, rowid, content) VALUES ('delete', ?, ?)", (rowid, content))
    conn.execute("UPDATE counters SET value = value - 1 WHERE name = 'fts_rows'")


def remove_row(conn: sqlite3.Connection, rowid: int, content: str, orphaned: int) -> None:
    if not orphaned:  # orphaned pointers already left the index (and the vector cache)
        _unindex(conn, rowid, content)
        bump_changed(conn, rowid)
    conn.execute("DELETE FROM memory_tags WHERE memory = ?", (rowid,))
    conn.execute("DELETE FROM memories WHERE rowid = ?", (rowid,))


def delete_memory(conn: sqlite3.Connection, memory_id: str) -> bool:
    row = conn.execute("SELECT rowid, content, orphaned FROM memories WHERE id = ?", (memory_id,)).fetchone()
    if row is None:
        return False
    remove_row(conn, *row)
    return True


def _tag_filter(tags: Sequence[str]) -> tuple[str, list[Any]]:
    if not tags:
        return "", []
    marks = ", ".join("?" * len(tags))
    return (f" AND rowid IN (SELECT memory FROM memory_tags WHERE tag IN ({marks}) GROUP BY memory "
            f"HAVING count(*) = ?)", [*tags, len(tags)])


@dataclass(frozen=True)
class ScopePass:
    """One scope's lexical finds: its id, `next_seq` and rowid range, and each find's lexical score."""

    layer: Layer
    scope: int
    next_seq: int
    lo: int
    hi: int
    lexical: dict[int, float]


@dataclass(frozen=True)
class LexicalPass:
    """What a search needs of the database before its query's vector: the lexical pass over each scope,
    and the `generation` it saw (schema migration 2), so that a `finish` in a later read transaction
    knows whether it sees the same rows."""

    generation: int
    scopes: list[ScopePass]


def generation(conn: sqlite3.Connection) -> int:
    """The count of changes to the memories and their tags (triggers, in each change's transaction)."""
    row = conn.execute("SELECT value FROM counters WHERE name = 'generation'").fetchone()
    return int(row[0]) if row else -1


def lexical_pass(conn: sqlite3.Connection, spec: SearchSpec, lexicon: Lexicon | None = None, *,
                 current: int | None = None) -> LexicalPass:
    """The first half of `search`, which needs no query vector: each scope's row and lexical finds.
    With `lexicon` (the store's), the counts the pass reads besides its matches come from there when
    another pass read them at this generation already (`sqlite/lexicon.py`). `current`: the transaction's
    generation, when the caller read it already."""
    at = generation(conn) if current is None else current
    counts = lexicon.at(at) if lexicon is not None else Counts(at)
    words = scoring.query_words(spec.query) if spec.mode != "semantic" else []
    rows = counts.rows(conn) if words else 0
    hits = [counts.hits(conn, w) for w in words]
    live = scoring.words_to_match(words, hits, rows, spec.threshold)
    ideal = scoring.ideal_score(rows, hits)
    tag_sql, tag_args = _tag_filter(sorted(set(spec.tags)))
    cut = scoring.bm25_cut(scoring.lexical_needed(spec.mode, spec.threshold), ideal) * (1 - 1e-9)
    passes: list[ScopePass] = []
    for layer, key in spec.scopes:
        row = counts.scope(conn, layer, key)
        if row is None:
            continue
        scope, next_seq = row
        lo, hi = scope << SCOPE_SHIFT, (scope << SCOPE_SHIFT) | SCOPE_SPAN
        lexical: dict[int, float] = {}
        if live and spec.mode != "semantic":
            for rowid, bm25 in conn.execute(
                    "SELECT rowid, -bm25(memory_fts) FROM memory_fts WHERE memory_fts MATCH ? AND rowid BETWEEN ? "
                    f"AND ? AND bm25(memory_fts) <= ?{tag_sql}", (scoring.match_expression(live), lo, hi, -cut,
                                                                   *tag_args)):
                lexical[rowid] = scoring.lexical_score(bm25, ideal)
        passes.append(ScopePass(layer, scope, next_seq, lo, hi, lexical))
    return LexicalPass(at, passes)


def search(conn: sqlite3.Connection, spec: SearchSpec, vectors: VectorCache | None = None,
           lexicon: Lexicon | None = None) -> MemorySearchOut:
    """The memories of `spec.scopes` scoring at least `spec.threshold`, by layer precedence then score.

    With `vectors` (the store's cache) and numpy installed, a scope's cosines come from one matrix-vector
    product (`domain/memory/vectors.py`); otherwise each stored vector is scored in Python. Both
    answer the same memories, in the same order, with the same scores (to ~1e-15).
    """
    return _rank(conn, spec, lexical_pass(conn, spec, lexicon), vectors)  # one transaction: one generation


def finish(conn: sqlite3.Connection, spec: SearchSpec, lex: LexicalPass,
           vectors: VectorCache | None = None, lexicon: Lexicon | None = None, *,
           current: int | None = None) -> MemorySearchOut:
    """The second half of `search`: the cosines, the fusion and the answer, on `lex`, the lexical pass.

    `lex` may come from an earlier read transaction (its lexical pass ran while the query's vector was
    being fetched): when the memories changed since (`generation`; `current` when the caller read it in
    this transaction already), the whole search runs again here.
    """
    current = generation(conn) if current is None else current
    return _rank(conn, spec, _current_pass(conn, spec, lex, lexicon, current, {}), vectors)


def _pruned(spec: SearchSpec) -> bool:
    """Hybrid at a threshold above 0.5: a memory the lexical pass did not find cannot reach it, so only
    the lexical pass's finds are scored by cosine (the same results, without a scan of every vector)."""
    return spec.mode == "hybrid" and scoring.lexical_needed(spec.mode, spec.threshold) > 0.0


@dataclass(frozen=True)
class _Scored:
    """A search's unit query (`vector_search.unit_query`) and, per scope it looks at, the matrix and (when it
    scans every vector) that query's dots with it, computed with the other searches of its chunk
    (`_score_together`). A pruned search looks only at the scopes where its lexical pass found rows."""

    query: Doubles
    scopes: dict[int, tuple[Matrix, Floats | None]]


def _rank(conn: sqlite3.Connection, spec: SearchSpec, lex: LexicalPass,
          vectors: VectorCache | None, scored: _Scored | None = None) -> MemorySearchOut:
    """The cosines, the fusion and the answer, on `lex`, a lexical pass of this read transaction's data."""
    lexical_only = spec.mode == "lexical"
    tags = sorted(set(spec.tags))
    pruned = _pruned(spec)
    found: list[tuple[int, float, int]] = []
    total = 0
    # Stored vectors are unit length (emb.pack), so with the query's scaled once each cosine is a dot product.
    query = (scoring.unit(spec.query_vector) if scored is None and spec.query_vector is not None and not lexical_only
             else None)
    for part in lex.scopes:
        layer, lexical, lo, hi = part.layer, part.lexical, part.lo, part.hi
        semantic: dict[int, float] = {}
        if scored is not None:  # the matrices and dots from the chunk's pass over them (`_score_together`)
            seen = scored.scopes.get(part.scope)
            if seen is not None and not pruned:
                count, best = scan(conn, spec, seen[0], scored.query, lexical, tags, lo, hi, seen[1])
                total += count
                found += [(PRECEDENCE[layer], -score, -rowid) for score, rowid in best]
                continue
            if seen is not None:  # pruned: the cosines of the lexical pass's finds only
                semantic = cosines(seen[0], scored.query, lexical)
            matrix = None
        else:
            matrix = (vectors.matrix(conn, part.scope, part.next_seq, len(query))
                      if vectors is not None and query and (lexical or not pruned) else None)
        if matrix is not None and query is not None and not pruned:
            count, best = scan(conn, spec, matrix, query, lexical, tags, lo, hi)
            total += count
            found += [(PRECEDENCE[layer], -score, -rowid) for score, rowid in best]
            continue
        if matrix is not None and query is not None:  # pruned: the cosines of the lexical pass's finds only
            semantic = cosines(matrix, query, lexical)
        elif query is not None and (lexical or not pruned):
            tag_sql, tag_args = _tag_filter(tags)
            where, args = (("rowid IN (SELECT value FROM json_each(?))", [_json(sorted(lexical))]) if pruned
                           else (f"rowid BETWEEN ? AND ?{tag_sql}", [lo, hi, *tag_args]))
            for rowid, blob in conn.execute(f"SELECT rowid, embedding FROM memories WHERE {where} AND "
                                            "embedding IS NOT NULL AND orphaned = 0", args):
                semantic[rowid] = scoring.unit_cosine(query, emb.unpack(blob).tolist())
        for rowid in lexical.keys() | semantic.keys():
            score = scoring.fuse(spec.mode, lexical.get(rowid, 0.0), semantic.get(rowid, 0.0))
            if score >= spec.threshold and score > 0.0:
                found.append((PRECEDENCE[layer], -score, -rowid))
                total += 1
    found.sort()
    chosen = [-r for _, _, r in found[:spec.limit]]
    by_row = {r[0]: r for r in conn.execute(
        f"SELECT rowid, id, content, layer, tags FROM memories WHERE rowid IN ({', '.join('?' * len(chosen))})",
        chosen)} if chosen else {}
    if vectors is not None and len(by_row) < len(chosen):  # a row the cache holds is gone: not our write's
        vectors.clear()
        return search(conn, spec, None)
    results = [SearchHit(memory_id=by_row[-r][1], content=by_row[-r][2], layer=by_row[-r][3], score=-s,
                         tags=msgspec.json.decode(by_row[-r][4])) for _, s, r in found[:spec.limit]]
    return MemorySearchOut(results=results, total_count=total,
                           searched_layers=list(dict.fromkeys(layer for layer, _ in spec.scopes)))


def lexical_passes(conn: sqlite3.Connection, specs: Sequence[SearchSpec],
                   lexicon: Lexicon | None = None) -> list[outcome.Outcome[LexicalPass]]:
    """`lexical_pass` of each of `specs`, in the caller's read transaction (`MemoryStoreActor.read`); each its
    own outcome."""
    return _each(conn, [functools.partial(lexical_pass, spec=spec, lexicon=lexicon) for spec in specs])


def finishes(conn: sqlite3.Connection, work: Sequence[tuple[SearchSpec, LexicalPass | None]],
             vectors: VectorCache | None = None, lexicon: Lexicon | None = None,
             ) -> list[outcome.Outcome[MemorySearchOut]]:
    """Each search of `work` (`finish` on its lexical pass, or the whole `search` without one), in the caller's
    read transaction; each its own outcome. The transaction's generation is read once for all of them, and
    the searches that scan one scope's vectors score them with one matrix product (`_score_together`)."""
    current = generation(conn)
    semantic: dict[tuple[tuple[Layer, str], ...], LexicalPass] = {}  # one pass for the semantic searches of a scope
    passes = _each(conn, [
        functools.partial(_current_pass, spec=spec, lex=lex, lexicon=lexicon, current=current, semantic=semantic)
        for spec, lex in work])
    together = _score_together(conn, work, passes, vectors) if vectors is not None and len(work) > 1 else {}
    out: list[outcome.Outcome[MemorySearchOut]] = []
    for i, ((spec, _), lex) in enumerate(zip(work, passes, strict=True)):
        if isinstance(lex, outcome.Value):
            out += _each(conn, [functools.partial(_rank, spec=spec, lex=lex.value, vectors=vectors,
                                                  scored=together.get(i))])
        else:
            out.append(outcome.Error(lex.error))  # type: ignore[attr-defined]
    return out


def _current_pass(conn: sqlite3.Connection, spec: SearchSpec, lex: LexicalPass | None, lexicon: Lexicon | None,
                  current: int, semantic: dict[tuple[tuple[Layer, str], ...], LexicalPass]) -> LexicalPass:
    """`lex` when it is of this transaction's generation; otherwise the search's lexical pass, run now. A
    semantic search's pass finds no words: it is its scopes' rows only, the same for every semantic search of
    those scopes in the transaction (`semantic`, filled as they come; nothing changes a pass once made)."""
    if lex is not None and lex.generation == current:
        return lex
    if spec.mode != "semantic":
        return lexical_pass(conn, spec, lexicon, current=current)
    key = tuple(spec.scopes)
    found = semantic.get(key)
    if found is None:
        found = semantic[key] = lexical_pass(conn, spec, lexicon, current=current)
    return found


def _score_together(conn: sqlite3.Connection, work: Sequence[tuple[SearchSpec, LexicalPass | None]],
                    passes: Sequence[outcome.Outcome[LexicalPass]], vectors: VectorCache) -> dict[int, _Scored]:
    """For each search (by index) that scans every vector of a scope, its unit query and its dots with each
    scope's matrix, the searches of one matrix scored together (`vector_search.shared_dots`). A search
    whose matrix cannot be had here is left out: it gets it, or its error, on its own in `_rank`."""
    asked: list[tuple[int, int, Matrix, Doubles]] = []  # search, scope, matrix, unit query
    queries: dict[int, Doubles] = {}
    matrices: dict[tuple[int, int, int], Matrix | None] = {}  # (scope, next_seq, dims): one look each

    def matrix_of(scope: int, next_seq: int, dims: int) -> Matrix | None:
        key = (scope, next_seq, dims)
        if key not in matrices:
            matrices[key] = vectors.matrix(conn, scope, next_seq, dims)
        return matrices[key]

    pruned: list[tuple[int, int, Matrix]] = []  # search, scope, matrix: the lexical finds' cosines only
    for i, ((spec, _), lex) in enumerate(zip(work, passes, strict=True)):
        if (spec.query_vector is None or not spec.query_vector or spec.mode == "lexical"
                or not isinstance(lex, outcome.Value)):
            continue
        dims, only_finds = len(spec.query_vector), _pruned(spec)
        try:
            mine = [(part.scope, matrix_of(part.scope, part.next_seq, dims)) for part in lex.value.scopes
                    if part.lexical or not only_finds]
        except Exception:  # the search meets it again in `_rank`, and fails alone there
            continue
        if any(matrix is None for _, matrix in mine):  # no numpy: every search scores in Python
            return {}
        queries[i] = query = unit_query(spec.query_vector)
        if only_finds:
            pruned += [(i, scope, matrix) for scope, matrix in mine if matrix is not None]
        else:
            asked += [(i, scope, matrix, query) for scope, matrix in mine if matrix is not None]
    dots = shared_dots([(matrix, query) for _, _, matrix, query in asked])
    together = {i: _Scored(query, {}) for i, query in queries.items()}
    for (i, scope, matrix, _), d in zip(asked, dots, strict=True):
        together[i].scopes[scope] = (matrix, d)
    for i, scope, matrix in pruned:
        together[i].scopes[scope] = (matrix, None)
    return together


def _each(conn: sqlite3.Connection, fns: Sequence[Callable[[sqlite3.Connection], T]]) -> list[outcome.Outcome[T]]:
    out: list[outcome.Outcome[T]] = []
    for fn in fns:
        try:
            out.append(outcome.Value(fn(conn)))
        except Exception as exc:  # one search's failure spoils no other's
            out.append(outcome.Error(exc))
    return out


# ---------------------------------------------------------------------- sync state (worker threads only)


class SyncConflict(Exception):
    pass


# What the sync state's revision says of the knowledge_items table: only `apply_sync` writes that
# table, and it bumps the revision in the same transaction, so rows read at one revision (and
# committed) are the rows at that revision, whichever process wrote them.
ItemsAt = tuple[int, dict[str, plans.Stored]]
EntriesAt = tuple[int, dict[str, Any]]  # the same for the manifest entries


def load_sync(conn: sqlite3.Connection, *, items: bool = True, known: ItemsAt | None = None) -> SyncRecord:
    """The sync state; with `items`, the items the last sync recorded (`known`'s when its revision is current)."""
    revision, commit, at, stats, result, failures = conn.execute(
        "SELECT revision, last_commit, last_sync_at, stats, last_result, failures FROM sync_state").fetchone()
    stored: dict[str, plans.Stored] = {}
    if items and known is not None and known[0] == revision:
        stored = known[1]
    elif items:
        stored = {i: plans.Stored(i, p, h) for i, p, h in conn.execute("SELECT id, path, hash FROM knowledge_items")}
    return SyncRecord(revision, commit, at, msgspec.json.decode(stats, type=SyncStats),
                      msgspec.json.decode(result or "{}"), msgspec.json.decode(failures, type=list[Problem]), stored)


def apply_sync(conn: sqlite3.Connection, job: SyncApply, known: EntriesAt | None = None) -> EntriesAt:
    """Write the plan's pointers, orphans and the new sync state; returns the new revision and the
    manifest entries (`known`'s, when it holds the entries of the revision this applies to and the
    plan changes no item)."""
    record = load_sync_header(conn)
    if record[0] != job.base_revision:
        raise SyncConflict("another sync finished first; run sync_now again")
    stamp = now_iso()
    for item, digest in job.plan.upserts:
        _upsert_pointer(conn, item, job.company_id, stamp, job.vectors.get(item.id))
        conn.execute("INSERT OR REPLACE INTO knowledge_items (id, path, hash, entry) VALUES (?, ?, ?, ?)",
                     (item.id, item.path, digest, _json(plans.manifest_entry(item))))
    for item_id in job.plan.orphans:
        row = conn.execute("SELECT rowid, content, orphaned, metadata FROM memories WHERE knowledge_id = ?",
                           (item_id,)).fetchone()
        if row is not None and not row[2]:
            _unindex(conn, row[0], row[1])
            bump_changed(conn, row[0])
            meta = msgspec.json.decode(row[3])
            meta.setdefault("knowledgePointer", {})["isOrphaned"] = True
            conn.execute("UPDATE memories SET orphaned = 1, metadata = ?, updated_at = ? WHERE rowid = ?",
                         (_json(meta), stamp, row[0]))
        conn.execute("DELETE FROM knowledge_items WHERE id = ?", (item_id,))
    for late in job.backfill:  # unless the pointer was rewritten or orphaned since it was read
        if conn.execute("UPDATE memories SET embedding = ? WHERE rowid = ? AND content = ? AND embedding IS NULL "
                        "AND orphaned = 0", (late.vector, late.rowid, late.content)).rowcount:
            bump_changed(conn, late.rowid)
    p = job.plan
    stats = msgspec.json.decode(record[1], type=SyncStats)
    stats.avg_sync_duration_ms = (stats.avg_sync_duration_ms * stats.total_syncs + job.duration_ms) / (
        stats.total_syncs + 1)
    stats.total_syncs += 1
    stats.total_items_synced += p.added + p.updated
    result = {"added": p.added, "updated": p.updated, "deleted": p.deleted, "unchanged": p.unchanged}
    conn.execute("UPDATE sync_state SET revision = revision + 1, last_commit = ?, last_sync_at = ?, stats = ?, "
                 "last_result = ?, failures = ?", (job.commit, stamp, _json(stats), _json(result),
                                                   _json(p.failures)))
    if known is not None and known[0] == record[0] and not p.upserts and not p.orphans:
        return record[0] + 1, known[1]
    return record[0] + 1, {i: msgspec.json.decode(e) for i, e in conn.execute("SELECT id, entry FROM knowledge_items")}


def load_sync_header(conn: sqlite3.Connection) -> tuple[int, str]:
    row = conn.execute("SELECT revision, stats FROM sync_state").fetchone()
    return int(row[0]), str(row[1])


def unembedded_pointers(conn: sqlite3.Connection, limit: int) -> list[plans.Unembedded]:
    """Up to `limit` live pointer memories without a vector (their sync could not reach the endpoint)."""
    return [plans.Unembedded(*row) for row in conn.execute(
        "SELECT rowid, knowledge_id, content FROM memories WHERE knowledge_id IS NOT NULL AND embedding IS NULL "
        "AND orphaned = 0 ORDER BY rowid LIMIT ?", (limit,))]


def _upsert_pointer(conn: sqlite3.Connection, item: Item, company_id: str, stamp: str,
                    embedding: bytes | None = None) -> None:
    idents = plans.pointer_identifiers(item, company_id)
    layer = plans.pointer_layer(item)
    row = conn.execute("SELECT rowid, content, orphaned, id, created_at FROM memories WHERE knowledge_id = ?",
                       (item.id,)).fetchone()
    if row is not None:
        remove_row(conn, row[0], row[1], row[2])
    insert_memory(conn, NewMemory(
        content=plans.pointer_content(item), layer=layer,
        scope_key=scope_key(layer, msgspec.convert(idents, Identifiers)), identifiers=idents, tags=item.tags,
        metadata=plans.pointer_metadata(item, stamp), embedding=embedding, knowledge_id=item.id,
        memory_id=row[3] if row else None, created_at=row[4] if row else None))


def close_all(conns: Sequence[sqlite3.Connection]) -> None:
    for conn in conns:
        conn.close()


def in_read_tx(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN")  # one consistent snapshot for every statement of the read
    try:
        return fn(conn)
    finally:
        conn.execute("COMMIT")


def read_each(conn: sqlite3.Connection, fns: Sequence[Callable[[sqlite3.Connection], Any]]) -> list[Any]:
    """Run each of `fns` in a read transaction of its own; their outcomes, in order."""
    results: list[Any] = []
    for fn in fns:
        try:
            results.append(outcome.Value(in_read_tx(conn, fn)))
        except Exception as exc:
            results.append(outcome.Error(exc))
    return results


def group_commit(conn: sqlite3.Connection, fns: Sequence[Callable[[sqlite3.Connection], Any]]) -> list[Any]:
    """Run `fns` in one transaction, each in a savepoint; one commit (one fsync) for all of them."""
    results: list[Any] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for fn in fns:
            conn.execute("SAVEPOINT op")
            try:
                results.append(outcome.Value(fn(conn)))
                conn.execute("RELEASE op")
            except Exception as exc:
                conn.execute("ROLLBACK TO op")
                conn.execute("RELEASE op")
                results.append(outcome.Error(exc))
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, Exception):
            return [outcome.Error(exc)] * len(fns)
        raise
    return results

