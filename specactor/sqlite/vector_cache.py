"""The memory store's vectors in memory: per scope, a numpy matrix kept in step with the database.

Owned by the memory store actor and used on its reader threads (`memory_db.search`). A scope's
matrix is checked against the reader's snapshot on every use, through two numbers the writes
keep in the database itself, so writes of any connection or process are seen: the scope's
`next_seq` (a memory only ever gets a rowid above every earlier one of its scope, so a higher
one means rows to append) and its `vectors.changed:<scope>` counter (bumped in the transaction
that deletes, orphans or re-embeds a row of the scope: the matrix is loaded again). A snapshot
older than the matrix uses the matrix's prefix, or a private load when rows were removed since.
Without numpy (the optional `vector` extra) `matrix` answers None and the search scores in Python.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specactor.domain.memory.schema import SCOPE_SHIFT

if TYPE_CHECKING:
    from specactor.domain.memory.vectors import Matrix

SCOPE_SPAN = (1 << SCOPE_SHIFT) - 1


def changed_counter(scope: int) -> str:
    """The name, in the `counters` table, of the count of removals and re-embeddings in `scope`."""
    return f"vectors.changed:{scope}"


def bump_changed(conn: sqlite3.Connection, rowid: int) -> None:
    """Record, in the write's own transaction, that a row of `rowid`'s scope lost or changed its vector."""
    conn.execute("INSERT INTO counters (name, value) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET value = value + 1",
                 (changed_counter(rowid >> SCOPE_SHIFT),))


@dataclass(frozen=True)
class _Entry:
    matrix: Matrix
    upto: int  # the highest rowid the matrix has looked at: rows above it are new
    changed: int  # the scope's `vectors.changed` counter when it was loaded


class VectorCache:
    """The scopes' matrices, one per (scope, dimensions), shared by the store's reader threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # loads of one store are rare and short; one lock is enough
        self._entries: dict[tuple[int, int], _Entry] = {}
        self._numpy: bool | None = None
        self.loads = 0  # full loads, appends not counted (what the tests and bench look at)

    def clear(self) -> None:
        """Forget every matrix (the store opened its database again)."""
        with self._lock:
            self._entries.clear()

    def available(self) -> bool:
        """Whether numpy can be imported (tried once; the first call pays for the import)."""
        if self._numpy is None:
            try:
                import specactor.domain.memory.vectors  # noqa: F401
            except ImportError:
                self._numpy = False
            else:
                self._numpy = True
        return self._numpy

    def matrix(self, conn: sqlite3.Connection, scope: int, next_seq: int, dims: int) -> Matrix | None:
        """The vectors of `scope` with `dims` numbers, as of `conn`'s open read transaction (in which
        the caller read `next_seq`), excluding orphaned pointers; None without numpy."""
        if not self.available():
            return None
        from specactor.domain.memory.vectors import Matrix

        key = (scope, dims)
        upto = (scope << SCOPE_SHIFT) | (next_seq - 1)
        row = conn.execute("SELECT value FROM counters WHERE name = ?", (changed_counter(scope),)).fetchone()
        changed = int(row[0]) if row else 0
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.changed == changed:
                if upto <= entry.upto:  # the same rows, or an older snapshot's first ones
                    return entry.matrix if upto == entry.upto else entry.matrix.prefix(upto)
                grown = _Entry(entry.matrix.append(*_rows(conn, scope, dims, entry.upto + 1, upto)), upto, changed)
                self._entries[key] = grown
                return grown.matrix
            fresh = _Entry(Matrix.empty(dims).append(*_rows(conn, scope, dims, scope << SCOPE_SHIFT, upto)),
                           upto, changed)
            self.loads += 1
            if entry is None or changed > entry.changed:  # never replace a newer matrix by an older snapshot's
                self._entries[key] = fresh
            return fresh.matrix


def _rows(conn: sqlite3.Connection, scope: int, dims: int, lo: int, hi: int) -> tuple[list[int], list[bytes]]:
    rowids: list[int] = []
    blobs: list[bytes] = []
    hi = min(hi, (scope << SCOPE_SHIFT) | SCOPE_SPAN)
    for rowid, blob in conn.execute("SELECT rowid, embedding FROM memories WHERE rowid BETWEEN ? AND ? AND "
                                    "orphaned = 0 AND length(embedding) = ? ORDER BY rowid", (lo, hi, dims * 4)):
        rowids.append(rowid)
        blobs.append(blob)
    return rowids, blobs
