"""JSON Schemas from msgspec types, and a validator that explains why input does not fit.

msgspec decodes and validates in one pass, fast, but its messages do not list an enum's
valid values or a range's bounds. When decoding fails we re-check the input against the
Struct's own schema here, which yields the seed's details: the field, what was expected,
what was given, the valid values, the minimum and maximum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import msgspec

_JSON_TYPE_OF = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
                 dict: "object", type(None): "null"}


def json_type(value: Any) -> str:
    return _JSON_TYPE_OF.get(type(value), type(value).__name__)


def _inline(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 32:
        raise ValueError("schema nests too deeply to inline (a recursive type?)")
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = dict(defs[ref.removeprefix("#/$defs/")])
            extra = {k: v for k, v in node.items() if k != "$ref"}
            target.pop("title", None)
            return _inline({**target, **extra}, defs, depth + 1)
        return {k: _inline(v, defs, depth + 1) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline(v, defs, depth + 1) for v in node]
    return node


@cache
def _schema_of(tp: Any) -> dict[str, Any]:
    raw = msgspec.json.schema(tp)
    out = _inline(raw, raw.get("$defs", {}))
    assert isinstance(out, dict)
    out.pop("title", None)
    return out


def schema_of(tp: Any) -> dict[str, Any]:
    """The self-contained (no `$ref`) JSON Schema of a msgspec type. Callers must not mutate it."""
    return _schema_of(tp)


@dataclass(frozen=True)
class Issue:
    """Why a value does not fit a schema: where, what rule, and a sentence for humans."""

    path: str
    rule: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


def _where(path: str) -> str:
    return f"'{path}'" if path else "the arguments"


def _check_type(expected: Any, value: Any) -> bool:
    types = expected if isinstance(expected, list) else [expected]
    actual = json_type(value)
    return actual in types or (actual == "integer" and "number" in types) or (
        actual == "number" and "integer" in types and float(value).is_integer()
    )


def find_issue(schema: dict[str, Any], value: Any, path: str = "") -> Issue | None:
    """The first way `value` breaks `schema`, or None when it fits."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = schema[key]
            issues = [find_issue(opt, value, path) for opt in options]
            if any(i is None for i in issues):
                break
            typed = [i for i in issues if i is not None and i.rule != "type"]
            if typed:
                return typed[0]
            expected = sorted({t for o in options for t in _types_of(o)})
            return Issue(path, "type", f"{_where(path)} must be {' or '.join(expected)}, got {json_type(value)}",
                         {"field": path, "expected": expected, "actual": json_type(value)})
    if "type" in schema and not _check_type(schema["type"], value):
        exp = schema["type"]
        return Issue(path, "type", f"{_where(path)} must be {' or '.join(exp) if isinstance(exp, list) else exp}"
                     f", got {json_type(value)}", {"field": path, "expected": exp, "actual": json_type(value)})
    if "const" in schema and value != schema["const"]:
        return Issue(path, "enum", f"{_where(path)} must be {schema['const']!r}",
                     {"field": path, "valid": [schema["const"]], "actual": value})
    if "enum" in schema and value not in schema["enum"]:
        valid = schema["enum"]
        return Issue(path, "enum", f"{_where(path)} must be one of {', '.join(map(str, valid))}; got {value!r}",
                     {"field": path, "valid": valid, "actual": value})
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        issue = _check_range(schema, value, path)
        if issue:
            return issue
    if isinstance(value, str):
        issue = _check_string(schema, value, path)
        if issue:
            return issue
    if isinstance(value, list):
        issue = _check_array(schema, value, path)
        if issue:
            return issue
    if isinstance(value, dict):
        return _check_object(schema, value, path)
    return None


def _types_of(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type")
    if isinstance(t, list):
        return t
    if isinstance(t, str):
        return [t]
    return [x for key in ("anyOf", "oneOf") for o in schema.get(key, []) for x in _types_of(o)]


def _check_range(schema: dict[str, Any], value: float, path: str) -> Issue | None:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    bad = (lo is not None and value < lo) or (hi is not None and value > hi) or (
        xlo is not None and value <= xlo) or (xhi is not None and value >= xhi)
    if not bad:
        return None
    low = lo if lo is not None else xlo
    high = hi if hi is not None else xhi
    bounds = []
    if low is not None:
        bounds.append(f"{'>' if xlo is not None else '>='} {low}")
    if high is not None:
        bounds.append(f"{'<' if xhi is not None else '<='} {high}")
    return Issue(path, "range", f"{_where(path)} must be {' and '.join(bounds)}, got {value}",
                 {"field": path, "min": low, "max": high, "actual": value})


def _check_string(schema: dict[str, Any], value: str, path: str) -> Issue | None:
    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if (lo is not None and len(value) < lo) or (hi is not None and len(value) > hi):
        return Issue(path, "range", f"{_where(path)} must be between {lo or 0} and "
                     f"{hi if hi is not None else 'any number of'} characters long, got {len(value)}",
                     {"field": path, "min": lo, "max": hi, "actual": len(value)})
    pattern = schema.get("pattern")
    if pattern is not None and not _compiled(pattern).search(value):
        return Issue(path, "pattern", f"{_where(path)} must match the pattern {pattern}",
                     {"field": path, "pattern": pattern, "actual": value[:200]})
    return None


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _check_array(schema: dict[str, Any], value: list[Any], path: str) -> Issue | None:
    lo, hi = schema.get("minItems"), schema.get("maxItems")
    if (lo is not None and len(value) < lo) or (hi is not None and len(value) > hi):
        return Issue(path, "range", f"{_where(path)} must have between {lo or 0} and "
                     f"{hi if hi is not None else 'any number of'} items, got {len(value)}",
                     {"field": path, "min": lo, "max": hi, "actual": len(value)})
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            issue = find_issue(items, item, f"{path}[{i}]")
            if issue:
                return issue
    return None


def _check_object(schema: dict[str, Any], value: dict[str, Any], path: str) -> Issue | None:
    props: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in value:
            sub = f"{path}.{name}" if path else name
            return Issue(sub, "required", f"missing required field '{sub}'", {"field": sub})
    for name, item in value.items():
        sub = f"{path}.{name}" if path else name
        if name in props:
            issue = find_issue(props[name], item, sub)
            if issue:
                return issue
        elif schema.get("additionalProperties") is False:
            return Issue(sub, "unknown", f"unknown field '{sub}'; valid fields are {', '.join(props)}",
                         {"field": sub, "valid": list(props)})
        elif isinstance(schema.get("additionalProperties"), dict):
            issue = find_issue(schema["additionalProperties"], item, sub)
            if issue:
                return issue
    return None


_MSGSPEC_PATH = re.compile(r" - at `\$(.*)`$")


def issue_from_msgspec(err: msgspec.ValidationError) -> Issue:
    """Fallback when the schema check finds nothing: msgspec's own sentence and path."""
    text = str(err)
    match = _MSGSPEC_PATH.search(text)
    path = match.group(1).lstrip(".") if match else ""
    message = _MSGSPEC_PATH.sub("", text)
    return Issue(path, "invalid", f"{_where(path)}: {message}", {"field": path})
