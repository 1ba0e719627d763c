"""What a memory search's lexical pass reads besides its own matches, remembered per generation and
shared by the memory store's reader threads (`memory_db.lexical_pass`).

A lexical pass reads the count of indexed memories (`fts_rows`), each query word's count of the
memories that hold it (one FTS count a word: the words' idf), and each searched scope's row. All of
them change only with the memories and their tags, and every such change moves the database's
`generation` counter on in its own transaction (migration 2's triggers, of any connection or
process). So what one snapshot read at a generation holds for every snapshot at that generation: a
pass reads the generation first and asks the database only what that generation has not answered.
At 2,000 memories that is ~35 of a lexical pass's ~120 us (a throwaway in-process loop, 2.5 words a
query).

Only the newest generation seen is kept; a pass on an older snapshot gets counts of its own. The
store forgets everything when it opens its database again (`clear`): another file could be at the
same generation. A generation's words and scopes are bounded (`MAX_KEPT`): past it, counts are read, not kept.
"""

from __future__ import annotations

import sqlite3
import threading

from specactor.domain.memory import scoring

MAX_KEPT = 20_000  # words (and scopes) a generation keeps: ~2 MB at most; a team's vocabulary fits


class Counts:
    """One generation's counts, filled as the passes ask. Reader threads share it: each value is read
    from a snapshot at this generation, so two threads filling one key write the same number."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self._rows: int | None = None
        self._hits: dict[str, int] = {}
        self._scopes: dict[tuple[str, str], tuple[int, int] | None] = {}

    def rows(self, conn: sqlite3.Connection) -> int:
        """The count of indexed memories."""
        if self._rows is None:
            self._rows = int(conn.execute("SELECT value FROM counters WHERE name = 'fts_rows'").fetchone()[0])
        return self._rows

    def hits(self, conn: sqlite3.Connection, word: str) -> int:
        """The count of indexed memories holding `word`."""
        found = self._hits.get(word)
        if found is None:
            found = int(conn.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?",
                                     (scoring.phrase(word),)).fetchone()[0])
            if len(self._hits) < MAX_KEPT:
                self._hits[word] = found
        return found

    def scope(self, conn: sqlite3.Connection, layer: str, key: str) -> tuple[int, int] | None:
        """The scope's (id, next_seq), or None when no memory was ever stored in it."""
        at = (layer, key)
        if at in self._scopes:
            return self._scopes[at]
        row = conn.execute("SELECT id, next_seq FROM scopes WHERE layer = ? AND key = ?", at).fetchone()
        found = (int(row[0]), int(row[1])) if row is not None else None
        if len(self._scopes) < MAX_KEPT:
            self._scopes[at] = found
        return found


class Lexicon:
    """The newest generation's `Counts`, shared by the store's readers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._newest: Counts | None = None

    def at(self, generation: int) -> Counts:
        """The counts of `generation`: the shared ones when it is the newest seen, else a pass's own."""
        with self._lock:
            newest = self._newest
            if newest is not None and newest.generation == generation:
                return newest
            counts = Counts(generation)
            if newest is None or generation > newest.generation:
                self._newest = counts
            return counts

    def clear(self) -> None:
        """Forget every count (the store opened its database again: the file may be another)."""
        with self._lock:
            self._newest = None
