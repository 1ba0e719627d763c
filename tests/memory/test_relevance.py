"""Search relevance on a labelled set the tests wrote themselves (tests/memory/relevance_set.py)."""

from __future__ import annotations

from tests.memory.relevance_set import MEMORIES, QUERIES, recall


def test_the_labelled_set_labels_only_memories_it_holds() -> None:
    assert all(relevant <= MEMORIES.keys() for relevant in QUERIES.values())


def test_lexical_search_ranks_the_answers_into_the_top_five() -> None:
    assert recall(k=5) >= 0.95  # measured: 1.00


def test_the_default_threshold_keeps_most_answers() -> None:
    # 0.7 is meant to be strict: it keeps answers that share most of the question's rare words.
    assert recall(k=5, threshold=0.7) >= 0.7  # measured: 0.75
