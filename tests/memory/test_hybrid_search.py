"""Hybrid search above threshold 0.5 scores by cosine only what the lexical pass found: the results must
be exactly those of scoring every memory, at any threshold."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from specactor.domain.memory import scoring
from specactor.domain.memory.embeddings import pack
from specactor.domain.memory.layers import Layer, scope_key
from specactor.domain.memory.records import NewMemory, SearchSpec
from specactor.sqlite.memory_db import insert_memory, search
from tests.memory.test_search_properties import IDS, SCOPES, WORDS, store

vectors = st.lists(st.floats(-1, 1), min_size=4, max_size=4)
rows = st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), vectors), min_size=1,
                max_size=20)
EDGE = 1e-5  # floor-idf words are left out above threshold 0, moving a lexical score by up to 2.2e-6 each


@given(memories=rows, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
       query_vector=vectors, threshold=st.floats(0.0, 1.0))
def test_hybrid_results_are_those_of_scoring_every_memory(memories: list[tuple[list[str], list[float]]],
                                                          query: str, query_vector: list[float],
                                                          threshold: float) -> None:
    with store() as conn:
        layer: Layer = "user"
        for words, vector in memories:
            insert_memory(conn, NewMemory(" ".join(words), layer, scope_key(layer, IDS), {}, [], {}, pack(vector)))

        def hits(at: float) -> dict[str, float]:
            out = search(conn, SearchSpec(query, SCOPES, 100, at, [], "hybrid", query_vector))
            return {r.memory_id: r.score for r in out.results}

        everything = hits(0.0)  # threshold 0: every memory with a vector is scored by cosine
        got = hits(threshold)
        clear = {m for m, s in everything.items() if abs(s - threshold) > EDGE}
        assert {m for m in got if m in clear} == {m for m in clear if everything[m] >= threshold}


def test_a_partial_word_match_with_a_close_vector_is_found_at_every_threshold_it_reaches() -> None:
    texts = ["cat dog", "cat fish bird", "frog lion", "cat", "wolf bear deer", "dog fish mole"]
    with store() as conn:
        layer: Layer = "user"
        for i, text in enumerate(texts):
            vector = [1.0, 0.1 * i, 0.0, 0.2]
            insert_memory(conn, NewMemory(text, layer, scope_key(layer, IDS), {}, [], {}, pack(vector)))

        def hits(at: float) -> dict[str, float]:
            out = search(conn, SearchSpec("cat fish wolf", SCOPES, 100, at, [], "hybrid", [1.0, 0.0, 0.0, 0.2]))
            return {r.content: r.score for r in out.results}

        everything = hits(0.0)
        assert any(0.5 < s < 0.9 for s in everything.values())  # partial matches lifted by their cosine
        for step in range(50, 100):
            at = step / 100
            expected = {t for t, s in everything.items() if s >= at and abs(s - at) > EDGE}
            assert expected <= set(hits(at)) <= {t for t, s in everything.items() if s >= at - EDGE}, at


def test_lexical_needed_is_what_a_perfect_cosine_leaves_to_the_words() -> None:
    assert abs(scoring.lexical_needed("hybrid", 0.7) - 0.4) < 1e-12
    assert scoring.lexical_needed("hybrid", 0.5) == 0.0 and scoring.lexical_needed("lexical", 0.7) == 0.7
    assert scoring.lexical_needed("semantic", 0.9) == 0.0
