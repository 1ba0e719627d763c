"""The Emergent graph client: REST v0.7.0 over httpx on trio, with retries that never duplicate an object.

GET, PATCH, DELETE, restore, searches and relationship creates (the server upserts on type, src,
dst) are retried on PROVIDER_ERROR and RATE_LIMITED with exponential backoff. Object creates
(`POST /objects`, `/objects/bulk`) are retried only on a 429 or when nothing reached the server
(connect error or timeout, pool timeout): after a timeout, reset or 5xx the caller looks the key up.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, TypeVar

import httpx
import msgspec
import trio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential

from specactor.actors import http_body
from specactor.domain.graph import emergent as api
from specactor.domain.graph.emergent import (
    BulkRelationshipResult,
    BulkResult,
    BulkStatusResult,
    Edges,
    EmergentError,
    ObjectPage,
    Order,
    RelationshipPage,
    SearchPage,
)

T = TypeVar("T")
# Errors raised before a connection carried any byte of the request: safe to repeat even a create.
NEVER_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class EmergentStatistics:
    """What the client has seen; times are wall-clock (`time.time()`), None until it happened."""

    requests: int  # HTTP attempts, retries included
    failures: int  # attempts that ended in an error; a 404 is an answer, not a failure
    retries: int
    consecutive_failures: int
    last_error: str | None
    last_error_at: float | None
    last_success: float | None


class EmergentClient:
    """One project's graph API. Use as `async with EmergentClient(...) as client:` or call `aclose()`.

    Objects and relationships come back as the server's JSON dicts (GraphObject, Relationship);
    pages, edges, search hits and bulk results as the frozen Structs of `domain/graph/emergent.py`.

    Args:
        url: the server's base URL (`http://localhost:3002`); a trailing slash is fine.
        api_key: a project token `emt_…` (sent as Bearer) or a standalone key (sent as X-API-Key).
        project_id: sent as X-Project-ID; needed with a standalone key.
        timeout: seconds for each phase of a request (connect, write, read, pool).
        max_attempts: attempts per call, the first included.
        backoff_initial: the first wait between attempts; doubled each time up to `backoff_max`.
        backoff_max: the longest wait; a Retry-After longer than this is not waited out.
        transport: an httpx transport to use instead of the network (tests).

    Raises:
        ValueError: the URL is not http(s) or max_attempts is below 1.
    """

    def __init__(self, url: str, api_key: str, project_id: str | None, *, timeout: float = 30.0,
                 max_attempts: int = 5, backoff_initial: float = 0.5, backoff_max: float = 60.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"the Emergent URL must start with http:// or https://, not {url!r}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {max_attempts}")
        self.url = url.rstrip("/")
        self.project_id = project_id
        self.max_attempts = max_attempts
        self.backoff_max = backoff_max
        self._backoff = wait_exponential(multiplier=backoff_initial, exp_base=2, max=backoff_max)
        self._http = httpx.AsyncClient(headers=api.auth_headers(api_key, project_id), timeout=timeout,
                                       transport=transport)
        self._requests = self._failures = self._retries = self._consecutive = 0
        self._last_error: str | None = None
        self._last_error_at: float | None = None
        self._last_success: float | None = None

    async def __aenter__(self) -> EmergentClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pooled connections."""
        with trio.CancelScope(shield=True):  # a cancelled owner still closes its sockets
            await self._http.aclose()

    def statistics(self) -> EmergentStatistics:
        return EmergentStatistics(self._requests, self._failures, self._retries, self._consecutive,
                                  self._last_error, self._last_error_at, self._last_success)

    # --- health and objects -----------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """`GET /health`, the server's own report.

        Raises:
            EmergentError: as every call (see the module docstring for what is retried).
        """
        return await self._call("GET", "/health", api.parse_document)

    async def create_object(self, type: str, *, key: str | None = None, properties: Mapping[str, Any] | None = None,
                            labels: Sequence[str] | None = None, status: str | None = None) -> dict[str, Any]:
        """Create an object (version 1, `canonical_id == id`). Not retried once it may have been sent.

        Raises:
            ValueError: an empty type.
            EmergentError: PROVIDER_ERROR after a timeout or reset means the object may exist:
                look it up by key before creating again.
        """
        body = api.object_create_body(type, key=key, properties=properties, labels=labels, status=status)
        return await self._call("POST", f"{api.PREFIX}/objects", api.parse_entity, body=body, creates=True)

    async def get_object(self, ident: str, *, resolve_head: bool = True) -> dict[str, Any]:
        """An object by id or canonical id; with `resolve_head`, its newest version.

        Raises:
            EmergentError: NOT_FOUND when there is none.
        """
        params = [("resolveHead", "true")] if resolve_head else None
        return await self._call("GET", api.object_path(ident), api.parse_entity, params=params)

    async def patch_object(self, ident: str, *, properties: Mapping[str, Any] | None = None,
                           labels: Sequence[str] | None = None, replace_labels: bool = False,
                           status: str | None = None) -> dict[str, Any]:
        """Write a new version (a new `id`, same `canonical_id`); a None property value deletes the key.

        Raises:
            EmergentError: REFUSED for a deleted object or properties the schema rejects.
        """
        body = api.object_patch_body(properties=properties, labels=labels, replace_labels=replace_labels,
                                     status=status)
        return await self._call("PATCH", api.object_path(ident), api.parse_entity, body=body)

    async def delete_object(self, ident: str) -> dict[str, Any]:
        """Tombstone an object: `{"status": "deleted"}`, or `{"status": "already_deleted"}` when it was.

        Idempotent, so that a retry after a lost reply (which the server refuses with 400 `object
        already deleted`) reports success.

        Raises:
            EmergentError: NOT_FOUND when there is no such object; as every call.
        """
        return await self._delete(api.object_path(ident))

    async def restore_object(self, ident: str) -> dict[str, Any]:
        """Undelete an object by any of its version ids (a new live HEAD); a live one is returned as it is.

        The server checks the row named, not the HEAD: restoring by canonical id (version 1,
        never a tombstone itself) is refused with `object is not deleted` even when the HEAD is
        deleted, and so is a retry whose first reply was lost. Either way the HEAD decides: a
        live HEAD is returned, a deleted one is restored by its own id.

        Raises:
            EmergentError: NOT_FOUND when there is no such object; as every call.
        """
        try:
            return await self._call("POST", api.object_path(ident, "/restore"), api.parse_entity)
        except EmergentError as err:
            if not api.not_deleted(err):
                raise
            refusal = err
        head = await self.get_object(ident, resolve_head=True)
        if not head.get("deleted_at"):
            return head
        if head["id"] == ident:  # the server contradicts itself: report what it said
            raise refusal
        return await self._call("POST", api.object_path(head["id"], "/restore"), api.parse_entity)

    async def object_edges(self, ident: str) -> Edges:
        """The relationships ending at (`incoming`) and starting from (`outgoing`) an object.

        Raises:
            EmergentError: as every call.
        """
        return await self._call("GET", api.object_path(ident, "/edges"), api.parse_edges)

    async def search_objects(self, *, type: str | None = None, types: Sequence[str] | None = None,
                             key: str | None = None, label: str | None = None, labels: Sequence[str] | None = None,
                             status: str | None = None, include_deleted: bool = False, limit: int = 200,
                             cursor: str | None = None, order: Order | None = None) -> ObjectPage:
        """One page of HEAD versions matching every filter given (`labels`: any of them).

        Raises:
            ValueError: see `object_search_params`.
            EmergentError: as every call.
        """
        params = api.object_search_params(type=type, types=types, key=key, label=label, labels=labels, status=status,
                                          include_deleted=include_deleted, limit=limit, cursor=cursor, order=order)
        return await self._call("GET", f"{api.PREFIX}/objects/search", api.parse_object_page, params=params)

    async def iter_objects(self, *, type: str | None = None, types: Sequence[str] | None = None,
                           key: str | None = None, label: str | None = None, labels: Sequence[str] | None = None,
                           status: str | None = None, include_deleted: bool = False, limit: int = 200,
                           order: Order | None = None) -> AsyncIterator[dict[str, Any]]:
        """Every object matching the filters, page after page (`limit` per request).

        Raises:
            ValueError: see `object_search_params`.
            EmergentError: as every call; PROVIDER_ERROR when the server repeats a cursor.
        """
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = await self.search_objects(type=type, types=types, key=key, label=label, labels=labels,
                                             status=status, include_deleted=include_deleted, limit=limit,
                                             cursor=cursor, order=order)
            for item in page.items:
                yield item
            if not page.next_cursor or not page.items:
                return
            if page.next_cursor in seen:  # a server bug must not become an endless loop
                raise EmergentError("PROVIDER_ERROR", f"Emergent repeated the cursor {page.next_cursor!r} "
                                    f"while listing objects")
            seen.add(page.next_cursor)
            cursor = page.next_cursor

    async def find_by_key(self, type: str, key: str, *, label: str | None = None) -> dict[str, Any] | None:
        """The live object of `type` with `key`; among duplicates the smallest canonical_id; None if none.

        Raises:
            ValueError: an empty type or key (the server would ignore the filter).
            EmergentError: as every call.
        """
        page = await self.search_objects(type=type, key=key, label=label, limit=api.KEY_LOOKUP_LIMIT)
        return api.pick_by_key(page.items, type, key)

    async def bulk_create_objects(self, items: Sequence[Mapping[str, Any]]) -> BulkResult:
        """Create 1-100 objects (each `{type, key?, properties?, labels?, status?}`); results by index.

        Raises:
            ValueError: no items, more than 100, or an item without a type; nothing is sent.
            EmergentError: as `create_object`: not retried once it may have been sent.
        """
        body = api.bulk_body(items, ("type",))
        return await self._call("POST", f"{api.PREFIX}/objects/bulk", api.parse_bulk, body=body, creates=True)

    async def bulk_update_status(self, ids: Sequence[str], status: str) -> BulkStatusResult:
        """Set the status of 1-100 objects; results by id.

        Raises:
            ValueError: no ids, more than 100, or an empty status.
            EmergentError: as every call.
        """
        body = api.bulk_status_body(ids, status)
        # Setting a status twice leaves the same state: safe to retry.
        return await self._call("POST", f"{api.PREFIX}/objects/bulk-update-status", api.parse_bulk_status, body=body)

    # --- relationships ----------------------------------------------------------------------------

    async def create_relationship(self, type: str, src_id: str, dst_id: str, *,
                                  properties: Mapping[str, Any] | None = None,
                                  weight: float | None = None) -> dict[str, Any]:
        """Create or update the relationship (type, src, dst): the server upserts, so this is retried.

        Raises:
            ValueError: an empty type or id.
            EmergentError: REFUSED for a self-loop or endpoints on different branches.
        """
        body = api.relationship_create_body(type, src_id, dst_id, properties=properties, weight=weight)
        return await self._call("POST", f"{api.PREFIX}/relationships", api.parse_entity, body=body)

    async def get_relationship(self, ident: str) -> dict[str, Any]:
        """A relationship by id.

        Raises:
            EmergentError: NOT_FOUND when there is none.
        """
        return await self._call("GET", api.relationship_path(ident), api.parse_entity)

    async def delete_relationship(self, ident: str) -> dict[str, Any]:
        """Tombstone a relationship: the server's tombstone version, or `{"status": "already_deleted"}`.

        Idempotent like `delete_object` (the server's 400 here is `already_deleted`).

        Raises:
            EmergentError: NOT_FOUND when there is no such relationship; as every call.
        """
        return await self._delete(api.relationship_path(ident))

    async def _delete(self, path: str) -> dict[str, Any]:
        try:
            return await self._call("DELETE", path, api.parse_document)
        except EmergentError as err:
            if api.already_deleted(err):
                return {"status": "already_deleted"}
            raise

    async def search_relationships(self, *, type: str | None = None, src_id: str | None = None,
                                   dst_id: str | None = None, include_deleted: bool = False, limit: int = 200,
                                   cursor: str | None = None) -> RelationshipPage:
        """One page of relationships matching every filter given.

        Raises:
            ValueError: see `relationship_search_params`.
            EmergentError: as every call.
        """
        params = api.relationship_search_params(type=type, src_id=src_id, dst_id=dst_id,
                                                include_deleted=include_deleted, limit=limit, cursor=cursor)
        return await self._call("GET", f"{api.PREFIX}/relationships/search", api.parse_relationship_page,
                                params=params)

    async def bulk_create_relationships(self, items: Sequence[Mapping[str, Any]]) -> BulkRelationshipResult:
        """Upsert 1-100 relationships (each `{type, src_id, dst_id, properties?, weight?}`); results by index.

        Raises:
            ValueError: no items, more than 100, or an item without type, src_id or dst_id.
            EmergentError: as every call.
        """
        body = api.bulk_body(items, ("type", "src_id", "dst_id"))
        return await self._call("POST", f"{api.PREFIX}/relationships/bulk", api.parse_bulk_relationships, body=body)

    # --- search -----------------------------------------------------------------------------------

    async def fts(self, q: str, *, limit: int = 20, offset: int = 0) -> SearchPage:
        """Full-text search over object properties.

        Raises:
            ValueError: see `fts_params`.
            EmergentError: as every call.
        """
        params = api.fts_params(q, limit=limit, offset=offset)
        return await self._call("GET", f"{api.PREFIX}/objects/fts", api.parse_search_page, params=params)

    async def hybrid_search(self, query: str, *, types: Sequence[str] | None = None,
                            labels: Sequence[str] | None = None, limit: int = 20) -> SearchPage:
        """Lexical and vector search fused by the server; a read, so retried although it is a POST.

        Raises:
            ValueError: see `hybrid_search_body`.
            EmergentError: as every call.
        """
        body = api.hybrid_search_body(query, types=types, labels=labels, limit=limit)
        return await self._call("POST", f"{api.PREFIX}/search", api.parse_search_page, body=body)

    # --- one call, its attempts, and one attempt --------------------------------------------------

    async def _call(self, method: str, path: str, parse: Callable[[bytes, str], T], *,
                    params: list[tuple[str, str]] | None = None, body: object = None,
                    creates: bool = False) -> T:
        content = None if body is None else msgspec.json.encode(body)
        retrying = AsyncRetrying(stop=stop_after_attempt(self.max_attempts), wait=self._wait,
                                 retry=retry_if_exception(self._may_repeat_create if creates else self._may_repeat),
                                 sleep=trio.sleep, reraise=True)
        async for attempt in retrying:
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    self._retries += 1
                return await self._attempt(method, path, parse, params, content)
        raise AssertionError("unreachable")  # pragma: no cover  # reraise=True raises the last error

    def _may_repeat(self, exc: BaseException) -> bool:
        if not isinstance(exc, EmergentError) or not exc.retryable:
            return False
        # A wait beyond backoff_max is not ours to sit through: the caller sees RATE_LIMITED at once.
        return exc.code != "RATE_LIMITED" or (exc.retry_after or 0.0) <= self.backoff_max

    def _may_repeat_create(self, exc: BaseException) -> bool:
        # A 429 was refused before any work; a connect failure never sent a byte. Anything else
        # may have created the object already.
        return self._may_repeat(exc) and isinstance(exc, EmergentError) and (
            exc.code == "RATE_LIMITED" or exc.never_sent)

    def _wait(self, state: RetryCallState) -> float:
        backoff = float(self._backoff(state))
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, EmergentError) and exc.retry_after is not None:
            return max(exc.retry_after, backoff)
        return backoff

    async def _attempt(self, method: str, path: str, parse: Callable[[bytes, str], T],
                       params: list[tuple[str, str]] | None, content: bytes | None) -> T:
        where = f"{method} {path}"
        headers = {"Content-Type": "application/json"} if content is not None else None
        self._requests += 1
        try:
            reply = await http_body.send(self._http, method, self.url + path, content, headers=headers,
                                         params=tuple(params or ()))
        except httpx.HTTPError as err:
            raise self._failed(api.transport_failure(where, type(err).__name__, str(err),
                                                     never_sent=isinstance(err, NEVER_SENT))) from None
        if not 200 <= reply.status_code < 300:
            raise self._failed(api.classify(reply.status_code, reply.headers, reply.content, time.time(), where))
        try:
            result = parse(reply.content, where)
        except EmergentError as err:
            err.status = reply.status_code
            raise self._failed(err) from None
        self._consecutive = 0
        self._last_success = time.time()
        return result

    def _failed(self, err: EmergentError) -> EmergentError:
        if err.code == "NOT_FOUND" or api.already_deleted(err) or api.not_deleted(err):  # answers, not failures
            self._consecutive = 0
        else:
            self._failures += 1
            self._consecutive += 1
            self._last_error = err.message
            self._last_error_at = time.time()
        return err
