"""The change journal and the config are parsed once per distinct content, never stale."""

from __future__ import annotations

import msgspec
import toons
from hypothesis import given, settings
from hypothesis import strategies as st

from specactor.domain.airsspec import configfile, journal


def test_the_journal_just_rendered_is_read_back_without_parsing_and_other_bytes_are_parsed() -> None:
    first = journal.Journal().advance(["1-a"])
    data = journal.render(first)
    assert journal.parse(data) is first
    second = first.advance(["1-b"])
    other = journal.render(second)
    assert journal.parse(data) == first  # older bytes: parsed afresh, same journal
    assert journal.parse(other) == second
    assert journal.parse(b"not toon at all \xff") is None


def test_a_config_edited_on_disk_is_read_as_edited() -> None:
    before = configfile.parse('[project]\nname = "a"\n', "config.toml", "ws")
    after = configfile.parse('[project]\nname = "b"\n', "config.toml", "ws")
    assert (before.name, after.name) == ("a", "b")
    assert configfile.parse('[project]\nname = "a"\n', "config.toml", "ws") is before


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.one_of(st.text(max_size=12), st.from_regex(r"\A[0-9]{10}-[a-z]{1,8}\Z")),
                         min_size=1, max_size=3), max_size=12))
def test_the_journal_renders_as_toons_renders_it_whatever_the_ids(writes: list[list[str]]) -> None:
    j = journal.Journal()
    for ids in writes:
        j = j.advance(ids)
        assert journal.render(j) == (str(toons.dumps(msgspec.to_builtins(j))) + "\n").encode()
        journal._last = None  # parsed from its bytes, not taken from the memo
        assert journal.parse(journal.render(j)) == j
