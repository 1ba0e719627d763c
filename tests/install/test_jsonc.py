"""The JSONC editor: edits touch only their own member or item; every other byte stays."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specactor.install.jsonc import Document, JsoncError, has_comments, parse, strip_comments

SERVER = {"command": "specactor", "args": ["serve"]}

ODD_FILES = [
    # comments everywhere, a trailing comma, a comment on the last member's line
    '{\n  // servers I use\n  "mcpServers": {\n    "other": {"command": "x"}, // keep\n  },\n  /* end */\n}\n',
    # tabs, CRLF line endings
    '{\r\n\t"mcpServers": {\r\n\t\t"other": {"command": "x"}\r\n\t}\r\n}\r\n',
    # everything on one line
    '{"mcpServers": {"other": {"command": "x"}}, "z": [1, 2]}',
    # four-space indent, the closing brace on the last member's line
    '{\n    "a": 1,\n    "mcpServers": {\n        "other": {"command": "x"}}}\n',
    # an empty object holding only a comment
    '{\n  "mcpServers": { /* none yet */ }\n}\n',
    # unicode, escapes and a URL with // inside a string
    '{"$schema": "https://example.com/x.json", "name": "caf\\u00e9 \u2603", "mcpServers": {}}\n',
]


@pytest.mark.parametrize("text", ODD_FILES)
def test_setting_then_removing_a_member_gives_back_the_same_bytes(text: str) -> None:
    doc = Document(text)
    had = doc.get(("mcpServers",)) != {}
    assert doc.set(("mcpServers", "specactor"), SERVER)
    assert strip_comments(doc.text)["mcpServers"]["specactor"] == SERVER
    before = strip_comments(text)
    after = strip_comments(doc.text)
    del after["mcpServers"]["specactor"]
    assert after == before
    doc.remove(("mcpServers", "specactor"))
    if had:
        assert doc.text == text
    else:  # an empty object comes back as `{}` (or keeps its comment)
        assert strip_comments(doc.text) == before


@pytest.mark.parametrize("text", ODD_FILES)
def test_setting_an_equal_value_again_changes_nothing(text: str) -> None:
    doc = Document(text)
    doc.set(("mcpServers", "specactor"), SERVER)
    once = doc.text
    assert not doc.set(("mcpServers", "specactor"), dict(reversed(list(SERVER.items()))))
    assert doc.text == once


def test_new_members_follow_the_files_indentation_and_line_endings() -> None:
    doc = Document('{\r\n\t"a": 1\r\n}\r\n')
    doc.set(("mcp", "specactor"), {"command": ["specactor", "serve"]})
    assert doc.text == ('{\r\n\t"a": 1,\r\n\t"mcp": {\r\n\t\t"specactor": {\r\n\t\t\t"command": ["specactor", "serve"]'
                        '\r\n\t\t}\r\n\t}\r\n}\r\n')


def test_a_new_member_goes_after_the_comment_that_ends_the_last_line() -> None:
    doc = Document('{\n  "a": 1 // one\n}\n')
    doc.set(("b",), 2)
    assert doc.text == '{\n  "a": 1, // one\n  "b": 2\n}\n'


def test_array_items_are_appended_and_removed_with_their_line() -> None:
    text = '{\n  "instructions": [\n    "a.md", // mine\n    "b.md"\n  ]\n}\n'
    doc = Document(text)
    doc.append(("instructions",), "c.md")
    assert strip_comments(doc.text)["instructions"] == ["a.md", "b.md", "c.md"]
    doc.remove(("instructions",), 2)
    assert doc.text == text
    doc.remove(("instructions",), 0)
    assert doc.text == '{\n  "instructions": [\n    "b.md"\n  ]\n}\n'


def test_prune_removes_the_objects_an_edit_left_empty_and_stops_at_a_full_one() -> None:
    doc = Document('{"keep": 1, "hooks": {"Stop": []}}')
    doc.prune(("hooks", "Stop"))
    assert doc.text == '{"keep": 1}'


def test_a_path_through_a_non_object_is_an_error() -> None:
    with pytest.raises(JsoncError, match="not an object"):
        Document('{"mcpServers": []}').set(("mcpServers", "specactor"), SERVER)


@pytest.mark.parametrize(("text", "where"), [('{"a": 1,, }', "line 1, column 9"), ('{\n  "a" 1\n}', "line 2, column 7"),
                                             ("{/* open", "line 1, column 2"), ('{"a": 1} x', "line 1, column 10")])
def test_text_that_is_not_json_is_an_error_naming_line_and_column(text: str, where: str) -> None:
    with pytest.raises(JsoncError, match=where):
        parse(text)


def test_comments_are_found_outside_strings_only() -> None:
    assert not has_comments('{"url": "https://x/*y*/"}')
    assert has_comments('{"url": "x"} // note')


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                      max_size=3), max_leaves=8)


@given(st.dictionaries(st.text(max_size=6).filter(lambda k: k != "mcpServers"), json_values, max_size=4),
       st.sampled_from([None, 2, 4, "\t"]), json_values)
def test_any_json_file_keeps_its_bytes_through_a_set_and_remove(base: dict[str, object], indent: int | str | None,
                                                                value: object) -> None:
    text = json.dumps({**base, "mcpServers": {"other": 1}}, indent=indent)
    doc = Document(text)
    doc.set(("mcpServers", "specactor"), value)
    assert json.loads(doc.text) == {**base, "mcpServers": {"other": 1, "specactor": value}}
    doc.remove(("mcpServers", "specactor"))
    assert doc.text == text
