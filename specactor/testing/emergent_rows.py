"""The values the Emergent double stores and answers with, as the v0.7.0 server shapes them.

Object and relationship rows (one per version) with their JSON (Go's `omitempty`), the error
envelope, timestamps as Go renders them, the plain-JSON page cursor, the property-change summary,
property filters, and the words full-text search sees. Pure: no I/O.
"""

from __future__ import annotations

import calendar
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec


class ApiError(Exception):
    """An answer in the server's error envelope, `{"error": {"code", "message"}}`."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")  # Go's apperror.Error(): what bulk results carry
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}


def bad_request(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def not_found(message: str = "Resource not found") -> ApiError:
    return ApiError(404, "not_found", message)


def parse_uuid(text: str) -> str | None:
    """The canonical form of a uuid Go's `uuid.Parse` accepts (dashes, braces, urn:), else None."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None


def iso(us: int) -> str:
    """Go's RFC 3339 rendering of a timestamp: UTC, trailing zeros of the fraction trimmed."""
    seconds, fraction = divmod(us, 1_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{base}.{fraction:06d}".rstrip("0") + "Z" if fraction else base + "Z"


_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?([Zz]|[+-]\d\d:\d\d)\Z")


def parse_time(text: str) -> int | None:
    match = _RFC3339.match(text)
    if match is None:
        return None
    *parts, fraction, zone = match.groups()
    seconds = calendar.timegm((*(int(p) for p in parts), 0, 0, 0))
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds * 1_000_000 + int((fraction or "0").ljust(6, "0")[:6])


class Cursor(msgspec.Struct):
    """v0.7.0's cursor: the plain JSON `{"created_at", "id"}` of a page's last row."""

    created_at: str
    id: str


def encode_cursor(created_us: int, row_id: str) -> str:
    return msgspec.json.encode(Cursor(iso(created_us), row_id)).decode()


def decode_cursor(text: str) -> tuple[int, str]:
    try:
        cursor = msgspec.json.decode(text, type=Cursor)
    except msgspec.DecodeError:
        raise bad_request("invalid cursor") from None
    created, row_id = parse_time(cursor.created_at), parse_uuid(cursor.id)
    if created is None or row_id is None:
        raise bad_request("invalid cursor")
    return created, row_id


class Clock:
    """Microsecond timestamps (Postgres' precision), strictly increasing so (created_at, id) pages
    never tie across requests."""

    def __init__(self) -> None:
        self._last = 0

    def now_us(self) -> int:
        self._last = max(time.time_ns() // 1000, self._last + 1)
        return self._last


def change_summary(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any] | None:
    """The server's RFC 6901 diff of two property maps, None when nothing changed."""
    added = {f"/{k}": v for k, v in new.items() if k not in old}
    updated = {f"/{k}": {"from": old[k], "to": v} for k, v in new.items()
               if k in old and msgspec.json.encode(old[k]) != msgspec.json.encode(v)}
    removed = [f"/{k}" for k in old if k not in new]
    if not (added or updated or removed):
        return None
    return {"added": added, "removed": removed, "updated": updated, "paths": [*added, *updated, *removed],
            "meta": {"added": len(added), "removed": len(removed), "updated": len(updated)}}


@dataclass(slots=True)
class ObjectRow:
    id: str
    project_id: str
    canonical_id: str
    version: int
    type: str
    key: str | None
    status: str | None
    properties: dict[str, Any]
    labels: list[str]
    created_us: int
    supersedes_id: str | None = None
    deleted_us: int | None = None
    change_summary: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The GraphObject response: Go's `omitempty` leaves out what is unset."""
        out: dict[str, Any] = {"id": self.id, "project_id": self.project_id, "canonical_id": self.canonical_id}
        if self.supersedes_id is not None:
            out["supersedes_id"] = self.supersedes_id
        out.update(version=self.version, type=self.type)
        if self.key is not None:
            out["key"] = self.key
        if self.status is not None:
            out["status"] = self.status
        out.update(properties=self.properties, labels=self.labels)
        if self.deleted_us is not None:
            out["deleted_at"] = iso(self.deleted_us)
        if self.change_summary:
            out["change_summary"] = self.change_summary
        out["created_at"] = iso(self.created_us)
        return out


@dataclass(slots=True)
class RelRow:
    id: str
    project_id: str
    canonical_id: str
    version: int
    type: str
    src_id: str
    dst_id: str
    properties: dict[str, Any]
    weight: float | None
    created_us: int
    supersedes_id: str | None = None
    deleted_us: int | None = None
    change_summary: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "project_id": self.project_id, "canonical_id": self.canonical_id}
        if self.supersedes_id is not None:
            out["supersedes_id"] = self.supersedes_id
        out.update(version=self.version, type=self.type, src_id=self.src_id, dst_id=self.dst_id,
                   properties=self.properties)
        if self.weight is not None:
            out["weight"] = self.weight
        if self.deleted_us is not None:
            out["deleted_at"] = iso(self.deleted_us)
        if self.change_summary:
            out["change_summary"] = self.change_summary
        out["created_at"] = iso(self.created_us)
        return out


@dataclass(frozen=True, slots=True)
class PropertyFilter:
    path: str
    op: str
    value: Any = None


@dataclass(slots=True)
class ObjectQuery:
    """`GET /objects/search` after parsing; `type` and `label` win over `types` and `labels`."""

    limit: int = 20
    cursor: tuple[int, str] | None = None
    order: str = "desc"
    type: str | None = None
    types: list[str] = field(default_factory=list)
    label: str | None = None
    labels: list[str] = field(default_factory=list)  # any of them (Postgres `&&`)
    status: str | None = None
    key: str | None = None
    ids: list[str] = field(default_factory=list)
    include_deleted: bool = False
    property_filters: list[PropertyFilter] = field(default_factory=list)


_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def document(row: ObjectRow) -> Counter[str]:
    """What full-text search sees: type, key and every string property value."""
    text = [row.type, row.key or "", *_strings(row.properties)]
    return Counter(words(" ".join(text)))


def _as_text(value: Any) -> str | None:
    """Postgres' `->>`: strings bare, other JSON as JSON text, null as SQL NULL."""
    if value is None or isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def _go_text(value: Any) -> str:
    """Go's `fmt.Sprintf("%v", v)` of a decoded JSON value, as the filter compares it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value) if not isinstance(value, (list, dict)) else msgspec.json.encode(value).decode()


def matches(properties: Mapping[str, Any], f: PropertyFilter) -> bool:
    node: Any = properties
    for segment in f.path.split("."):
        node = node.get(segment) if isinstance(node, dict) else None
    text = _as_text(node)
    if f.op == "exists":
        return node is not None
    if f.op == "neq":
        return text is None or text != _go_text(f.value)
    if text is None:
        return False
    if f.op == "eq":
        return text == _go_text(f.value)
    if f.op == "contains":
        return _go_text(f.value).lower() in text.lower()
    if f.op == "in":
        return isinstance(f.value, list) and text in {_go_text(v) for v in f.value}
    try:
        left, right = float(text), float(f.value)
    except (TypeError, ValueError):
        return False
    compare: dict[str, Callable[[float, float], bool]] = {
        "gt": float.__gt__, "gte": float.__ge__, "lt": float.__lt__, "lte": float.__le__}
    return compare[f.op](left, right)
