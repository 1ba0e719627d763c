"""The finiteness check a typed tool's answer gets (`protocol/finite.py`): the check planned from the
output type answers what walking the whole value answers, for every value, of its type's shape or not."""

from __future__ import annotations

import math
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from specactor.domain.memory.api import MemorySearchOut, SearchHit
from specactor.protocol.finite import checker, finite


class Hit(msgspec.Struct):
    name: str
    score: float
    tags: list[str] = []


class Tree(msgspec.Struct):
    weight: float
    children: list[Tree] = []


class Out(msgspec.Struct):
    hits: list[Hit]
    total: int
    meta: dict[str, Any]
    pair: tuple[int, float]
    maybe: float | None
    nested: dict[str, list[float]]
    tree: Tree | None = None
    words: list[str] = []


floats = st.one_of(st.floats(), st.sampled_from([math.inf, -math.inf, math.nan, 0.5]))
anything = st.recursive(st.one_of(floats, st.integers(), st.text(max_size=3), st.none()),
                        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                st.dictionaries(st.text(max_size=2), inner, max_size=3)),
                        max_leaves=8)
hits = st.builds(Hit, st.text(max_size=3), floats, st.lists(st.text(max_size=2), max_size=2))
trees = st.recursive(st.builds(Tree, floats), lambda inner: st.builds(Tree, floats, st.lists(inner, max_size=3)),
                     max_leaves=6)
outs = st.builds(Out, st.lists(hits, max_size=4), st.integers(), st.dictionaries(st.text(max_size=2), anything,
                                                                               max_size=3),
                 st.tuples(st.integers(), floats), st.one_of(st.none(), floats),
                 st.dictionaries(st.text(max_size=2), st.lists(floats, max_size=3), max_size=3),
                 st.one_of(st.none(), trees))
# values not of the shape their type says (a handler's bug) where the type may hold a float: the planned
# check walks them as `finite` does (a field typed to hold no float, `words`, is taken at its word)
misshapen = st.builds(Out, anything, st.integers(), st.dictionaries(st.text(max_size=2), anything, max_size=2),
                      st.one_of(st.tuples(st.integers(), floats), anything), anything, anything, anything)
search_outs = st.builds(MemorySearchOut, st.lists(st.builds(SearchHit, st.text(max_size=3), st.text(max_size=3),
                                                             st.just("user"), floats), max_size=10),
                        st.integers(0, 100), st.just(["user"]))


@given(outs)
def test_the_planned_check_answers_what_walking_answers(value: Out) -> None:
    assert checker(Out)(value) is finite(value)


@given(misshapen)
def test_a_value_not_of_its_types_shape_is_walked(value: Out) -> None:
    assert checker(Out)(value) is finite(value)


@given(search_outs)
def test_a_memory_search_s_answer_is_checked_by_its_scores(value: MemorySearchOut) -> None:
    assert checker(MemorySearchOut)(value) is all(math.isfinite(hit.score) for hit in value.results)


def test_a_type_that_holds_no_float_is_never_walked() -> None:
    class Words(msgspec.Struct):
        words: list[str]
        count: int

    assert checker(Words)(Words(["a"], 1)) is True
    assert checker(Out)(Out([Hit("a", math.nan)], 0, {}, (0, 0.0), None, {})) is False
    assert checker(Out)(Out([], 0, {"x": [1, {"y": math.inf}]}, (0, 0.0), None, {})) is False
    assert checker(Out)(Out([], 0, {}, (0, 0.0), None, {}, Tree(1.0, [Tree(-math.inf)]))) is False
