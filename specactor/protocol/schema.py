"""JSON Schemas from msgspec types, and a validator that explains why input does not fit.

msgspec decodes and validates in one pass, fast, but its messages do not list an enum's
valid values or a range's bounds. When decoding fails we re-check the input against the
Struct's own schema here, which yields the seed's details: the field, what was expected,
what was given, the valid values, the minimum and maximum.
"""

from __future__ import annotations

import datetime
import re
import uuid
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
        # `discriminator.mapping` points into `$defs`, which inlining removes; the tag's `const`
        # in each branch carries the same information.
        return {k: _inline(v, defs, depth + 1) for k, v in node.items() if k not in ("$defs", "discriminator")}
    if isinstance(node, list):
        return [_inline(v, defs, depth + 1) for v in node]
    return node


def _naive_datetimes(info: Any, seen: set[int]) -> bool:
    """Whether a msgspec type holds a datetime whose schema would be a bare string."""
    if id(info) in seen:
        return False
    seen.add(id(info))
    if isinstance(info, msgspec.inspect.DateTimeType):
        return info.tz is not True
    for attr in ("fields", "types", "item_type", "key_type", "value_type", "item_types", "cls"):
        child = getattr(info, attr, None)
        if child is None or isinstance(child, type):
            continue
        children = child if isinstance(child, (list, tuple)) else [child]
        for c in children:
            target = getattr(c, "type", c)
            if isinstance(target, msgspec.inspect.Type) and _naive_datetimes(target, seen):
                return True
    return False


def check_input_type(tp: Any) -> None:
    """Refuse an input type whose published schema would accept what its decoder refuses.

    Raises:
        TypeError: a datetime without `tz=True` (msgspec publishes it as a bare string).
    """
    if _naive_datetimes(msgspec.inspect.type_info(tp), set()):
        raise TypeError(f"{tp!r} has a datetime without tz=True; its schema would be a bare string that "
                        "msgspec does not accept as such. Use Annotated[datetime, Meta(tz=True)].")


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


class Issue(msgspec.Struct, frozen=True):
    """Why a value does not fit a schema: where, what rule, and a sentence for humans."""

    path: str
    rule: str
    message: str
    details: dict[str, Any] = msgspec.field(default_factory=dict)


def _where(path: str) -> str:
    return f"'{path}'" if path else "the arguments"


def _check_type(expected: Any, value: Any) -> bool:
    # As msgspec decides: 2.0 is not an integer, 2 is a number.
    types = expected if isinstance(expected, list) else [expected]
    actual = json_type(value)
    return actual in types or (actual == "integer" and "number" in types)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: `true` is not `1`."""
    return json_type(a) == json_type(b) and a == b


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
    if "const" in schema and not _same(value, schema["const"]):
        return Issue(path, "enum", f"{_where(path)} must be {schema['const']!r}",
                     {"field": path, "valid": [schema["const"]], "actual": value})
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
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
        # A field's description says its rule in words (the domain's convention): quoted instead of the regex.
        words = schema.get("description")
        return Issue(path, "pattern", f"{_where(path)} is invalid ({value[:60]!r}): {words}" if words
                     else f"{_where(path)} must match the pattern {pattern}",
                     {"field": path, "pattern": pattern, "actual": value[:200]})
    fmt = schema.get("format")
    kind = _FORMATS.get(fmt) if isinstance(fmt, str) else None
    if kind is not None:
        try:
            msgspec.convert(value, kind)
        except msgspec.ValidationError:
            return Issue(path, "format", f"{_where(path)} must be a {fmt} string, got {value[:60]!r}",
                         {"field": path, "format": fmt, "actual": value[:200]})
    return None


_FORMATS: dict[str, Any] = {"uuid": uuid.UUID, "date": datetime.date, "date-time": datetime.datetime,
                            "time": datetime.time, "duration": datetime.timedelta}


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _check_array(schema: dict[str, Any], value: list[Any], path: str) -> Issue | None:
    lo, hi = schema.get("minItems"), schema.get("maxItems")
    if (lo is not None and len(value) < lo) or (hi is not None and len(value) > hi):
        return Issue(path, "range", f"{_where(path)} must have between {lo or 0} and "
                     f"{hi if hi is not None else 'any number of'} items, got {len(value)}",
                     {"field": path, "min": lo, "max": hi, "actual": len(value)})
    prefix = schema.get("prefixItems") or []
    for i, (item_schema, item) in enumerate(zip(prefix, value, strict=False)):
        issue = find_issue(item_schema, item, f"{path}[{i}]")
        if issue:
            return issue
    items = schema.get("items")
    rest = value[len(prefix):]
    if items is False and rest:
        return Issue(path, "range", f"{_where(path)} must have at most {len(prefix)} items, got {len(value)}",
                     {"field": path, "max": len(prefix), "actual": len(value)})
    if isinstance(items, dict):
        for i, item in enumerate(rest, start=len(prefix)):
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
