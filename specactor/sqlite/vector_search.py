"""One scope's semantic scores from its cached matrix (`vector_cache`), on a reader thread, for
`memory_db.search`: every vector at once in semantic and (threshold <= 0.5) hybrid mode, the lexical
finds' only in hybrid mode above it. numpy is imported here on first use, never at start-up.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from specactor.domain.memory import scoring
from specactor.domain.memory.records import SearchSpec

if TYPE_CHECKING:
    from specactor.domain.memory.vectors import Doubles, Floats, Matrix


def cosines(matrix: Matrix, query: Sequence[float] | Doubles, rowids: Iterable[int]) -> dict[int, float]:
    """The exact cosines of those of `rowids` with a vector in `matrix` (`scoring.unit_cosine`'s, to ~1e-15)."""
    import numpy as np

    from specactor.domain.memory import vectors as vec

    at = matrix.index_of(sorted(rowids))[0]
    scores = vec.clip(matrix.exact(at, np.asarray(query, dtype=np.float64)))
    return dict(zip(matrix.rowids[at].tolist(), scores.tolist(), strict=True))


def unit_query(vector: Sequence[float]) -> Doubles:
    """`scoring.unit(vector)` as a float64 array, number for number (the same hypot, the same divisions)."""
    import numpy as np

    norm = math.hypot(*vector)
    query: Doubles = np.asarray(vector, dtype=np.float64)
    return query / norm if norm else np.zeros_like(query)


def shared_dots(queries: Sequence[tuple[Matrix, Doubles]]) -> list[Floats]:
    """Each (matrix, unit query)'s float32 dots (`Matrix.dots`), the queries of one matrix scored by one
    matrix product (`Matrix.dots_many`): a chunk's searches of one scope read its vectors once."""
    import numpy as np

    out: list[Floats | None] = [None] * len(queries)
    by_matrix: dict[int, list[int]] = {}
    for i, (matrix, _) in enumerate(queries):
        by_matrix.setdefault(id(matrix), []).append(i)
    for members in by_matrix.values():
        matrix = queries[members[0]][0]
        if len(members) == 1:
            out[members[0]] = matrix.dots(queries[members[0]][1].astype(np.float32))
            continue
        both = matrix.dots_many(np.array([queries[i][1] for i in members], dtype=np.float32))
        for column, i in enumerate(members):
            out[i] = both[:, column]
    return [dots for dots in out if dots is not None]


def scan(conn: sqlite3.Connection, spec: SearchSpec, matrix: Matrix, query: Sequence[float] | Doubles,
          lexical: dict[int, float], tags: list[str], lo: int, hi: int,
          dots: Floats | None = None) -> tuple[int, list[tuple[float, int]]]:
    """One scope's count and best `spec.limit` (score, rowid) pairs, in semantic or (unpruned) hybrid mode,
    scoring every vector at once (`dots`: the float32 dots already, `shared_dots`'); the rows with words but
    no vector score as the Python path scores them."""
    import numpy as np

    from specactor.domain.memory import vectors as vec

    rows: vec.Indices | None = None  # None: every row (no tag filter)
    if tags:
        marks = ", ".join("?" * len(tags))
        tagged = [r for (r,) in conn.execute(
            f"SELECT memory FROM memory_tags WHERE tag IN ({marks}) AND memory BETWEEN ? AND ? GROUP BY memory "
            "HAVING count(*) = ? ORDER BY memory", [*tags, lo, hi, len(tags)])]
        rows = matrix.index_of(tagged)[0]
    q64 = np.asarray(query, dtype=np.float64)
    # Unclipped below 0: a row whose cosine is clearly negative is clearly out (score 0), and is not
    # rescored as one within the float32 error of the threshold 0 would be.
    every = matrix.dots(q64.astype(np.float32)) if dots is None else dots
    dots = every if rows is None else every[rows]
    approx: Any = np.minimum(dots, 1.0)
    lex: vec.Doubles | None = None
    rest: list[tuple[float, int]] = []  # rows with words and no vector of the query's length
    if spec.mode == "hybrid":
        lex = np.zeros(dots.shape[0], dtype=np.float64)
        at, missing = matrix.index_of(list(lexical))
        # `rows` is sorted and holds every row the lexical pass found
        where = at if rows is None else np.searchsorted(rows, at)
        lex[where] = [lexical[int(r)] for r in matrix.rowids[at]]
        approx = np.where(lex > 0.0, (lex + vec.clip(dots)) / 2.0, approx / 2.0)
        rest = [(scoring.fuse("hybrid", lexical[r], 0.0), r) for r in missing]

    def exact(picked: vec.Indices) -> vec.Doubles:
        scores = vec.clip(matrix.exact(picked if rows is None else rows[picked], q64))
        return (lex[picked] + scores) / 2.0 if lex is not None else scores

    count, best = vec.select(approx, matrix.rowids if rows is None else matrix.rowids[rows], exact,
                             threshold=spec.threshold, limit=spec.limit, error=vec.margin(matrix.dims))
    passing = [(s, r) for s, r in rest if s >= spec.threshold and s > 0.0]
    return count + len(passing), best + passing
