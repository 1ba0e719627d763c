"""The query index (built once per snapshot) answers exactly what a scan of every item answers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from specactor.domain.knowledge.api import STATUSES, TYPES, Item, KnowledgeQueryIn
from specactor.domain.knowledge.query import QueryIndex, query

# Prefixes of one another, case and casefold pairs (ß/SS, İ), digits, stopwords, punctuation.
VOCABULARY = ["data", "database", "Databases", "dat", "Straße", "STRASSE", "İstanbul", "istanbul", "v2", "2024",
              "the", "and", "api-gateway", "x_y", "naïve", "retry", "retries", "re"]
words = st.lists(st.sampled_from(VOCABULARY), max_size=6).map(" ".join)
items = st.lists(st.tuples(words, words, words, st.lists(st.sampled_from(["db", "api", "Data"]), max_size=2),
                           st.sampled_from(STATUSES), st.sampled_from(TYPES),
                           st.sampled_from(["company", "org", "team", "project"])), max_size=12)
queries = st.builds(KnowledgeQueryIn, query=st.one_of(st.none(), words, st.just("  ")),
                    status=st.lists(st.sampled_from(STATUSES), min_size=1, max_size=3),
                    tags=st.lists(st.sampled_from(["db", "api"]), max_size=1),
                    type=st.one_of(st.none(), st.sampled_from(TYPES)),
                    layer=st.one_of(st.none(), st.sampled_from(["company", "team"])),
                    limit=st.integers(1, 5))


def make(k: int, title: str, summary: str, body: str, tags: list[str], status: str, kind: str, layer: str) -> Item:
    return Item(id=f"item-{k}", type=kind, layer=layer, scope=None, title=title, summary=summary,  # type: ignore[arg-type]
                content=body, status=status, severity="warn", tags=tags, metadata={},  # type: ignore[arg-type]
                path=f"company/x/{k}.md", content_hash="h")


@given(items, st.lists(queries, min_size=1, max_size=4))
def test_the_index_answers_every_query_as_the_scan_does(rows: list[tuple[str, str, str, list[str], str, str, str]],
                                                        asked: list[KnowledgeQueryIn]) -> None:
    catalogue = [make(k, *row) for k, row in enumerate(rows)]
    index = QueryIndex(catalogue)
    for args in asked:
        assert index.query(args) == query(catalogue, args)
