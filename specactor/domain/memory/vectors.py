"""Cosine scores of one query against many stored vectors with numpy, equal to the pure-Python path's.

Imported only on the first semantic search (numpy is the optional `vector` extra and costs
~25 ms and ~15 MB to import), never at start-up. Stored vectors are unit length already (`pack`),
so a cosine is a dot product: one float32 matrix-vector product scores a whole scope. float32
sums err by at most `margin(dims)`; `select` rescores in float64 every row whose fate that error
could change (the reported top rows, rows near the threshold), so what it answers — which rows
pass, their order, their scores — is `scoring.unit_cosine`'s to within ~1e-15.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float32]
Doubles = NDArray[np.float64]
Rowids = NDArray[np.int64]
Indices = NDArray[np.intp]
A = TypeVar("A", Floats, Doubles)
MERGE_RATIO = 4  # a block is merged into the one before once it holds a quarter of its rows


def margin(dims: int) -> float:
    """A bound on |float32 dot - exact dot| for unit vectors of `dims` numbers: gamma_n = n*u / (1 - n*u)
    with u = 2**-24 (Higham's bound, any order of summation) times |a|*|b| <= 1 (Cauchy-Schwarz), plus
    the query's own rounding to float32; doubled for headroom (stored vectors are unit only to float32)."""
    u = 2.0 ** -24
    n = dims + 1
    return 2.0 * (n * u / (1.0 - n * u) + u)


def decode(blobs: Sequence[bytes], dims: int) -> Floats:
    """The packed float32 blobs (all `dims` long) as one (len, dims) matrix."""
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dims)


@dataclass(frozen=True)
class Matrix:
    """The vectors of one scope, rows in ascending rowid order, as a few blocks never changed in
    place (a reader holding one keeps its snapshot while another appends): a load is one block, each
    append adds one, and small tail blocks merge (`MERGE_RATIO`), so a scope that grows one memory
    at a time costs O(log n) blocks and each row is copied O(log n) times."""

    dims: int
    rowids: Rowids
    blocks: tuple[Floats, ...]

    @classmethod
    def empty(cls, dims: int) -> Matrix:
        return cls(dims, np.empty(0, dtype=np.int64), ())

    def __len__(self) -> int:
        return int(self.rowids.shape[0])

    def append(self, rowids: Sequence[int], blobs: Sequence[bytes]) -> Matrix:
        """This matrix and the rows `blobs` (rowids above all of ours), as a new Matrix."""
        if not rowids:
            return self
        blocks = [*self.blocks, decode(blobs, self.dims)]
        while len(blocks) >= 2 and blocks[-1].shape[0] * MERGE_RATIO >= blocks[-2].shape[0]:
            last = blocks.pop()
            blocks[-1] = np.concatenate((blocks[-1], last))
        return Matrix(self.dims, np.concatenate((self.rowids, np.asarray(rowids, dtype=np.int64))), tuple(blocks))

    def prefix(self, upto: int) -> Matrix:
        """The rows with rowid <= `upto` (what an older snapshot saw, when nothing was removed since)."""
        keep = int(np.searchsorted(self.rowids, upto, side="right"))
        if keep == len(self):
            return self
        blocks: list[Floats] = []
        left = keep
        for block in self.blocks:
            if left <= 0:
                break
            blocks.append(block[:left])
            left -= block.shape[0]
        return Matrix(self.dims, self.rowids[:keep], tuple(blocks))

    def dots(self, query: Floats) -> Floats:
        """Every row's float32 dot product with `query` (within `margin` of the exact one)."""
        if not self.blocks:
            return np.empty(0, dtype=np.float32)
        parts = [_dot(block, query) for block in self.blocks]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def dots_many(self, queries: Floats) -> Floats:
        """Every row's float32 dot product with each of `queries` (k, dims): a (rows, k) matrix, column j
        within `margin` of the exact dots with query j. One matrix product scores k queries in about a
        third of k `dots` (2,000 x 256, k = 16: ~0.2 against ~0.63 ms), each row read once for all k."""
        if not self.blocks:
            return np.empty((0, queries.shape[0]), dtype=np.float32)
        parts = [block @ queries.T for block in self.blocks]
        out: Floats = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return out

    def exact(self, rows: Indices, query: Doubles) -> Doubles:
        """The dot products of rows `rows` with `query`, in float64: `scoring.unit_cosine` unclipped."""
        out = np.empty(rows.shape[0], dtype=np.float64)
        start = 0
        for block in self.blocks:
            end = start + block.shape[0]
            mine = (rows >= start) & (rows < end)
            if mine.any():
                out[mine] = _dot(block[rows[mine] - start].astype(np.float64), query)
            start = end
        return out

    def index_of(self, rowids: Sequence[int]) -> tuple[Indices, list[int]]:
        """The row indices of those of `rowids` we hold, and the rowids we do not hold."""
        wanted = np.asarray(rowids, dtype=np.int64)
        at = np.searchsorted(self.rowids, wanted)
        held = at < len(self)
        held[held] = self.rowids[at[held]] == wanted[held]
        return at[held].astype(np.intp), wanted[~held].tolist()


def _dot(rows: A, query: A) -> A:
    """Each row's dot product with `query`. numpy 2's `vecdot` runs on this thread (SIMD), where a BLAS
    matrix-vector product wakes BLAS's threads, which then spin: at 2,000 x 256 that burnt 4 ms of
    CPU to save 0.02 ms, and at 100,000 x 384 it was slower (12-24 ms against 5-6 ms)."""
    vecdot = getattr(np, "vecdot", None)  # numpy >= 2.0
    out: A = vecdot(rows, query) if vecdot is not None else rows @ query
    return out


def clip(scores: A) -> A:
    """Scores clipped into [0, 1], as `scoring.unit_cosine` clips."""
    clipped: A = np.clip(scores, 0.0, 1.0)
    return clipped


def select(approx: NDArray[np.floating], rowids: Rowids, exact: Callable[[Indices], Doubles], *,
           threshold: float, limit: int, error: float) -> tuple[int, list[tuple[float, int]]]:
    """How many rows score at least `threshold` and above 0, and the best `limit` of them.

    Args:
        approx: every row's score, each within `error` of its exact score.
        rowids: every row's rowid (ties in score go to the higher rowid, as the search orders).
        exact: the exact scores of the rows at the given indices.

    Returns:
        The count, and up to `limit` (exact score, rowid) pairs, best first.
    """
    floor = max(threshold, 0.0)
    maybe = np.flatnonzero(approx >= floor - error)
    if not maybe.size:
        return 0, []
    sure_mask = approx[maybe] - error > floor
    sure, doubt = maybe[sure_mask], maybe[~sure_mask]
    if doubt.size:  # near the threshold: the exact score decides
        scores = exact(doubt)
        doubt = doubt[(scores >= threshold) & (scores > 0.0)]
    inside = np.concatenate((sure, doubt)) if doubt.size else sure
    count = int(inside.size)
    if limit <= 0 or not count:
        return count, []
    if count > limit:  # every true top row scores (approx) within 2·error of the limit-th best approx
        near = approx[inside]
        kth = np.partition(near, count - limit)[count - limit]
        inside = inside[near >= kth - 2.0 * error]
    scores = exact(inside)
    order = np.lexsort((-rowids[inside], -scores))[:limit]
    return count, [(float(scores[i]), int(rowids[inside[i]])) for i in order]
