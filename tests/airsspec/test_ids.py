"""Spec ids and slugs, as AirsSpec's ADR-003 defines them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specactor.domain.airsspec.ids import SPEC_ID_PATTERN, is_spec_id, new_spec_id, slugify


@pytest.mark.parametrize(("title", "slug"), [
    ("User Authentication", "user-authentication"),
    ("Fix Bug #123!", "fix-bug-123"),
    ("snake_case_title", "snake-case-title"),
    ("Multiple   Spaces", "multiple-spaces"),
    ("---title---", "title"),
    ("日本語", "untitled"),
    ("", "untitled"),
])
def test_a_title_slugs_as_the_reference_table_says(title: str, slug: str) -> None:
    assert slugify(title) == slug


def test_a_long_title_is_cut_to_fifty_characters_without_a_trailing_dash() -> None:
    slug = slugify("a" * 49 + " b" + "c" * 20)
    assert len(slug) <= 50 and not slug.endswith("-") and slug == "a" * 49


@given(title=st.text(), seconds=st.integers(min_value=0, max_value=10**12))
def test_every_generated_id_matches_the_id_grammar(title: str, seconds: int) -> None:
    spec_id = new_spec_id(title, seconds, lambda _: False)
    assert is_spec_id(spec_id) and re.search(SPEC_ID_PATTERN, spec_id)
    assert ".." not in spec_id and "/" not in spec_id and "\\" not in spec_id


@given(title=st.text(), taken=st.integers(min_value=1, max_value=12))
def test_a_taken_id_gets_a_numbered_suffix_that_still_matches_the_grammar(title: str, taken: int) -> None:
    used: set[str] = set()
    for _ in range(taken + 1):
        spec_id = new_spec_id(title, 1737734400, used.__contains__)
        assert spec_id not in used and is_spec_id(spec_id)
        used.add(spec_id)


@pytest.mark.parametrize("value", ["", "abc", "123", "123-", "-abc", "123-abc-", "123-ABC", "123-a/b", "123-a..b/..",
                                   "../1-a", "123-abc\n", "1-" + "a" * 51, "\uff11\uff12\uff13-abc"])
def test_a_string_outside_the_grammar_is_not_an_id(value: str) -> None:
    assert not is_spec_id(value)
