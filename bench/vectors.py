"""Semantic memory_search scoring, measured through the store's own search function (no server).

    python -m bench.vectors [--small 2000x256] [--large 100000x384] [--samples 200]

Fills a scratch store with random unit vectors in one scope, then times `memory_db.search` in a
read transaction on a reader connection, as the memory store actor runs it: CPU ms per search
(`time.process_time`, every thread of the process: BLAS's too) at the small size, with numpy and
with the pure-Python path; wall-clock P50/P95 at the large size with numpy; and the largest
difference between the two paths' scores. Queries are noisy copies of stored vectors, so the
best cosines are ~0.8-0.9: `threshold 0.7` is the tool's default, `threshold 0` makes every
memory pass (the costliest case: all are counted). The first search (numpy's import and the
matrix load) is timed apart as `first_ms`; `large_after_write` is a search right after an add
(the matrix grows) and right after a delete (it is loaded again). Prints one JSON object; ~50 s.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from specactor.domain.memory.api import MemorySearchOut
from specactor.domain.memory.embeddings import pack
from specactor.domain.memory.layers import LAYERS, Identifiers, scope_key
from specactor.domain.memory.records import NewMemory, SearchSpec
from specactor.domain.memory.scoring import Mode
from specactor.sqlite.memory_db import connect, delete_memory, in_read_tx, insert_memory, search
from specactor.sqlite.vector_cache import VectorCache

IDS = Identifiers(agent_id="a", user_id="u", session_id="s", project_id="p", team_id="t", org_id="o", company_id="c")
SCOPES = [(layer, scope_key(layer, IDS)) for layer in LAYERS]  # every layer, as the tool searches by default
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def fill(db: Path, memories: int, dims: int, seed: int) -> Any:
    """`memories` random unit vectors in the project layer; returns them (a numpy array)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((memories, dims)).astype(np.float32)
    conn = connect(db, writer=True)
    conn.execute("PRAGMA synchronous=OFF")  # a scratch store: durability is not measured here
    key = scope_key("project", IDS)
    conn.execute("BEGIN")
    for i in range(memories):
        text = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), 6))
        insert_memory(conn, NewMemory(text, "project", key, {"projectId": "p"}, [], {}, pack(matrix[i].tolist())))
    conn.execute("COMMIT")
    conn.close()
    return matrix


def queries(matrix: Any, count: int, seed: int) -> list[list[float]]:
    """Noisy copies of stored vectors: the best cosine ~0.85, as a close paraphrase scores."""
    import numpy as np

    rng = np.random.default_rng(seed + 1)
    rows = matrix[rng.integers(0, matrix.shape[0], count)]
    noisy = rows / np.linalg.norm(rows, axis=1, keepdims=True) + rng.standard_normal(rows.shape) * (
        0.6 / np.sqrt(matrix.shape[1]))
    return [list(map(float, q)) for q in noisy]


def timed(conn: sqlite3.Connection, run: Callable[[sqlite3.Connection], MemorySearchOut]) -> tuple[float, float]:
    """CPU and wall-clock milliseconds of one search in a read transaction."""
    cpu, wall = time.process_time(), time.perf_counter()
    in_read_tx(conn, run)
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def spec(vector: list[float], threshold: float, mode: Mode = "semantic") -> SearchSpec:
    return SearchSpec("alpha", SCOPES, 10, threshold, [], mode, vector)


def measure(db: Path, qs: list[list[float]], threshold: float, cache: VectorCache | None,
            mode: Mode = "semantic") -> dict[str, Any]:
    conn = connect(db, writer=False)
    try:
        first_ms = timed(conn, partial(search, spec=spec(qs[0], threshold, mode), vectors=cache))[1]
        cpu, wall = [], []
        for q in qs:
            c_ms, w_ms = timed(conn, partial(search, spec=spec(q, threshold, mode), vectors=cache))
            cpu.append(c_ms)
            wall.append(w_ms)
    finally:
        conn.close()
    wall.sort()
    return {"cpu_ms_mean": round(statistics.fmean(cpu), 4), "cpu_ms_median": round(statistics.median(cpu), 4),
            "wall_ms_p50": round(wall[len(wall) // 2], 3), "wall_ms_p95": round(wall[int(len(wall) * 0.95)], 3),
            "first_ms": round(first_ms, 1), "searches": len(qs)}


def max_difference(db: Path, qs: list[list[float]]) -> float:
    """The largest |numpy score - Python score| over every memory (threshold 0, limit 100), and the
    same memories in the same order."""
    conn = connect(db, writer=False)
    worst = 0.0
    try:
        cache = VectorCache()
        for q in qs:
            wide = SearchSpec("alpha", SCOPES, 100, 0.0, [], "semantic", q)
            fast = in_read_tx(conn, partial(search, spec=wide, vectors=cache))
            slow = in_read_tx(conn, partial(search, spec=wide))
            assert fast.total_count == slow.total_count
            assert [r.memory_id for r in fast.results] == [r.memory_id for r in slow.results]
            worst = max([worst, *(abs(a.score - b.score) for a, b in zip(fast.results, slow.results, strict=True))])
    finally:
        conn.close()
    return worst


def after_writes(db: Path, qs: list[list[float]], dims: int) -> dict[str, float]:
    """Wall ms of a search right after a memory_add (the matrix grows by the new row: adds in a row)
    and right after a memory_delete (the scope's matrix is loaded again), medians over `qs`."""
    import numpy as np

    writer, reader = connect(db, writer=True), connect(db, writer=False)
    cache = VectorCache()
    key = scope_key("project", IDS)
    rng = np.random.default_rng(0)
    added, deleted, ids = [], [], []
    try:
        in_read_tx(reader, partial(search, spec=spec(qs[0], 0.7), vectors=cache))  # the first load
        for q in qs:
            ids.append(insert_memory(writer, NewMemory("new", "project", key, {"projectId": "p"}, [], {},
                                                       pack(rng.standard_normal(dims).tolist()))).memory_id)
            added.append(timed(reader, partial(search, spec=spec(q, 0.7), vectors=cache))[1])
        for q in qs[:5]:
            delete_memory(writer, ids.pop())
            deleted.append(timed(reader, partial(search, spec=spec(q, 0.7), vectors=cache))[1])
    finally:
        writer.close()
        reader.close()
    return {"search_after_add_ms_median": round(statistics.median(added), 3),
            "search_after_delete_ms_median": round(statistics.median(deleted), 1)}


def size(text: str) -> tuple[int, int]:
    memories, dims = text.lower().split("x")
    return int(memories), int(dims)


def run(small: tuple[int, int] = (2000, 256), large: tuple[int, int] = (100_000, 384), samples: int = 200,
        seed: int = 15) -> dict[str, Any]:
    """The figures: numpy and Python CPU per search at `small`, numpy P95 at `large`, the paths' difference."""
    out: dict[str, Any] = {"small": f"{small[0]}x{small[1]}", "large": f"{large[0]}x{large[1]}"}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "small.db"
        qs = queries(fill(db, *small, seed), samples, seed)
        for threshold in (0.7, 0.0):
            cache = VectorCache()
            out[f"small_numpy_t{threshold}"] = measure(db, qs, threshold, cache)
            out[f"small_python_t{threshold}"] = measure(db, qs[:20], threshold, None)
        # hybrid at its default threshold: only the memories with the query's word ("alpha", in about
        # 30 % of them) are scored by cosine
        out["small_hybrid_numpy_t0.7"] = measure(db, qs, 0.7, VectorCache(), "hybrid")
        out["small_hybrid_python_t0.7"] = measure(db, qs[:20], 0.7, None, "hybrid")
        out["small_max_abs_diff"] = max_difference(db, qs[:20])
        db = Path(tmp) / "large.db"
        started = time.perf_counter()
        qs = queries(fill(db, *large, seed), samples, seed)
        out["large_fill_s"] = round(time.perf_counter() - started, 1)
        for threshold in (0.7, 0.0):
            out[f"large_numpy_t{threshold}"] = measure(db, qs, threshold, VectorCache())
        out["large_python_t0.7"] = measure(db, qs[:2], 0.7, None)
        out["large_after_write"] = after_writes(db, qs[:20], large[1])
        out["large_max_abs_diff"] = max_difference(db, qs[:3])
    out["small_cpu_ms"] = out["small_numpy_t0.7"]["cpu_ms_mean"]
    out["large_p95_ms"] = out["large_numpy_t0.7"]["wall_ms_p95"]
    out["max_abs_diff"] = max(out["small_max_abs_diff"], out["large_max_abs_diff"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vectors", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=size, default=(2000, 256))
    parser.add_argument("--large", type=size, default=(100_000, 384))
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.small, args.large, args.samples), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
