"""`find_issue` (the diagnostic path) agrees with msgspec (the fast path) on what fits a Struct.

msgspec decodes tool arguments; only when it refuses does the registry ask `find_issue` why.
If `find_issue` passed a value msgspec refused, the error would fall back to msgspec's vaguer
sentence; if it blamed a value msgspec accepts, it would name the wrong field. So for a set of
Structs covering the field kinds tools use, the two must agree on every value: schema-valid
values, mutations of them, and arbitrary JSON objects.

Kinds where they once disagreed are pinned by the regression tests at the end; the generated values
here leave those out (integral floats, booleans against integer enums, tuples, string formats).
"""

from __future__ import annotations

import enum
import json
from typing import Annotated, Any, Literal

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import Meta

from specactor.protocol.schema import find_issue, issue_from_msgspec, schema_of
from tests.schema_strategies import from_schema


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Inner(msgspec.Struct, forbid_unknown_fields=True):
    x: int
    tags: list[str] = []


class Loose(msgspec.Struct, frozen=True):  # unknown fields are ignored, not refused
    label: str = ""


class Circle(msgspec.Struct, tag=True):
    r: Annotated[float, Meta(ge=0)]


class Square(msgspec.Struct, tag=True):
    side: Annotated[int, Meta(gt=0)]


class Text(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: Annotated[str, Meta(min_length=1, max_length=8, pattern="^[a-z]+$")]
    note: str = ""
    code: Annotated[str, Meta(pattern="[0-9]")] = "0"


class Numbers(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    count: Annotated[int, Meta(ge=0, le=100)]
    ratio: Annotated[float, Meta(gt=0, lt=1)] = 0.5
    big: int = 0
    score: float = 0.0
    positive: Annotated[int, Meta(gt=0)] = 1


class Choices(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    mode: Literal["fast", "slow"]
    level: Level = Level.LOW
    flag: bool = False


class Collections(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    items: Annotated[list[int], Meta(min_length=1, max_length=3)]
    mapping: dict[str, int] = {}
    names: list[Annotated[str, Meta(max_length=3)]] = []
    grid: list[list[float]] = []


class Optionals(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    maybe: str | None = None
    inner: Inner | None = None
    either: int | str = 0
    count: Annotated[int, Meta(ge=1)] | None = None


class Nested(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    inner: Inner
    inners: list[Inner] = []
    loose: Loose = Loose()
    shape: Circle | Square | None = None


STRUCTS: list[type[msgspec.Struct]] = [Text, Numbers, Choices, Collections, Optionals, Nested]
structs = pytest.mark.parametrize("struct", STRUCTS, ids=lambda s: s.__name__)

KEYS = st.sampled_from(["name", "note", "code", "count", "ratio", "big", "score", "positive", "mode", "level",
                        "flag", "items", "mapping", "names", "grid", "maybe", "inner", "either", "x", "tags",
                        "inners", "loose", "label", "shape", "type", "r", "side", "extra"]) | st.text(max_size=4)
SCALARS = (st.none() | st.booleans() | st.integers()
           | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
           | st.text(max_size=6) | st.sampled_from(["fast", "slow", "low", "high", "Circle", "Square", "abc", "7"]))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
                    max_leaves=8)


def msgspec_accepts(struct: type[msgspec.Struct], value: Any) -> bool:
    try:
        msgspec.json.decode(msgspec.json.encode(value), type=struct)
    except msgspec.ValidationError:
        return False
    return True


def assert_agree(struct: type[msgspec.Struct], value: Any) -> None:
    schema = schema_of(struct)
    issue = find_issue(schema, value)
    accepted = msgspec_accepts(struct, value)
    assert (issue is None) == accepted, f"msgspec accepts={accepted}, find_issue={issue} for {value!r}"
    if issue is not None:
        assert issue.details["field"] == issue.path
        assert issue.rule in {"type", "enum", "range", "pattern", "required", "unknown"}
        assert issue.message


def mutate(value: Any, data: st.DataObject) -> Any:
    """`value` with one spot replaced by arbitrary JSON, or one member dropped."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        action = data.draw(st.sampled_from(["descend", "drop", "replace"]))
        out = dict(value)
        if action == "drop":
            del out[key]
        else:
            out[key] = mutate(value[key], data) if action == "descend" else data.draw(JSON)
        return out
    if isinstance(value, list) and value and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        return [*value[:i], mutate(value[i], data), *value[i + 1:]]
    if isinstance(value, dict) and data.draw(st.booleans()):
        return {**value, data.draw(KEYS): data.draw(JSON)}
    return data.draw(JSON)


@pytest.mark.parametrize("struct", STRUCTS, ids=lambda s: s.__name__)
def test_schema_of_is_self_contained(struct: type[msgspec.Struct]) -> None:
    schema = schema_of(struct)
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text
    assert schema["type"] == "object"


@structs
def test_schema_valid_values_pass_both_paths(struct: type[msgspec.Struct]) -> None:
    @given(from_schema(schema_of(struct)))
    def check(value: Any) -> None:
        assert find_issue(schema_of(struct), value) is None
        assert msgspec_accepts(struct, value)

    check()


@structs
def test_both_paths_agree_on_mutated_valid_values(struct: type[msgspec.Struct]) -> None:
    @given(from_schema(schema_of(struct)), st.data())
    def check(valid: Any, data: st.DataObject) -> None:
        assert_agree(struct, mutate(valid, data))

    check()


@structs
def test_both_paths_agree_on_arbitrary_json(struct: type[msgspec.Struct]) -> None:
    @given(st.dictionaries(KEYS, JSON, max_size=6) | JSON)
    def check(value: Any) -> None:
        assert_agree(struct, value)

    check()


def test_issue_from_msgspec_names_the_path_of_msgspec_s_error() -> None:
    try:
        msgspec.json.decode(b'{"inner":{"x":1,"tags":[1]}}', type=Nested)
    except msgspec.ValidationError as err:
        issue = issue_from_msgspec(err)
    assert issue.path == "inner.tags[0]" and issue.details == {"field": "inner.tags[0]"}
    assert issue.message.startswith("'inner.tags[0]': Expected `str`, got `int`")


# ---------------------------------------------------------------------- known disagreements


class IntField(msgspec.Struct):
    n: int


class IntEnum(msgspec.Struct):
    n: Literal[1, 2, 3]


class Pair(msgspec.Struct):
    pair: tuple[int, str]


def disagreement(struct: type[msgspec.Struct], value: dict[str, Any]) -> None:
    assert not msgspec_accepts(struct, value)
    assert find_issue(schema_of(struct), value) is not None, "msgspec refuses it, find_issue passes it"


def test_an_integral_float_for_an_integer_field_is_an_issue() -> None:
    disagreement(IntField, {"n": 2.0})


def test_a_boolean_for_an_integer_enum_is_an_issue() -> None:
    disagreement(IntEnum, {"n": True})


def test_a_tuple_with_a_wrongly_typed_member_is_an_issue() -> None:
    disagreement(Pair, {"pair": ["one", "two"]})


@pytest.mark.parametrize("kind", ["uuid", "date", "datetime"])
def test_a_string_that_breaks_a_format_msgspec_enforces_is_an_issue(kind: str) -> None:
    import datetime
    import uuid

    aware = Annotated[datetime.datetime, msgspec.Meta(tz=True)]
    tp = {"uuid": uuid.UUID, "date": datetime.date, "datetime": aware}[kind]
    struct = msgspec.defstruct(f"With{kind}", [("when", tp)])
    disagreement(struct, {"when": "not a " + kind})


def test_a_tool_input_with_a_naive_datetime_is_refused_at_registration() -> None:
    import datetime

    from specactor.protocol.schema import check_input_type

    with pytest.raises(TypeError, match="tz=True"):
        check_input_type(msgspec.defstruct("Naive", [("when", datetime.datetime)]))
