"""Search properties on the store's own functions (no server): thresholds, limits, order, deletion,
and the score formula against an independent BM25 computation."""

from __future__ import annotations

import math
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from specactor.domain.memory import scoring
from specactor.domain.memory.layers import LAYERS, PRECEDENCE, Identifiers, Layer, scope_key
from specactor.domain.memory.records import NewMemory, SearchSpec
from specactor.sqlite.memory_db import connect, delete_memory, insert_memory, search

WORDS = ["cat", "dog", "fish", "bird", "frog", "lion", "wolf", "bear", "deer", "mole"]
IDS = Identifiers(agent_id="a", user_id="u", session_id="s", project_id="p", team_id="t", org_id="o",
                  company_id="c")
SCOPES = [(layer, scope_key(layer, IDS)) for layer in LAYERS]

memories = st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), st.sampled_from(LAYERS),
                              st.lists(st.sampled_from(["x", "y"]), max_size=2)), min_size=1, max_size=25)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


@contextmanager
def store() -> Iterator[sqlite3.Connection]:
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "m.db", writer=True)
        conn.execute("PRAGMA synchronous=OFF")  # durability is not what these properties are about
        try:
            yield conn
        finally:
            conn.close()


def fill(conn: sqlite3.Connection, rows: list[tuple[list[str], Layer, list[str]]]) -> list[str]:
    ids = []
    for words, layer, tags in rows:
        key = scope_key(layer, IDS)
        ids.append(insert_memory(conn, NewMemory(" ".join(words), layer, key, {}, tags, {})).memory_id)
    return ids


def run(conn: sqlite3.Connection, query: str, *, threshold: float = 0.0, limit: int = 100,
        tags: list[str] | None = None) -> list[tuple[str, Layer, float]]:
    out = search(conn, SearchSpec(query, SCOPES, limit, threshold, tags or []))
    assert len(out.results) <= limit and out.total_count >= len(out.results)
    return [(r.memory_id, r.layer, r.score) for r in out.results]


@given(rows=memories, query=queries, low=st.floats(0, 1), high=st.floats(0, 1))
def test_raising_the_threshold_never_adds_results(rows: list[tuple[list[str], Layer, list[str]]], query: str,
                                                  low: float, high: float) -> None:
    low, high = min(low, high), max(low, high)
    with store() as conn:
        fill(conn, rows)
        loose = {m for m, _, _ in run(conn, query, threshold=low)}
        strict = run(conn, query, threshold=high)
    assert {m for m, _, _ in strict} <= loose
    assert all(high <= score <= 1.0 for _, _, score in strict)


@given(rows=memories, query=queries, limit=st.integers(1, 100), threshold=st.floats(0, 1))
def test_the_limit_is_respected_and_results_come_by_layer_precedence_then_score(
        rows: list[tuple[list[str], Layer, list[str]]], query: str, limit: int, threshold: float) -> None:
    with store() as conn:
        fill(conn, rows)
        results = run(conn, query, threshold=threshold, limit=limit)
        everything = run(conn, query, threshold=threshold, limit=100)
    assert len(results) == min(limit, len(everything))
    keys = [(PRECEDENCE[layer], -score) for _, layer, score in results]
    assert keys == sorted(keys)
    assert results == everything[:len(results)]


@given(rows=memories, query=queries, doomed=st.sets(st.integers(0, 24)), tags=st.lists(st.sampled_from(["x", "y"])))
def test_deleted_memories_never_come_back(rows: list[tuple[list[str], Layer, list[str]]], query: str,
                                          doomed: set[int], tags: list[str]) -> None:
    with store() as conn:
        ids = fill(conn, rows)
        gone = {ids[i] for i in doomed if i < len(ids)}
        for memory_id in gone:
            assert delete_memory(conn, memory_id)
            assert not delete_memory(conn, memory_id)
        fill(conn, rows[:3])  # later writes reuse nothing of what was deleted
        for q in (query, " ".join(WORDS)):
            assert not gone & {m for m, _, _ in run(conn, q, tags=tags)}


@given(rows=memories, query=queries, tags=st.lists(st.sampled_from(["x", "y"]), min_size=1))
def test_a_tag_filter_only_narrows(rows: list[tuple[list[str], Layer, list[str]]], query: str,
                                   tags: list[str]) -> None:
    with store() as conn:
        ids = fill(conn, rows)
        tagged = {m for m, _, _ in run(conn, query, tags=tags)}
        assert tagged <= {m for m, _, _ in run(conn, query)}
        assert tagged == {m for m, (_, _, t) in zip(ids, rows, strict=True) if set(tags) <= set(t)} & {
            m for m, _, _ in run(conn, query)}


def bm25(docs: list[list[str]], query: list[str]) -> list[float]:
    """BM25 as FTS5 computes it (k1 = 1.2, b = 0.75, idf floored at 1e-6), written out independently."""
    n_docs, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    out = []
    for doc in docs:
        total = 0.0
        for word in query:
            hits = sum(word in d for d in docs)
            idf = math.log((n_docs - hits + 0.5) / (hits + 0.5))
            idf = idf if idf > 0 else 1e-6
            tf = doc.count(word)
            total += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / avgdl))
        out.append(total)
    return out


def test_the_score_is_bm25_over_the_ideal_bm25_capped_at_one() -> None:
    docs = [["cat", "dog"], ["cat", "fish", "bird", "frog"], ["dog", "dog", "dog"], ["lion"], ["wolf", "bear"],
            ["deer", "mole", "cat", "wolf", "bear", "lion"]]
    with store() as conn:
        ids = [insert_memory(conn, NewMemory(" ".join(d), "user", scope_key("user", IDS), {}, [], {})).memory_id
               for d in docs]
        for query in (["cat"], ["cat", "dog"], ["dog", "fish", "lion"], ["bear", "mole"]):
            got = {m: s for m, _, s in run(conn, " ".join(query))}
            raw = bm25(docs, query)
            ideal = sum(max(1e-6, math.log((6 - h + 0.5) / (h + 0.5))) for h in
                        (sum(w in d for d in docs) for w in query))
            expected = {ids[i]: min(1.0, r / ideal) for i, r in enumerate(raw) if r > 0}
            assert got.keys() == expected.keys(), query
            for memory_id, score in expected.items():
                assert math.isclose(got[memory_id], score, rel_tol=1e-9), (query, memory_id)


def test_query_words_drop_syntax_and_stopwords_but_never_everything() -> None:
    assert scoring.query_words('What did WE decide about "Postgres"* NEAR(x)?') == ["decide", "postgres", "near", "x"]
    assert scoring.query_words("the and of") == ["the", "and", "of"]
    assert scoring.query_words("__ -- **") == []
    assert scoring.match_expression(["a", "b"]) == '"a" OR "b"'
    assert scoring.lexical_score(5.0, 2.0) == 1.0 and scoring.lexical_score(1.0, 0.0) == 0.0
