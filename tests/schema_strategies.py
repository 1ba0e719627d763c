"""Hypothesis strategies for the JSON Schemas our own registry publishes.

`from_schema(schema)` draws values that validate against `schema`. It covers the keywords that
`specactor.protocol.schema.schema_of` emits for msgspec types (type, enum, const, anyOf/oneOf,
properties/required/additionalProperties, items/prefixItems, the length, item and numeric bounds,
pattern) and refuses any other validation keyword, so a new kind of field fails loudly here
instead of being fuzzed with the wrong values. Every drawn value is also checked with
`jsonschema`, the same validator the tests use on the wire, so a gap in this generator shows up
as a health-check failure, never as a false accusation of the server.

It replaces `hypothesis-jsonschema`, whose use of hypothesis internals broke with hypothesis
6.170.12 (docs/decisions.md): this module uses only hypothesis's public strategies.
"""

from __future__ import annotations

import math
from typing import Any

import jsonschema
from hypothesis import strategies as st

# Keywords that never constrain a value.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema", "$comment", "x-mcp-header",
                          "deprecated", "readOnly", "writeOnly", "format"})
_KNOWN = _ANNOTATIONS | frozenset({
    "type", "enum", "const", "anyOf", "oneOf", "properties", "required", "additionalProperties", "items",
    "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minProperties", "maxProperties"})

# Small on purpose: tool arguments are short, and big values only slow each example down.
_MAX_TEXT = 12
_MAX_ITEMS = 4

_KEYS = st.text(max_size=6)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=6)


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid against `schema`.

    Raises:
        ValueError: the schema uses a keyword this generator does not understand.
    """
    validator = jsonschema.Draft202012Validator(schema)
    return _strategy(schema).filter(validator.is_valid)


def _strategy(schema: dict[str, Any] | bool) -> st.SearchStrategy[Any]:
    if schema is True or schema == {}:
        return JSON_VALUES
    if schema is False:
        return st.nothing()
    assert isinstance(schema, dict)
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"from_schema does not handle the keyword(s) {sorted(unknown)} in {schema!r}")
    for key in ("anyOf", "oneOf"):
        if key in schema:
            base = {k: v for k, v in schema.items() if k != key}
            return st.one_of([_strategy({**base, **option}) for option in schema[key]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind is None:
        return JSON_VALUES
    if isinstance(kind, list):
        return st.one_of([_strategy({**schema, "type": k}) for k in kind])
    return _BY_TYPE[kind](schema)


def _string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    lo = schema.get("minLength", 0)
    hi = schema.get("maxLength", max(lo, _MAX_TEXT))
    if "pattern" not in schema:
        return st.text(min_size=lo, max_size=hi)
    # JSON Schema patterns match anywhere (a search), as `from_regex` without fullmatch draws. Its
    # `$` is ECMA's, the very end; Python's also matches before a final newline, which no JSON
    # Schema validator in another language (nor our server) accepts.
    pattern = schema["pattern"]
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + "\\Z"
    return st.from_regex(pattern).filter(lambda s: lo <= len(s) <= hi)


def _bounds(schema: dict[str, Any]) -> tuple[float | None, float | None, bool, bool]:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if ex_lo is not None and (lo is None or ex_lo >= lo):
        lo = ex_lo
    if ex_hi is not None and (hi is None or ex_hi <= hi):
        hi = ex_hi
    return lo, hi, lo is not None and lo == ex_lo, hi is not None and hi == ex_hi


def _integer(schema: dict[str, Any]) -> st.SearchStrategy[int]:
    lo, hi, ex_lo, ex_hi = _bounds(schema)
    low = None if lo is None else (math.floor(lo) + 1 if ex_lo or lo != math.floor(lo) else int(lo))
    high = None if hi is None else (math.ceil(hi) - 1 if ex_hi or hi != math.ceil(hi) else int(hi))
    if low is not None and high is not None and low > high:
        return st.nothing()  # e.g. a number strictly between 0 and 1
    return st.integers(min_value=low, max_value=high)


def _number(schema: dict[str, Any]) -> st.SearchStrategy[float | int]:
    lo, hi, ex_lo, ex_hi = _bounds(schema)
    floats = st.floats(min_value=lo, max_value=hi, exclude_min=ex_lo, exclude_max=ex_hi, allow_nan=False,
                       allow_infinity=False)
    return floats | _integer(schema)  # an integer is a number, as msgspec and JSON Schema agree


def _array(schema: dict[str, Any]) -> st.SearchStrategy[list[Any]]:
    lo = schema.get("minItems", 0)
    hi = schema.get("maxItems", max(lo, _MAX_ITEMS))
    prefix = schema.get("prefixItems")
    if prefix is not None:
        head = st.tuples(*[_strategy(item) for item in prefix]).map(list)
        rest = schema.get("items", True)
        if rest is False:
            return head
        tail = st.lists(_strategy(rest), max_size=max(0, hi - len(prefix)))
        return st.tuples(head, tail).map(lambda ht: ht[0] + ht[1])
    return st.lists(_strategy(schema.get("items", True)), min_size=lo, max_size=hi)


def _object(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    fixed = st.fixed_dictionaries({k: _strategy(v) for k, v in props.items() if k in required},
                                  optional={k: _strategy(v) for k, v in props.items() if k not in required})
    extra = schema.get("additionalProperties", True)
    if extra is False:
        return fixed
    values = JSON_VALUES if extra is True else _strategy(extra)
    more = st.dictionaries(_KEYS.filter(lambda k: k not in props), values, max_size=3)
    return st.tuples(fixed, more).map(lambda fm: {**fm[1], **fm[0]})


_BY_TYPE: dict[str, Any] = {
    "null": lambda schema: st.none(),
    "boolean": lambda schema: st.booleans(),
    "integer": _integer,
    "number": _number,
    "string": _string,
    "array": _array,
    "object": _object,
}
