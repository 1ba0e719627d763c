"""The numpy path of semantic and hybrid search answers what the pure-Python path answers: the same
memories, in the same order (bar exact ties), with the same scores, whatever was written, deleted or
orphaned between the searches, and whatever the threshold, limit and tag filter."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specactor.domain.memory.api import MemorySearchOut
from specactor.domain.memory.embeddings import pack
from specactor.domain.memory.layers import LAYERS, Layer, scope_key
from specactor.domain.memory.records import NewMemory, SearchSpec
from specactor.domain.memory.scoring import Mode, unit
from specactor.domain.memory.vectors import Matrix, margin
from specactor.sqlite.lexicon import Lexicon
from specactor.sqlite.memory_db import delete_memory, finishes, insert_memory, lexical_pass, search
from specactor.sqlite.vector_cache import VectorCache
from specactor.sqlite.vector_search import unit_query
from tests.memory.test_search_properties import IDS, SCOPES, WORDS, store

SCORE = 1e-6  # the target; the two paths in fact agree to ~1e-15
TIE = 1e-9

unit_floats = st.floats(-1, 1, allow_nan=False, width=32)
vectors = st.one_of(st.lists(unit_floats, min_size=4, max_size=4), st.none(),
                    st.lists(unit_floats, min_size=3, max_size=3))  # none, or another model's length
memories = st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), st.sampled_from(LAYERS),
                              st.lists(st.sampled_from(["x", "y"]), max_size=2), vectors), min_size=1, max_size=30)
specs = st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
                  st.sampled_from(["semantic", "hybrid"]), st.lists(unit_floats, min_size=4, max_size=4),
                  st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 0.5, 0.7])), st.integers(1, 40),
                  st.lists(st.sampled_from(["x", "y"]), max_size=2))


def add(conn: sqlite3.Connection, words: list[str], layer: Layer, tags: list[str],
        vector: list[float] | None) -> str:
    new = NewMemory(" ".join(words), layer, scope_key(layer, IDS), {}, tags, {},
                    pack(vector) if vector is not None else None)
    return insert_memory(conn, new).memory_id


def assert_same(python: MemorySearchOut, numpy: MemorySearchOut) -> None:
    assert numpy.total_count == python.total_count
    assert len(numpy.results) == len(python.results)
    got = [(r.layer, r.score, r.memory_id) for r in numpy.results]
    want = [(r.layer, r.score, r.memory_id) for r in python.results]
    for (layer, score, _), (want_layer, want_score, _) in zip(got, want, strict=True):
        assert layer == want_layer and abs(score - want_score) <= SCORE
    cut = want[-1][1] if want else 0.0  # the last score may be shared with rows past the limit
    clear = {m for _, s, m in want if s > cut + TIE}
    assert clear == {m for _, s, m in got if s > cut + TIE}
    # the order bar exact ties: each row's neighbours with a clearly different score are the same rows
    assert [m for _, s, m in got if not _tied(s, want)] == [m for _, s, m in want if not _tied(s, want)]


def _tied(score: float, rows: list[tuple[str, float, str]]) -> bool:
    return sum(abs(score - s) <= TIE for _, s, _ in rows) > 1


def both(conn: sqlite3.Connection, cache: VectorCache, spec: SearchSpec) -> None:
    assert_same(search(conn, spec, None), search(conn, spec, cache))


@given(rows=memories, spec=specs)
def test_numpy_scores_are_the_python_scores(rows: list[Any], spec: tuple[str, Mode, list[float], float, int,
                                                                            list[str]]) -> None:
    query, mode, vector, threshold, limit, tags = spec
    with store() as conn:
        for row in rows:
            add(conn, *row)
        both(conn, VectorCache(), SearchSpec(query, SCOPES, limit, threshold, tags, mode, vector))


steps = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), st.sampled_from(LAYERS[:3]),
              vectors),
    st.tuples(st.just("delete"), st.integers(0, 1000)),
    st.tuples(st.just("search"), st.lists(unit_floats, min_size=4, max_size=4), st.floats(0.0, 1.0))),
    min_size=1, max_size=30)


@given(ops=steps)
def test_the_cached_matrices_follow_every_add_and_delete(ops: list[tuple[Any, ...]]) -> None:
    cache = VectorCache()
    with store() as conn:
        ids: list[str] = []
        for op in ops:
            if op[0] == "add":
                ids.append(add(conn, op[1], op[2], [], op[3]))
            elif op[0] == "delete" and ids:
                delete_memory(conn, ids.pop(op[1] % len(ids)))
            elif op[0] == "search":
                both(conn, cache, SearchSpec("cat", SCOPES, 10, op[2], [], "semantic", op[1]))
        both(conn, cache, SearchSpec("cat", SCOPES, 50, 0.0, [], "semantic", [1.0, 0.5, 0.25, 0.125]))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dims=st.sampled_from([64, 384, 1536]), threshold=st.floats(0.0, 0.3),
       limit=st.integers(1, 60))
def test_numpy_scores_are_the_python_scores_for_long_real_valued_vectors(seed: int, dims: int, threshold: float,
                                                                         limit: int) -> None:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(dims)  # correlated rows: many scores close together and to the threshold
    layer: Layer = "user"
    with store() as conn:
        for _ in range(200):
            vector = base + rng.standard_normal(dims) * rng.uniform(0.1, 3.0)
            add(conn, ["cat"], layer, [], vector.tolist())
        query = (base + rng.standard_normal(dims)).tolist()
        both(conn, VectorCache(), SearchSpec("cat", SCOPES, limit, threshold, [], "semantic", query))


chunk_specs = st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
                        st.sampled_from(["semantic", "hybrid", "lexical"]),
                        st.one_of(st.lists(unit_floats, min_size=4, max_size=4),
                                  st.lists(unit_floats, min_size=3, max_size=3), st.none()),
                        st.sampled_from([0.0, 0.2, 0.5, 0.7]), st.integers(1, 40),
                        st.lists(st.sampled_from(["x", "y"]), max_size=1), st.booleans())


@given(rows=memories, chunk=st.lists(chunk_specs, min_size=2, max_size=8), later=memories)
def test_a_chunk_scored_together_answers_each_search_as_it_alone(rows: list[Any], chunk: list[Any],
                                                                 later: list[Any]) -> None:
    """The searches of a chunk that scan one scope's vectors are scored by one matrix product: each answer
    is the answer of that search alone, number for number, whether its lexical pass is current, stale
    (memories written since) or not run yet."""
    with store() as conn:
        for row in rows:
            add(conn, *row)
        specs = [SearchSpec(query, SCOPES, limit, threshold, tags, mode, vector)
                 for query, mode, vector, threshold, limit, tags, _ in chunk]
        work = [(spec, lexical_pass(conn, spec) if early else None)
                for spec, (*_, early) in zip(specs, chunk, strict=True)]
        for row in later[:3]:  # the early lexical passes are stale now
            add(conn, *row)
        together = finishes(conn, work, VectorCache(), Lexicon())
        for spec, answer in zip(specs, together, strict=True):
            alone = search(conn, spec, VectorCache())
            assert answer.unwrap() == alone
            assert_same(search(conn, spec, None), alone)


@given(vector=st.lists(st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.just(0.0)), min_size=1, max_size=64))
def test_the_array_unit_query_is_the_python_one_number_for_number(vector: list[float]) -> None:
    assert unit_query(vector).tolist() == unit(vector)


@given(blocks=st.lists(st.integers(1, 40), min_size=1, max_size=4), queries=st.integers(1, 6),
       seed=st.integers(0, 2**32 - 1))
def test_the_dots_of_several_queries_are_each_query_s_dots(blocks: list[int], queries: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    dims = 16
    matrix = Matrix.empty(dims)
    for size in blocks:  # appended block by block, as a growing scope is
        rows = rng.standard_normal((size, dims)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        start = len(matrix)
        matrix = matrix.append(list(range(start + 1, start + size + 1)), [row.tobytes() for row in rows])
    qs = rng.standard_normal((queries, dims))
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    many = matrix.dots_many(qs.astype(np.float32))
    assert many.shape == (len(matrix), queries)
    for j in range(queries):
        exact = matrix.exact(np.arange(len(matrix)), qs[j])
        assert np.all(np.abs(many[:, j] - exact) <= margin(dims))
        assert np.all(np.abs(matrix.dots(qs[j].astype(np.float32)) - exact) <= margin(dims))
