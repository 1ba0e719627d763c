"""Read-only reads of the memory database for the session context (`domain/context.py`).

Used by `specactor context` and `specactor hook` in their own short process (a read-only
connection of their own, `open_read_only`), and by the context toolset on the memory store's
reader connections. A project's memories are its project-layer scope only: one contiguous rowid
range (`domain/memory/schema.py`), so nothing of another project or another layer is read.
The newest memories leave knowledge pointers out (the constraints they point at are in the
context already); a prompt's search keeps them, as memory_search does.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from specactor.domain.context import Note
from specactor.domain.memory import scoring
from specactor.domain.memory.schema import SCOPE_SHIFT

SCOPE_SPAN = (1 << SCOPE_SHIFT) - 1


def open_read_only(path: Path, timeout: float) -> sqlite3.Connection | None:
    """A read-only connection (`mode=ro`: nothing is created, migrated or written), or None when
    there is no database file. `timeout` bounds each wait for a lock.

    Raises:
        sqlite3.Error: the file exists but cannot be opened.
    """
    if not path.is_file():
        return None
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout,
                           isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA query_only=1")
    return conn


def _range(conn: sqlite3.Connection, layer: str, key: str) -> tuple[int, int] | None:
    row = conn.execute("SELECT id FROM scopes WHERE layer = ? AND key = ?", (layer, key)).fetchone()
    if row is None:
        return None
    return row[0] << SCOPE_SHIFT, (row[0] << SCOPE_SHIFT) | SCOPE_SPAN


def newest_notes(conn: sqlite3.Connection, layer: str, key: str, limit: int) -> list[Note]:
    """The `limit` newest memories of one scope (a rowid grows with each memory of its scope), no pointers."""
    span = _range(conn, layer, key)
    if span is None:
        return []
    rows = conn.execute("SELECT rowid, id, content FROM memories WHERE rowid BETWEEN ? AND ? AND knowledge_id IS NULL "
                        "AND orphaned = 0 ORDER BY rowid DESC LIMIT ?", (*span, limit))
    return [Note(memory_id=i, content=c, rank=float(r)) for r, i, c in rows]


def lexical_notes(conn: sqlite3.Connection, layer: str, key: str, query: str, threshold: float,
                  limit: int) -> list[Note]:
    """The memories of one scope whose lexical score for `query` reaches `threshold`, best first.

    The score is memory_search's lexical one (`domain/memory/scoring.py`), computed the same way as
    `sqlite/memory_db.search`, which this does not import: a hook process cannot spare its imports.
    """
    span = _range(conn, layer, key)
    words = scoring.query_words(query)
    if span is None or not words:
        return []
    rows = conn.execute("SELECT value FROM counters WHERE name = 'fts_rows'").fetchone()[0]
    hits = [conn.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?",
                         (scoring.phrase(w),)).fetchone()[0] for w in words]
    live = scoring.words_to_match(words, hits, rows, threshold)
    if not live:
        return []
    ideal = scoring.ideal_score(rows, hits)
    cut = scoring.bm25_cut(threshold, ideal) * (1 - 1e-9)
    scored = [(rowid, scoring.lexical_score(bm25, ideal)) for rowid, bm25 in conn.execute(
        "SELECT rowid, -bm25(memory_fts) FROM memory_fts WHERE memory_fts MATCH ? AND rowid BETWEEN ? AND ? "
        "AND bm25(memory_fts) <= ?", (scoring.match_expression(live), *span, -cut))]
    scored = sorted(((r, s) for r, s in scored if s >= threshold and s > 0.0), key=lambda rs: (-rs[1], -rs[0]))
    best = scored[:limit]
    if not best:
        return []
    marks = ", ".join("?" * len(best))
    found = {r: (i, c) for r, i, c in conn.execute(
        f"SELECT rowid, id, content FROM memories WHERE rowid IN ({marks}) AND orphaned = 0", [r for r, _ in best])}
    return [Note(memory_id=found[r][0], content=found[r][1], rank=s, score=s) for r, s in best if r in found]
