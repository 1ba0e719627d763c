"""The Emergent graph API's vocabulary (REST v0.7.0), pure: headers, paths, bodies, replies, errors.

`actors/emergent_client.py` does the HTTP; this module decides what goes out and what came back
means. Every failure becomes an `EmergentError` with one of five codes (UNAUTHORIZED, NOT_FOUND,
RATE_LIMITED, PROVIDER_ERROR, REFUSED); a builder given arguments the server would silently
misread (an empty key filter, 101 bulk items) raises ValueError before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeVar
from urllib.parse import quote

import msgspec

from specactor.domain.retry_after import retry_after

PREFIX: Final = "/api/graph"
MAX_BULK: Final = 100  # items per bulk request (the server's `validate:"min=1,max=100"`)
MAX_LIMIT: Final = 200  # page size the server allows at most (it clamps larger ones silently)
KEY_LOOKUP_LIMIT: Final = 50  # as specmcp's FindByTypeAndKey: enough to see every duplicate
SNIPPET: Final = 200  # characters of a non-envelope error body kept in the message

ErrorCode = Literal["UNAUTHORIZED", "NOT_FOUND", "RATE_LIMITED", "PROVIDER_ERROR", "REFUSED"]
Order = Literal["asc", "desc"]
T = TypeVar("T")


class EmergentError(Exception):
    """A request to Emergent failed; `message` is a sentence naming the request and the server's words.

    Args:
        code: UNAUTHORIZED (401/403), NOT_FOUND (404), RATE_LIMITED (429), PROVIDER_ERROR (5xx,
            408, timeouts, connection failures, an unreadable 2xx reply) or REFUSED (other 4xx).
        message: the sentence.
        status: the HTTP status, None when no reply came.
        server_code: the body's `error.code` (`bad_request`, `invalid_token`, ...), when it had one.
        server_message: the body's `error.message` (or its text), when a reply came.
        retry_after: seconds the server asked us to wait (RATE_LIMITED only).
        details: the body's `error.details`, when it had them.
        never_sent: the request provably never reached the server (no connection was made), so
            even a create may be sent again.
    """

    def __init__(self, code: ErrorCode, message: str, *, status: int | None = None, server_code: str | None = None,
                 server_message: str | None = None, retry_after: float | None = None,
                 details: dict[str, Any] | None = None, never_sent: bool = False) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.status = status
        self.server_code = server_code
        self.server_message = server_message
        self.retry_after = retry_after
        self.details = details
        self.never_sent = never_sent

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later: RATE_LIMITED and PROVIDER_ERROR."""
        return self.code in ("RATE_LIMITED", "PROVIDER_ERROR")

    def __repr__(self) -> str:
        return f"EmergentError({self.code!r}, {self.message!r}, status={self.status!r})"


# --- requests -------------------------------------------------------------------------------------

def auth_headers(api_key: str, project_id: str | None) -> dict[str, str]:
    """The headers every request carries.

    A project token (`emt_…`) goes as a Bearer token, which is what the server validates it as;
    anything else is a standalone key in `X-API-Key` (SDK v0.7.0 sent every key that way, and
    the server rejects an `emt_` token there).
    """
    headers = {"Accept": "application/json"}
    if api_key.startswith("emt_") and len(api_key) > 4:
        headers["Authorization"] = f"Bearer {api_key}"
    elif api_key:
        headers["X-API-Key"] = api_key
    if project_id:
        headers["X-Project-ID"] = project_id
    return headers


def object_path(ident: str, tail: str = "") -> str:
    # Quoted: an id is a UUID from the server, but a stray "/" or ".." must not name another route.
    return f"{PREFIX}/objects/{quote(_nonempty('id', ident), safe='')}{tail}"


def relationship_path(ident: str) -> str:
    return f"{PREFIX}/relationships/{quote(_nonempty('id', ident), safe='')}"


def object_create_body(type: str, *, key: str | None = None, properties: Mapping[str, Any] | None = None,
                       labels: Sequence[str] | None = None, status: str | None = None) -> dict[str, Any]:
    """`POST /objects` (and one item of `POST /objects/bulk`).

    Raises:
        ValueError: an empty type.
    """
    body: dict[str, Any] = {"type": _nonempty("type", type)}
    if key is not None:
        body["key"] = key
    if status is not None:
        body["status"] = status
    if properties is not None:
        body["properties"] = dict(properties)
    if labels is not None:
        body["labels"] = list(labels)
    return body


def object_patch_body(*, properties: Mapping[str, Any] | None = None, labels: Sequence[str] | None = None,
                      replace_labels: bool = False, status: str | None = None) -> dict[str, Any]:
    """`PATCH /objects/{id}`: properties merge, a None value deletes that key; labels merge unless replaced."""
    body: dict[str, Any] = {}
    if properties is not None:
        body["properties"] = dict(properties)
    if labels is not None:
        body["labels"] = list(labels)
    if replace_labels:
        body["replaceLabels"] = True
    if status is not None:
        body["status"] = status
    return body


def relationship_create_body(type: str, src_id: str, dst_id: str, *, properties: Mapping[str, Any] | None = None,
                             weight: float | None = None) -> dict[str, Any]:
    """`POST /relationships`, an upsert on (type, src_id, dst_id).

    Raises:
        ValueError: an empty type or endpoint id.
    """
    body: dict[str, Any] = {"type": _nonempty("type", type), "src_id": _nonempty("src_id", src_id),
                            "dst_id": _nonempty("dst_id", dst_id)}
    if properties is not None:
        body["properties"] = dict(properties)
    if weight is not None:
        body["weight"] = weight
    return body


def bulk_body(items: Sequence[Mapping[str, Any]], required: Sequence[str]) -> dict[str, Any]:
    """`{items}` for `POST /objects/bulk` or `/relationships/bulk`.

    Raises:
        ValueError: fewer than 1 or more than 100 items, or an item without a `required` field.
    """
    if not 1 <= len(items) <= MAX_BULK:
        raise ValueError(f"a bulk request takes 1 to {MAX_BULK} items, not {len(items)}")
    for index, item in enumerate(items):
        missing = [name for name in required if not item.get(name)]
        if missing:
            raise ValueError(f"bulk item {index} has no {', '.join(missing)}")
    return {"items": [dict(item) for item in items]}


def bulk_status_body(ids: Sequence[str], status: str) -> dict[str, Any]:
    """`POST /objects/bulk-update-status`.

    Raises:
        ValueError: fewer than 1 or more than 100 ids, or an empty status.
    """
    if not 1 <= len(ids) <= MAX_BULK:
        raise ValueError(f"a bulk status update takes 1 to {MAX_BULK} ids, not {len(ids)}")
    return {"ids": list(ids), "status": _nonempty("status", status)}


def object_search_params(*, type: str | None = None, types: Sequence[str] | None = None, key: str | None = None,
                         label: str | None = None, labels: Sequence[str] | None = None, status: str | None = None,
                         include_deleted: bool = False, limit: int = MAX_LIMIT, cursor: str | None = None,
                         order: Order | None = None) -> list[tuple[str, str]]:
    """The query of `GET /objects/search`. `labels` matches objects with any of them.

    Raises:
        ValueError: a limit outside 1-200, both `type` and `types` (or `label` and `labels`: the
            server would ignore the list), or an empty filter string (the server would ignore it
            and match everything).
    """
    if type is not None and types:
        raise ValueError("give type or types, not both")
    if label is not None and labels:
        raise ValueError("give label or labels, not both")
    params = [("limit", str(_limit(limit)))]
    for name, value in (("type", type), ("key", key), ("label", label), ("status", status)):
        if value is not None:
            params.append((name, _nonempty(name, value)))
    if types:
        params.append(("types", ",".join(_nonempty("types", t) for t in types)))
    if labels:
        params.append(("labels", ",".join(_nonempty("labels", t) for t in labels)))
    if include_deleted:
        params.append(("include_deleted", "true"))
    if cursor:
        params.append(("cursor", cursor))
    if order is not None:
        params.append(("order", order))
    return params


def relationship_search_params(*, type: str | None = None, src_id: str | None = None, dst_id: str | None = None,
                               include_deleted: bool = False, limit: int = MAX_LIMIT,
                               cursor: str | None = None) -> list[tuple[str, str]]:
    """The query of `GET /relationships/search`.

    Raises:
        ValueError: a limit outside 1-200 or an empty filter string.
    """
    params = [("limit", str(_limit(limit)))]
    for name, value in (("type", type), ("src_id", src_id), ("dst_id", dst_id)):
        if value is not None:
            params.append((name, _nonempty(name, value)))
    if include_deleted:
        params.append(("include_deleted", "true"))
    if cursor:
        params.append(("cursor", cursor))
    return params


def fts_params(q: str, *, limit: int, offset: int) -> list[tuple[str, str]]:
    """The query of `GET /objects/fts`.

    Raises:
        ValueError: an empty query, a limit outside 1-200 or a negative offset.
    """
    if offset < 0:
        raise ValueError(f"offset must not be negative, not {offset}")
    return [("q", _nonempty("q", q)), ("limit", str(_limit(limit))), ("offset", str(offset))]


def hybrid_search_body(query: str, *, types: Sequence[str] | None = None, labels: Sequence[str] | None = None,
                       limit: int = 20) -> dict[str, Any]:
    """`POST /search` (lexical + vector, fused by the server).

    Raises:
        ValueError: an empty query or a limit outside 1-200.
    """
    body: dict[str, Any] = {"query": _nonempty("query", query), "limit": _limit(limit)}
    if types:
        body["types"] = list(types)
    if labels:
        body["labels"] = list(labels)
    return body


def _nonempty(name: str, value: str) -> str:
    if not value:
        raise ValueError(f"{name} must not be empty")
    return value


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    return limit


# --- replies --------------------------------------------------------------------------------------

class ObjectPage(msgspec.Struct, frozen=True):
    """A page of `GET /objects/search`: HEAD versions, `next_cursor` None on the last page."""

    items: list[dict[str, Any]]
    next_cursor: str | None = None
    total: int = 0


class RelationshipPage(msgspec.Struct, frozen=True, rename={"next_cursor": "nextCursor", "has_more": "hasMore"}):
    """A page of `GET /relationships/search` (camelCase on the wire, unlike objects)."""

    data: list[dict[str, Any]]
    next_cursor: str | None = None
    has_more: bool = False


class SearchPage(msgspec.Struct, frozen=True, rename={"hits": "data", "has_more": "hasMore"}):
    """Full-text or hybrid search results: `hits` are `{object, score, lexicalScore?, vectorScore?, ...}`."""

    hits: list[dict[str, Any]]
    total: int = 0
    has_more: bool = False
    offset: int = 0


class Edges(msgspec.Struct, frozen=True):
    """`GET /objects/{id}/edges`: the relationships ending and starting at an object."""

    incoming: list[dict[str, Any]] = []
    outgoing: list[dict[str, Any]] = []


class BulkItem(msgspec.Struct, frozen=True):
    """One item of a bulk object create, by its index in the request."""

    index: int
    success: bool
    object: dict[str, Any] | None = None
    error: str | None = None


class BulkResult(msgspec.Struct, frozen=True):
    success: int
    failed: int
    results: list[BulkItem] = []


class BulkRelationshipItem(msgspec.Struct, frozen=True):
    """One item of a bulk relationship create, by its index in the request."""

    index: int
    success: bool
    relationship: dict[str, Any] | None = None
    error: str | None = None


class BulkRelationshipResult(msgspec.Struct, frozen=True):
    success: int
    failed: int
    results: list[BulkRelationshipItem] = []


class BulkStatusItem(msgspec.Struct, frozen=True):
    id: str
    success: bool
    error: str | None = None


class BulkStatusResult(msgspec.Struct, frozen=True):
    success: int
    failed: int
    results: list[BulkStatusItem] = []


def parse_document(body: bytes, where: str) -> dict[str, Any]:
    """A 2xx reply that is any JSON object (`/health`, `{"status": "deleted"}`).

    Raises:
        EmergentError: PROVIDER_ERROR, the body is not a JSON object.
    """
    return _decode(body, dict[str, Any], where, ())


def parse_entity(body: bytes, where: str) -> dict[str, Any]:
    """A 2xx reply that is one GraphObject or Relationship.

    Raises:
        EmergentError: PROVIDER_ERROR, the body is not a JSON object with a string `id`.
    """
    entity = parse_document(body, where)
    if not isinstance(entity.get("id"), str):
        raise _unreadable(where, "it has no id")
    return entity


def parse_object_page(body: bytes, where: str) -> ObjectPage:
    return _decode(body, ObjectPage, where, ("items",))


def parse_relationship_page(body: bytes, where: str) -> RelationshipPage:
    return _decode(body, RelationshipPage, where, ("data",))


def parse_search_page(body: bytes, where: str) -> SearchPage:
    return _decode(body, SearchPage, where, ("data",))


def parse_edges(body: bytes, where: str) -> Edges:
    return _decode(body, Edges, where, ("incoming", "outgoing"))


def parse_bulk(body: bytes, where: str) -> BulkResult:
    return _decode(body, BulkResult, where, ("results",))


def parse_bulk_relationships(body: bytes, where: str) -> BulkRelationshipResult:
    return _decode(body, BulkRelationshipResult, where, ("results",))


def parse_bulk_status(body: bytes, where: str) -> BulkStatusResult:
    return _decode(body, BulkStatusResult, where, ("results",))


def _decode(body: bytes, kind: type[T], where: str, lists: Sequence[str]) -> T:
    """`body` as `kind`; a Go nil slice arrives as `null`, so the `lists` named read null as []."""
    try:
        raw = msgspec.json.decode(body)
        if isinstance(raw, dict):
            for name in lists:
                if name in raw and raw[name] is None:
                    raw[name] = []
        return msgspec.convert(raw, type=kind)
    except msgspec.DecodeError as err:  # ValidationError included
        raise _unreadable(where, str(err)) from None


def _unreadable(where: str, why: str) -> EmergentError:
    return EmergentError("PROVIDER_ERROR", f"Emergent sent an unreadable reply to {where}: {why}")


def pick_by_key(items: Sequence[Mapping[str, Any]], type: str, key: str) -> dict[str, Any] | None:
    """The live object of `type` and `key` with the smallest canonical_id, as specmcp picks among duplicates.

    `(project, type, key)` is not unique on the server, so two syncs racing can both create;
    the smallest canonical id is a choice every reader makes alike, whatever order the page has.
    """
    live = [dict(item) for item in items if item.get("type") == type and item.get("key") == key
            and not item.get("deleted_at") and isinstance(item.get("canonical_id"), str)]
    return min(live, key=lambda item: str(item["canonical_id"]), default=None)


# --- failures -------------------------------------------------------------------------------------

def error_body(body: bytes) -> tuple[str | None, str, dict[str, Any] | None]:
    """(error.code, error.message, error.details) of `{"error": {...}}`; else the raw text, truncated."""
    try:
        raw = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raw = None
    if isinstance(raw, dict):
        err = raw.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            code = err.get("code")
            details = err.get("details")
            return (code if isinstance(code, str) else None, err["message"],
                    details if isinstance(details, dict) else None)
        if isinstance(raw.get("message"), str):  # Echo's own errors (an unknown route): {"message": "Not Found"}
            return None, raw["message"], None
    text = body.decode("utf-8", "replace").strip()
    if len(text) > SNIPPET:
        text = text[:SNIPPET] + "…"
    return None, text or "an empty body", None


def classify(status: int, headers: Mapping[str, str], body: bytes, now: float, where: str) -> EmergentError:
    """What a non-2xx reply to `where` ("METHOD /path") means."""
    server_code, said, details = error_body(body)
    reply = f"HTTP {status}{' ' + server_code if server_code else ''}: {said}"
    code: ErrorCode
    wait: float | None = None
    if status in (401, 403):
        code, message = "UNAUTHORIZED", (f"Emergent refused our credentials for {where} ({reply}); "
                                         "check the API key and the project id")
    elif status == 404:
        hint = "" if server_code else "; not an Emergent error body, so check the URL"
        code, message = "NOT_FOUND", f"Emergent found nothing at {where} ({reply}){hint}"
    elif status == 429:
        wait = retry_after(headers, now)
        code, message = "RATE_LIMITED", f"Emergent is rate limiting {where} ({reply}); retry after {wait:g} s"
    elif status >= 500 or status == 408:  # 408: the server gave up waiting for us, a transient failure
        code, message = "PROVIDER_ERROR", f"Emergent failed on {where} ({reply})"
    elif 400 <= status < 500:
        code, message = "REFUSED", f"Emergent refused {where} ({reply})"
    else:  # httpx does not follow redirects: a 3xx means the configured URL is not the API's
        code, message = "REFUSED", f"Emergent answered {where} with an unexpected {reply}; check the URL"
    return EmergentError(code, message, status=status, server_code=server_code, server_message=said,
                         retry_after=wait, details=details)


def already_deleted(err: EmergentError) -> bool:
    """The 400 a DELETE gets when the object or relationship is a tombstone already.

    A retried DELETE whose first reply was lost gets exactly this, so the client takes it as done.
    """
    return _refused_as(err, "object already deleted", "already_deleted")


def not_deleted(err: EmergentError) -> bool:
    """The 400 a restore gets when the object is live already (also after a retry whose first reply was lost)."""
    return _refused_as(err, "object is not deleted")


def _refused_as(err: EmergentError, *messages: str) -> bool:
    return err.code == "REFUSED" and err.status == 400 and (err.server_message or "").strip().lower() in messages


def transport_failure(where: str, kind: str, detail: str, *, never_sent: bool) -> EmergentError:
    """PROVIDER_ERROR for a request that got no reply: `kind` names the transport error."""
    detail = detail or "no detail"
    if never_sent:
        message = f"Emergent is unreachable for {where} ({kind}: {detail})"
    else:  # a timeout or reset after sending: the server may have acted on the request
        message = f"Emergent did not answer {where} ({kind}: {detail})"
    return EmergentError("PROVIDER_ERROR", message, never_sent=never_sent)
