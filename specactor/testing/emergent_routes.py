"""The Emergent v0.7.0 HTTP surface as a pure function: a decoded request in, a status and JSON out.

Authentication, the project context, routing and parameter parsing follow the server's middleware
and handlers (Echo + `apperror`): every failure is `{"error": {"code", "message"}}`. The graph
itself is `emergent_store`'s; the transport, faults and locking are `emergent`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from specactor.testing.emergent_rows import (
    ApiError,
    Clock,
    ObjectQuery,
    ObjectRow,
    PropertyFilter,
    bad_request,
    decode_cursor,
    encode_cursor,
    parse_uuid,
)
from specactor.testing.emergent_store import Graph


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-case names
    body: bytes


@dataclass(slots=True)
class Store:
    """Every project's graph, and who may reach them.

    Args:
        api_keys: standalone keys accepted in `X-API-Key`.
        tokens: project API tokens (`emt_…`, sent as `Authorization: Bearer`) → their project.
        projects: the project ids that exist.
        inverse_types: relationship type → inverse type, as a template pack declares.
    """

    api_keys: frozenset[str]
    tokens: Mapping[str, str]
    projects: frozenset[str]
    inverse_types: Mapping[str, str]
    graphs: dict[str, Graph] = field(default_factory=dict)
    clock: Clock = field(default_factory=Clock)
    everywhere: dict[str, ObjectRow] = field(default_factory=dict)

    def graph(self, project: str) -> Graph:
        if project not in self.graphs:
            self.graphs[project] = Graph(project, self.clock, self.everywhere, self.inverse_types)
        return self.graphs[project]

    def clear(self) -> None:
        self.graphs.clear()
        self.everywhere.clear()


Reply = tuple[int, Any]
T = TypeVar("T")
Handler = Callable[[Graph, Request, str], Reply]


# ---------------------------------------------------------------------- request bodies


class CreateObject(msgspec.Struct):
    type: str = ""
    key: str | None = None
    status: str | None = None
    properties: dict[str, Any] | None = None
    labels: list[str] | None = None
    branch_id: str | None = None


class PatchObject(msgspec.Struct):
    properties: dict[str, Any] | None = None
    labels: list[str] | None = None
    replaceLabels: bool = False  # the wire name
    status: str | None = None


class BulkObjects(msgspec.Struct):
    items: list[CreateObject] = []


class BulkStatus(msgspec.Struct):
    ids: list[str] = []
    status: str = ""


class CreateRel(msgspec.Struct):
    type: str = ""
    src_id: str | None = None
    dst_id: str | None = None
    properties: dict[str, Any] | None = None
    weight: float | None = None
    branch_id: str | None = None


class PatchRel(msgspec.Struct):
    properties: dict[str, Any] | None = None
    weight: float | None = None


class BulkRels(msgspec.Struct):
    items: list[CreateRel] = []


class HybridSearch(msgspec.Struct):
    query: str = ""
    vector: list[float] | None = None
    types: list[str] | None = None
    labels: list[str] | None = None
    status: str | None = None
    includeDeleted: bool = False  # the wire name
    limit: int = 0
    offset: int = 0


class VectorSearch(msgspec.Struct):
    vector: list[float] | None = None
    limit: int = 0
    offset: int = 0


def bind(req: Request, kind: type[T]) -> T:
    """Echo's `c.Bind`: an empty body binds the zero value; anything undecodable is one 400."""
    if not req.body:
        return kind()
    if not req.headers.get("content-type", "").lower().startswith("application/json"):
        raise bad_request("invalid request body")  # Echo answers an unknown media type; the handler rewraps it
    return decode(req.body, kind)


def decode(body: bytes, kind: type[T]) -> T:
    """`json.NewDecoder(body).Decode` (PATCH): the body must be JSON, whatever its content type."""
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.DecodeError:
        raise bad_request("invalid request body") from None


# ---------------------------------------------------------------------- query parameters


def param(req: Request, name: str) -> str:
    return req.query.get(name, [""])[0]


def listed(req: Request, name: str) -> list[str]:
    """Go's `splitCommaSeparated`: repeated parameters and comma-separated values alike."""
    return [part.strip() for value in req.query.get(name, []) for part in value.split(",") if part.strip()]


def number(req: Request, name: str, default: int) -> int:
    """`strconv.Atoi`, falling back to the default when the value is not a number."""
    try:
        return int(param(req, name), 10)
    except ValueError:
        return default


def clamp(limit: int, default_when_not_positive: int) -> int:
    return default_when_not_positive if limit <= 0 else min(limit, 200)


def uuid_param(req: Request, name: str) -> str | None:
    text = param(req, name)
    if not text:
        return None
    value = parse_uuid(text)
    if value is None:
        raise bad_request(f"invalid {name}")
    return value


def no_branch(branch: str | None) -> None:
    if branch not in (None, "", "null"):
        raise bad_request("branch_id: this Emergent double has only the main branch")


# ---------------------------------------------------------------------- objects


def validate_object(item: CreateObject) -> None:
    """The documented limits (the v0.7.0 handler only checks `type`; staying within them is safe)."""
    if not item.type:
        raise bad_request("type is required")
    if len(item.type) > 64:
        raise bad_request("type must be at most 64 characters")
    if item.key is not None and len(item.key) > 128:
        raise bad_request("key must be at most 128 characters")
    if item.status is not None and len(item.status) > 64:
        raise bad_request("status must be at most 64 characters")
    if item.labels is not None and (len(item.labels) > 32 or any(len(label) > 64 for label in item.labels)):
        raise bad_request("labels must be at most 32, each at most 64 characters")
    no_branch(item.branch_id)


def create_object(graph: Graph, item: CreateObject) -> ObjectRow:
    validate_object(item)
    return graph.create_object(item.type, item.key, item.status, item.properties, item.labels)


def post_object(graph: Graph, req: Request, _: str) -> Reply:
    return 201, create_object(graph, bind(req, CreateObject)).to_json()


def get_object(graph: Graph, req: Request, row_id: str) -> Reply:
    return 200, graph.get_object(row_id, param(req, "resolveHead") in ("true", "1", "yes")).to_json()


def patch_object(graph: Graph, req: Request, row_id: str) -> Reply:
    body = decode(req.body, PatchObject)
    return 200, graph.patch_object(row_id, body.properties, body.labels, body.replaceLabels, body.status).to_json()


def delete_object(graph: Graph, req: Request, row_id: str) -> Reply:
    graph.delete_object(row_id)
    return 200, {"status": "deleted"}


def restore_object(graph: Graph, req: Request, row_id: str) -> Reply:
    return 200, graph.restore_object(row_id).to_json()


def object_history(graph: Graph, req: Request, row_id: str) -> Reply:
    return 200, {"versions": [row.to_json() for row in graph.history(row_id)]}


def object_edges(graph: Graph, req: Request, row_id: str) -> Reply:
    incoming, outgoing = graph.edges(row_id)
    return 200, {"incoming": [r.to_json() for r in incoming], "outgoing": [r.to_json() for r in outgoing]}


def search_objects(graph: Graph, req: Request, _: str) -> Reply:
    q = ObjectQuery(limit=clamp(number(req, "limit", 20), 50), include_deleted=param(req, "include_deleted") == "true")
    if cursor := param(req, "cursor"):
        q.cursor = decode_cursor(cursor)
    q.type = param(req, "type") or None
    q.types = [] if q.type else listed(req, "types")
    q.label = param(req, "label") or None
    q.labels = [] if q.label else listed(req, "labels")
    q.status, q.key = param(req, "status") or None, param(req, "key") or None
    if param(req, "order") in ("asc", "desc"):
        q.order = param(req, "order")
    uuid_param(req, "related_to_id")  # validated, then unused by the v0.7.0 repository
    for text in filter(None, (part.strip() for part in param(req, "ids").split(","))):
        if (row_id := parse_uuid(text)) is None:
            raise bad_request("invalid id in ids parameter")
        q.ids.append(row_id)
    if filters := param(req, "property_filters"):
        q.property_filters = property_filters(filters)
    if param(req, "branch_id") not in ("", "null"):
        uuid_param(req, "branch_id")
        return 200, {"items": [], "total": 0}  # no branch but main exists here
    rows, total, more = graph.search_objects(q)
    out: dict[str, Any] = {"items": [row.to_json() for row in rows]}
    if more and rows:
        out["next_cursor"] = encode_cursor(rows[-1].created_us, rows[-1].id)
    out["total"] = total
    return 200, out


class _Filter(msgspec.Struct):
    path: str = ""
    op: str = ""
    value: Any = None


def property_filters(text: str) -> list[PropertyFilter]:
    try:
        raw = msgspec.json.decode(text, type=list[_Filter])
    except msgspec.DecodeError:
        raise bad_request("invalid property_filters: must be JSON array") from None
    for f in raw:
        if not f.path:
            raise bad_request("property_filters: path is required")
        if f.op not in ("eq", "neq", "gt", "gte", "lt", "lte", "contains", "exists", "in"):
            raise bad_request(f"property_filters: invalid operator '{f.op}'")
    return [PropertyFilter(f.path, f.op, f.value) for f in raw]


def search_reply(found: list[tuple[ObjectRow, float]], limit: int, offset: int) -> Reply:
    page = found[max(offset, 0):][:limit + 1]
    data = [{"object": row.to_json(), "score": score, "lexicalScore": score} for row, score in page[:limit]]
    return 200, {"data": data, "total": len(data), "hasMore": len(page) > limit, "offset": offset}


def fts(graph: Graph, req: Request, _: str) -> Reply:
    query = param(req, "q")
    if not query:
        raise bad_request("query parameter 'q' is required")
    found = graph.text_search(query, every_word=True, types=listed(req, "types"),
                              labels=listed(req, "labels"), status=param(req, "status") or None,
                              include_deleted=param(req, "include_deleted") == "true")
    return search_reply(found, clamp(number(req, "limit", 20), 20), number(req, "offset", 0))


def hybrid_search(graph: Graph, req: Request, _: str) -> Reply:
    body = bind(req, HybridSearch)
    if not body.query and not body.vector:
        raise bad_request("either query or vector is required")
    # No embeddings here: the lexical channel alone, any word matching (vectors would widen it too).
    found = graph.text_search(body.query, every_word=False, types=body.types or [], labels=body.labels or [],
                              status=body.status, include_deleted=body.includeDeleted)
    return search_reply(found, clamp(body.limit, 20), body.offset)


def vector_search(graph: Graph, req: Request, _: str) -> Reply:
    body = bind(req, VectorSearch)
    if not body.vector:
        raise bad_request("vector is required")
    return search_reply([], clamp(body.limit, 20), body.offset)  # nothing here has an embedding


def tags(graph: Graph, req: Request, _: str) -> Reply:
    limit = 0
    if text := param(req, "limit"):
        try:
            limit = int(text, 10)
        except ValueError:
            limit = -1
        if limit < 0:
            raise bad_request("invalid limit parameter")
    return 200, {"tags": graph.tags(param(req, "type") or None, param(req, "prefix") or None, limit)}


def bulk_objects(graph: Graph, req: Request, _: str) -> Reply:
    body = bind(req, BulkObjects)
    check_items(len(body.items))
    results: list[dict[str, Any]] = []
    for index, item in enumerate(body.items):
        try:
            results.append({"index": index, "success": True, "object": create_object(graph, item).to_json()})
        except ApiError as error:
            results.append({"index": index, "success": False, "error": str(error)})
    return 200, bulk_reply(results)


def check_items(count: int) -> None:
    if count == 0:
        raise bad_request("items is required and must not be empty")
    if count > 100:
        raise bad_request("items must not exceed 100")


def bulk_reply(results: list[dict[str, Any]]) -> dict[str, Any]:
    succeeded = sum(1 for r in results if r["success"])
    return {"success": succeeded, "failed": len(results) - succeeded, "results": results}


def bulk_status(graph: Graph, req: Request, _: str) -> Reply:
    body = bind(req, BulkStatus)
    if not body.ids:
        raise bad_request("ids is required")
    if len(body.ids) > 100:
        raise bad_request("ids must not exceed 100")  # documented; v0.7.0 does not enforce it
    updated, results = graph.bulk_update_status(body.ids, body.status)
    return 200, {"success": updated, "failed": len(body.ids) - updated, "results": results}


# ---------------------------------------------------------------------- relationships


NIL_UUID = "00000000-0000-0000-0000-000000000000"


def bindable(items: list[CreateRel]) -> None:
    """Go binds `src_id`/`dst_id` into uuid.UUID: one malformed id (even "") fails the whole body."""
    if any(value is not None and parse_uuid(value) is None for item in items for value in (item.src_id, item.dst_id)):
        raise bad_request("invalid request body")


def create_relationship(graph: Graph, item: CreateRel) -> dict[str, Any]:
    if not item.type:
        raise bad_request("type is required")
    src, dst = parse_uuid(item.src_id or NIL_UUID), parse_uuid(item.dst_id or NIL_UUID)
    if src in (None, NIL_UUID):
        raise bad_request("src_id is required")
    if dst in (None, NIL_UUID):
        raise bad_request("dst_id is required")
    assert src is not None and dst is not None
    no_branch(item.branch_id)
    return graph.create_relationship(item.type, src, dst, item.properties, item.weight)


def post_relationship(graph: Graph, req: Request, _: str) -> Reply:
    body = bind(req, CreateRel)
    bindable([body])
    return 201, create_relationship(graph, body)


def bulk_relationships(graph: Graph, req: Request, _: str) -> Reply:
    body = bind(req, BulkRels)
    bindable(body.items)
    check_items(len(body.items))
    results: list[dict[str, Any]] = []
    for index, item in enumerate(body.items):
        try:
            results.append({"index": index, "success": True, "relationship": create_relationship(graph, item)})
        except ApiError as error:
            results.append({"index": index, "success": False, "error": str(error)})
    return 200, bulk_reply(results)


def search_relationships(graph: Graph, req: Request, _: str) -> Reply:
    limit = clamp(number(req, "limit", 20), 20)
    cursor = decode_cursor(param(req, "cursor")) if param(req, "cursor") else None
    src, dst = uuid_param(req, "src_id"), uuid_param(req, "dst_id")
    if uuid_param(req, "branch_id") is not None:
        return 200, {"data": [], "hasMore": False}
    rows, more = graph.search_relationships(type_=param(req, "type") or None, src_id=src, dst_id=dst,
                                            include_deleted=param(req, "include_deleted") == "true",
                                            limit=limit, cursor=cursor, order=param(req, "order"))
    out: dict[str, Any] = {"data": [r.to_json() for r in rows]}
    if more and rows:
        out["nextCursor"] = encode_cursor(rows[-1].created_us, rows[-1].id)
    out["hasMore"] = more
    return 200, out


def get_relationship(graph: Graph, req: Request, row_id: str) -> Reply:
    return 200, graph.get_relationship(row_id).to_json()


def patch_relationship(graph: Graph, req: Request, row_id: str) -> Reply:
    body = decode(req.body, PatchRel)
    return 200, graph.patch_relationship(row_id, body.properties, body.weight).to_json()


def delete_relationship(graph: Graph, req: Request, row_id: str) -> Reply:
    return 200, graph.delete_relationship(row_id).to_json()


def restore_relationship(graph: Graph, req: Request, row_id: str) -> Reply:
    return 201, graph.restore_relationship(row_id).to_json()


def relationship_history(graph: Graph, req: Request, row_id: str) -> Reply:
    return 200, [r.to_json() for r in graph.relationship_history(row_id)]


# ---------------------------------------------------------------------- routing

OBJECT_ID, REL_ID = "invalid object id", "invalid relationship id"

# (template, {method: handler}, message when the {id} is not a uuid); static segments match first.
ROUTES: list[tuple[str, dict[str, Handler], str]] = [
    ("/api/graph/objects", {"POST": post_object}, ""),
    ("/api/graph/objects/search", {"GET": search_objects}, ""),
    ("/api/graph/objects/fts", {"GET": fts}, ""),
    ("/api/graph/objects/vector-search", {"POST": vector_search}, ""),
    ("/api/graph/objects/tags", {"GET": tags}, ""),
    ("/api/graph/objects/bulk-update-status", {"POST": bulk_status}, ""),
    ("/api/graph/objects/bulk", {"POST": bulk_objects}, ""),
    ("/api/graph/objects/{id}", {"GET": get_object, "PATCH": patch_object, "DELETE": delete_object}, OBJECT_ID),
    ("/api/graph/objects/{id}/restore", {"POST": restore_object}, OBJECT_ID),
    ("/api/graph/objects/{id}/history", {"GET": object_history}, OBJECT_ID),
    ("/api/graph/objects/{id}/edges", {"GET": object_edges}, OBJECT_ID),
    ("/api/graph/search", {"POST": hybrid_search}, ""),
    ("/api/graph/relationships", {"POST": post_relationship}, ""),
    ("/api/graph/relationships/search", {"GET": search_relationships}, ""),
    ("/api/graph/relationships/bulk", {"POST": bulk_relationships}, ""),
    ("/api/graph/relationships/{id}", {"GET": get_relationship, "PATCH": patch_relationship,
                                       "DELETE": delete_relationship}, REL_ID),
    ("/api/graph/relationships/{id}/restore", {"POST": restore_relationship}, REL_ID),
    ("/api/graph/relationships/{id}/history", {"GET": relationship_history}, REL_ID),
]
# Real routes this double leaves out: answered 501 so a caller sees at once why.
UNIMPLEMENTED = ["/api/graph/objects/{id}/similar", "/api/graph/search-with-neighbors", "/api/graph/expand",
                 "/api/graph/traverse", "/api/graph/branches/{id}/merge", "/api/graph/analytics/most-accessed",
                 "/api/graph/analytics/unused"]
_SPLIT = [(t.split("/"), methods, bad_id) for t, methods, bad_id in ROUTES]


def route(method: str, path: str) -> tuple[str, Handler | None, str, str]:
    """(template, handler or None, the {id} segment, its invalid-id message); template "" when
    nothing matches the path. A matched path without the method has no handler (405)."""
    parts = path.rstrip("/").split("/") if path != "/" else [""]
    matched = ""
    for segments, methods, bad_id in _SPLIT:
        if len(segments) != len(parts):
            continue
        if all(s == p or (s == "{id}" and p) for s, p in zip(segments, parts, strict=True)):
            row_id = next((p for s, p in zip(segments, parts, strict=True) if s == "{id}"), "")
            template = "/".join(segments)
            if method in methods:
                return template, methods[method], row_id, bad_id
            matched = matched or template
    return matched, None, "", ""


def is_unimplemented(path: str) -> bool:
    parts = path.rstrip("/").split("/")
    templates = (t.split("/") for t in UNIMPLEMENTED)
    return any(len(t) == len(parts) and all(s in ("{id}", p) for s, p in zip(t, parts, strict=True)) for t in templates)


# ---------------------------------------------------------------------- auth and dispatch


def authenticate(store: Store, req: Request) -> str | None:
    """The auth middleware: a standalone `X-API-Key` (no project of its own), else a bearer token
    (`Authorization: Bearer`, or `?token=` for SSE) whose project it returns."""
    if req.headers.get("x-api-key") in store.api_keys:
        return None
    authorization = req.headers.get("authorization", "")
    token = authorization[len("Bearer "):] if authorization.startswith("Bearer ") else ""
    token = token or param(req, "token")
    if not token:
        # An `emt_` token or a wrong key in X-API-Key lands here: the server only compares that
        # header with its standalone key, then looks for a bearer token.
        raise ApiError(401, "missing_token", "Missing authorization token")
    if token not in store.tokens:
        raise ApiError(401, "invalid_token", "Invalid or expired token")
    return store.tokens[token]


def project_of(store: Store, req: Request, token_project: str | None) -> str:
    # v0.7.0's handlers answer every project-context failure, a missing header included,
    # with "invalid project_id" (getProjectID's "project_id is required" is overwritten).
    project = parse_uuid(token_project or req.headers.get("x-project-id", ""))
    if project is None:
        raise bad_request("invalid project_id")
    if project not in store.projects:
        raise ApiError(404, "project_not_found", "Project not found")
    return project


def dispatch(store: Store, req: Request, template: str, handler: Handler | None, row_id: str, bad_id: str) -> Reply:
    """Answer an `/api/graph` request (already routed); raises `ApiError` for error replies."""
    token_project = authenticate(store, req)  # group middleware: before routing's 404 and 405
    if handler is None:
        if is_unimplemented(req.path):
            raise ApiError(501, "not_implemented", f"{req.method} {req.path} is not implemented by the Emergent double")
        if template:
            raise ApiError(405, "internal_error", "Method Not Allowed")  # Echo's 405 maps to no code
        raise not_found_route()
    graph = store.graph(project_of(store, req, token_project))
    if bad_id:
        canonical = parse_uuid(row_id)
        if canonical is None:
            raise bad_request(bad_id)
        row_id = canonical
    return handler(graph, req, row_id)


def not_found_route() -> ApiError:
    return ApiError(404, "not_found", "Not Found")


__all__ = ["ROUTES", "ApiError", "Handler", "Request", "Store", "dispatch", "not_found_route", "route"]
