"""The Emergent client against a scripted httpx.MockTransport: headers, the status → code mapping,
what is retried and what is not (object creates never after they may have been sent), paging and
key lookups. Waits run on trio's autojump clock, so backoff is measured in virtual seconds."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from specactor.actors.emergent_client import EmergentClient
from specactor.domain.graph import emergent as api
from specactor.domain.graph.emergent import EmergentError

Reply = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]
OBJ = {"id": "o1", "canonical_id": "o1", "version": 1, "type": "Spec", "key": "auth", "properties": {},
       "labels": [], "project_id": "p", "created_at": "2026-11-25T00:00:00Z"}
REL = {"id": "r1", "canonical_id": "r1", "version": 1, "type": "has_requirement", "src_id": "a", "dst_id": "b",
       "properties": {}, "project_id": "p", "created_at": "2026-11-25T00:00:00Z"}


def reply(status: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.Response(status, content=content, headers=headers)


def error(status: int, code: str, message: str, **headers: str) -> httpx.Response:
    return reply(status, {"error": {"code": code, "message": message}}, headers)


@dataclass
class Server:
    """Answers each request with the next scripted reply (a Response, an exception to raise, or a
    function of the request), then with `default`; keeps every request."""

    script: list[Reply] = field(default_factory=list)
    default: Reply = field(default_factory=lambda: reply(200, OBJ))
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        step = self.script.pop(0) if self.script else self.default
        if isinstance(step, Exception):
            raise step
        return step if isinstance(step, httpx.Response) else step(request)

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) if r.content else None for r in self.requests]


@pytest.fixture
def server() -> Server:
    return Server()


def client_for(server: Server, *, url: str = "http://emergent.test", key: str = "standalone-key",
               project: str | None = "proj-1", attempts: int = 3, **kw: float) -> EmergentClient:
    return EmergentClient(url, key, project, max_attempts=attempts, backoff_initial=kw.get("initial", 0.5),
                          backoff_max=kw.get("cap", 60.0), transport=httpx.MockTransport(server))


@pytest.fixture
async def client(server: Server) -> AsyncIterator[EmergentClient]:
    async with client_for(server) as c:
        yield c


async def failure(call: Any) -> EmergentError:
    with pytest.raises(EmergentError) as caught:
        await call
    return caught.value


# --- headers and URLs -----------------------------------------------------------------------------

def test_a_project_token_goes_as_bearer_and_anything_else_as_x_api_key() -> None:
    assert api.auth_headers("emt_abc", "p") == {"Accept": "application/json", "Authorization": "Bearer emt_abc",
                                                "X-Project-ID": "p"}
    assert api.auth_headers("emt_", None) == {"Accept": "application/json", "X-API-Key": "emt_"}
    assert api.auth_headers("standalone-key", None) == {"Accept": "application/json", "X-API-Key": "standalone-key"}


async def test_requests_carry_the_auth_project_and_json_headers(server: Server) -> None:
    async with client_for(server, key="emt_token") as c:
        await c.create_object("Spec", key="auth", properties={"name": "auth"})
        await c.get_object("o1")
    post, get = server.requests
    assert post.headers["authorization"] == "Bearer emt_token" and "x-api-key" not in post.headers
    assert post.headers["x-project-id"] == "proj-1" and post.headers["accept"] == "application/json"
    assert post.headers["content-type"] == "application/json" and "content-type" not in get.headers
    assert server.bodies()[0] == {"type": "Spec", "key": "auth", "properties": {"name": "auth"}}


async def test_a_standalone_key_without_a_project_sends_no_project_header(server: Server) -> None:
    async with client_for(server, project=None) as c:
        await c.health()
    assert server.requests[0].headers["x-api-key"] == "standalone-key"
    assert "x-project-id" not in server.requests[0].headers


async def test_urls_join_the_base_with_or_without_a_trailing_slash(server: Server) -> None:
    for base in ("http://emergent.test/", "http://emergent.test/prefix/"):
        async with client_for(server, url=base) as c:
            await c.get_object("o 1/..", resolve_head=True)
    assert [str(r.url) for r in server.requests] == [
        "http://emergent.test/api/graph/objects/o%201%2F..?resolveHead=true",
        "http://emergent.test/prefix/api/graph/objects/o%201%2F..?resolveHead=true"]


def test_a_url_that_is_not_http_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="http"):
        EmergentClient("localhost:3002", "k", None)


# --- status → code ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "server_code", "code"), [
    (401, "invalid_token", "UNAUTHORIZED"), (403, "forbidden", "UNAUTHORIZED"), (404, "not_found", "NOT_FOUND"),
    (400, "bad_request", "REFUSED"), (409, "conflict", "REFUSED"), (422, "validation_error", "REFUSED"),
    (500, "internal_error", "PROVIDER_ERROR"), (503, "unavailable", "PROVIDER_ERROR"),
])
async def test_each_status_maps_to_its_code_with_the_servers_words(server: Server, status: int, server_code: str,
                                                                     code: str) -> None:
    server.default = error(status, server_code, "the server's reason")
    async with client_for(server, attempts=1) as c:
        err = await failure(c.get_object("o1"))
    assert (err.code, err.status, err.server_code) == (code, status, server_code)
    assert "the server's reason" in err.message and "GET /api/graph/objects/o1" in err.message
    assert err.retryable is (code == "PROVIDER_ERROR")


def test_a_reply_without_the_error_envelope_keeps_its_text_truncated() -> None:
    err = api.classify(502, {}, b"<html>" + b"x" * 500, 0.0, "GET /health")
    assert err.code == "PROVIDER_ERROR" and err.server_code is None
    assert "<html>xxx" in err.message and len(err.message) < 320 and "…" in err.message
    echo = api.classify(404, {}, b'{"message":"Not Found"}', 0.0, "GET /api/graph/nope")
    assert echo.code == "NOT_FOUND" and "Not Found" in echo.message and "check the URL" in echo.message
    empty = api.classify(400, {}, b"", 0.0, "POST /api/graph/objects")
    assert empty.code == "REFUSED" and "an empty body" in empty.message


def test_error_details_are_kept() -> None:
    body = json.dumps({"error": {"code": "bad_request", "message": "property validation failed: name",
                                 "details": {"field": "name"}}}).encode()
    err = api.classify(400, {}, body, 0.0, "PATCH /api/graph/objects/o1")
    assert err.details == {"field": "name"} and err.server_code == "bad_request"


def test_retry_after_reads_seconds_an_http_date_or_defaults_to_one_second() -> None:
    now = time.time()
    assert api.retry_after({"Retry-After": "7"}, now) == 7.0
    assert 28 <= api.retry_after({"retry-after": formatdate(now + 30, usegmt=True)}, now) <= 30
    assert api.retry_after({}, now) == 1.0 and api.retry_after({"retry-after": "soon"}, now) == 1.0
    assert api.classify(429, {"retry-after": "3"}, b"", now, "GET /x").retry_after == 3.0


async def test_a_malformed_success_body_is_a_provider_error(server: Server) -> None:
    server.default = reply(200, b"not json")
    async with client_for(server, attempts=1) as c:
        err = await failure(c.get_object("o1"))
        assert err.code == "PROVIDER_ERROR" and err.status == 200 and "unreadable" in err.message
        server.default = reply(200, {"items": "nope"})
        assert (await failure(c.search_objects(type="Spec"))).code == "PROVIDER_ERROR"


async def test_transport_failures_are_provider_errors_naming_the_request(server: Server) -> None:
    server.default = httpx.ConnectError("connection refused")
    async with client_for(server, attempts=1) as c:
        err = await failure(c.health())
    assert err.code == "PROVIDER_ERROR" and err.never_sent and err.status is None
    assert "ConnectError: connection refused" in err.message and "GET /health" in err.message


async def test_the_real_transport_runs_on_trio_and_a_refused_connection_was_never_sent() -> None:
    with trio.socket.socket() as probe:  # a port nobody listens on: bound, then closed
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with trio.fail_after(10):
        async with EmergentClient(f"http://127.0.0.1:{port}", "k", None, max_attempts=1) as c:
            err = await failure(c.health())
    assert err.code == "PROVIDER_ERROR" and err.never_sent and "ConnectError" in err.message


# --- retries ----------------------------------------------------------------------------------------

async def test_reads_patches_deletes_and_relationship_creates_retry_a_503_with_backoff(
        server: Server, autojump_clock: trio.testing.MockClock) -> None:
    async with client_for(server, attempts=3) as c:
        calls: list[tuple[Any, Any]] = [
            (lambda: c.get_object("o1"), OBJ), (lambda: c.patch_object("o1", properties={"a": None}), OBJ),
            (lambda: c.delete_object("o1"), {"status": "deleted"}),
            (lambda: c.create_relationship("has_requirement", "a", "b"), REL),
            (lambda: c.bulk_create_relationships([{"type": "t", "src_id": "a", "dst_id": "b"}]),
             {"success": 1, "failed": 0, "results": [{"index": 0, "success": True, "relationship": REL}]}),
        ]
        for call, good in calls:
            server.requests.clear()
            server.script = [error(503, "unavailable", "busy"), httpx.ReadTimeout("slow")]
            server.default = reply(200 if good is not REL else 201, good)
            start = trio.current_time()
            await call()
            assert len(server.requests) == 3
            assert trio.current_time() - start == pytest.approx(0.5 + 1.0)  # 0.5 s, then doubled
        assert c.statistics().retries == 10 and c.statistics().consecutive_failures == 0


async def test_retries_stop_at_max_attempts_and_raise_the_last_error(
        server: Server, autojump_clock: trio.testing.MockClock) -> None:
    server.script = [error(500, "internal_error", "first")]
    server.default = error(503, "unavailable", "last")
    async with client_for(server, attempts=4, initial=1.0, cap=2.0) as c:
        start = trio.current_time()
        err = await failure(c.search_objects(type="Spec"))
        assert trio.current_time() - start == pytest.approx(1.0 + 2.0 + 2.0)  # doubled, capped at 2 s
        stats = c.statistics()
    assert len(server.requests) == 4 and err.status == 503 and "last" in err.message
    assert (stats.requests, stats.failures, stats.retries, stats.consecutive_failures) == (4, 4, 3, 4)
    assert stats.last_error == err.message and stats.last_success is None


async def test_a_cancelled_call_stops_between_attempts(server: Server,
                                                    autojump_clock: trio.testing.MockClock) -> None:
    server.default = error(503, "unavailable", "busy")
    async with client_for(server, attempts=5) as c:
        with trio.move_on_after(0.2) as scope:
            await c.get_object("o1")
    assert scope.cancelled_caught and len(server.requests) == 1


@pytest.mark.parametrize(("status", "code"), [(401, "UNAUTHORIZED"), (403, "UNAUTHORIZED"), (404, "NOT_FOUND"),
                                              (400, "REFUSED"), (422, "REFUSED")])
async def test_unauthorized_not_found_and_refused_are_never_retried(server: Server, status: int,
                                                                     code: str) -> None:
    server.default = error(status, "x", "no")
    async with client_for(server, attempts=5) as c:
        assert (await failure(c.patch_object("o1", status="done"))).code == code
    assert len(server.requests) == 1


async def test_a_rate_limit_waits_the_longer_of_retry_after_and_the_backoff(
        server: Server, autojump_clock: trio.testing.MockClock) -> None:
    server.script = [error(429, "rate_limited", "slow down", **{"Retry-After": "7"}),
                     error(429, "rate_limited", "slow down", **{"Retry-After": "0"})]
    async with client_for(server, attempts=3) as c:
        start = trio.current_time()
        await c.get_object("o1")
    assert trio.current_time() - start == pytest.approx(7.0 + 1.0)  # 7 s asked; then the 1 s backoff
    assert len(server.requests) == 3


async def test_a_rate_limit_given_as_an_http_date_is_honoured(server: Server,
                                                              autojump_clock: trio.testing.MockClock) -> None:
    server.script = [error(429, "rate_limited", "later", **{"Retry-After": formatdate(time.time() + 20, usegmt=True)})]
    async with client_for(server) as c:
        start = trio.current_time()
        await c.health()
    assert 18 <= trio.current_time() - start <= 20 and len(server.requests) == 2


async def test_a_retry_after_beyond_backoff_max_is_raised_not_waited(server: Server,
                                                                     autojump_clock: trio.testing.MockClock) -> None:
    server.default = error(429, "rate_limited", "come back in an hour", **{"Retry-After": "3600"})
    async with client_for(server, cap=60.0) as c:
        err = await failure(c.get_object("o1"))
    assert err.code == "RATE_LIMITED" and err.retry_after == 3600.0 and len(server.requests) == 1


@pytest.mark.parametrize("lost", [error(503, "unavailable", "busy"), httpx.ReadTimeout("no reply"),
                                  httpx.ReadError("connection reset by peer"),
                                  httpx.RemoteProtocolError("server disconnected"), httpx.WriteTimeout("stuck")],
                         ids=["503", "read-timeout", "reset", "disconnect", "write-timeout"])
async def test_an_object_create_is_not_retried_once_it_may_have_reached_the_server(
        server: Server, lost: Reply, autojump_clock: trio.testing.MockClock) -> None:
    async with client_for(server, attempts=5) as c:
        server.script = [lost]
        err = await failure(c.create_object("Spec", key="auth"))
        assert err.code == "PROVIDER_ERROR" and not err.never_sent and len(server.requests) == 1
        server.script = [lost]
        assert (await failure(c.bulk_create_objects([{"type": "Spec", "key": "auth"}]))).code == "PROVIDER_ERROR"
    assert len(server.requests) == 2


@pytest.mark.parametrize("unsent", [httpx.ConnectError("refused"), httpx.ConnectTimeout("no route"),
                                    httpx.PoolTimeout("pool full"),
                                    error(429, "rate_limited", "wait", **{"Retry-After": "1"})],
                         ids=["connect-error", "connect-timeout", "pool-timeout", "429"])
async def test_an_object_create_is_retried_when_nothing_was_sent_or_it_was_rate_limited(
        server: Server, unsent: Reply, autojump_clock: trio.testing.MockClock) -> None:
    server.script = [unsent]
    server.default = reply(201, OBJ)
    async with client_for(server) as c:
        assert (await c.create_object("Spec", key="auth"))["id"] == "o1"
        server.script = [unsent]
        server.default = reply(201, {"success": 1, "failed": 0, "results": [{"index": 0, "success": True,
                                                                              "object": OBJ}]})
        assert (await c.bulk_create_objects([{"type": "Spec"}])).success == 1
    assert len(server.requests) == 4


async def test_a_delete_or_restore_retried_after_a_lost_reply_reports_success(server: Server,
                                                                    autojump_clock: trio.testing.MockClock) -> None:
    server.script = [httpx.ReadTimeout("reply lost"), error(400, "bad_request", "object already deleted")]
    async with client_for(server) as c:
        assert await c.delete_object("o1") == {"status": "already_deleted"}
        server.script = [error(400, "bad_request", "already_deleted")]
        assert await c.delete_relationship("r1") == {"status": "already_deleted"}
        server.script = [httpx.ReadError("reset"), error(400, "bad_request", "object is not deleted")]
        server.default = reply(200, OBJ)
        assert await c.restore_object("o1") == OBJ  # the HEAD, live, read after the refusal
        server.script = [error(400, "bad_request", "cannot patch deleted object")]
        assert (await failure(c.patch_object("o1", status="x"))).code == "REFUSED"
        stats = c.statistics()
    assert [r.method for r in server.requests[3:6]] == ["POST", "POST", "GET"]
    assert len(server.requests) == 7 and stats.failures == 3 and stats.last_error is not None
    assert "cannot patch deleted object" in stats.last_error


async def test_restoring_by_an_old_version_id_restores_the_deleted_head(client: EmergentClient,
                                                                        server: Server) -> None:
    tombstone = {**OBJ, "id": "o3", "version": 3, "deleted_at": "2026-11-24T00:00:00Z"}
    restored = {**OBJ, "id": "o4", "version": 4}
    server.script = [error(400, "bad_request", "object is not deleted"), reply(200, tombstone), reply(200, restored)]
    assert await client.restore_object("o1") == restored
    assert [(r.method, r.url.path) for r in server.requests] == [
        ("POST", "/api/graph/objects/o1/restore"), ("GET", "/api/graph/objects/o1"),
        ("POST", "/api/graph/objects/o3/restore")]


# --- bulk, paging, lookups, search ------------------------------------------------------------------

@pytest.mark.parametrize("count", [0, 101])
async def test_bulk_requests_outside_1_to_100_items_are_refused_before_sending(client: EmergentClient,
                                                                               server: Server, count: int) -> None:
    with pytest.raises(ValueError, match="1 to 100"):
        await client.bulk_create_objects([{"type": "Spec"}] * count)
    with pytest.raises(ValueError, match="1 to 100"):
        await client.bulk_create_relationships([{"type": "t", "src_id": "a", "dst_id": "b"}] * count)
    with pytest.raises(ValueError, match="1 to 100"):
        await client.bulk_update_status(["o1"] * count, "archived")
    with pytest.raises(ValueError, match="type"):
        await client.bulk_create_objects([{"key": "no type"}])
    assert server.requests == []


async def test_a_bulk_create_reports_each_items_success_or_error(client: EmergentClient, server: Server) -> None:
    server.default = reply(201, {"success": 1, "failed": 1, "results": [
        {"index": 0, "success": True, "object": OBJ},
        {"index": 1, "success": False, "error": "property validation failed: name"}]})
    result = await client.bulk_create_objects([{"type": "Spec", "key": "auth"}, {"type": "Spec", "key": "bad"}])
    assert (result.success, result.failed) == (1, 1)
    assert result.results[0].object == OBJ and result.results[0].error is None
    assert (result.results[1].index, result.results[1].success, result.results[1].object) == (1, False, None)
    assert result.results[1].error == "property validation failed: name"
    assert server.bodies()[0] == {"items": [{"type": "Spec", "key": "auth"}, {"type": "Spec", "key": "bad"}]}
    assert server.requests[0].url.path == "/api/graph/objects/bulk"


async def test_bulk_status_update_results_are_by_id(client: EmergentClient, server: Server) -> None:
    server.default = reply(200, {"success": 1, "failed": 1, "results": [
        {"id": "o1", "success": True}, {"id": "o2", "success": False, "error": "not found"}]})
    result = await client.bulk_update_status(["o1", "o2"], "archived")
    assert [(r.id, r.success, r.error) for r in result.results] == [("o1", True, None), ("o2", False, "not found")]
    assert server.bodies()[0] == {"ids": ["o1", "o2"], "status": "archived"}


async def test_iter_objects_follows_next_cursor_to_the_last_page(client: EmergentClient, server: Server) -> None:
    server.script = [reply(200, {"items": [{"id": "1"}, {"id": "2"}], "next_cursor": "c1", "total": 5}),
                     reply(200, {"items": [{"id": "3"}, {"id": "4"}], "next_cursor": "c2", "total": 5}),
                     reply(200, {"items": [{"id": "5"}], "total": 5})]
    seen = [item["id"] async for item in client.iter_objects(types=["Spec", "Requirement"], label="ws:1", limit=2)]
    assert seen == ["1", "2", "3", "4", "5"]
    queries = [dict(r.url.params) for r in server.requests]
    assert [q.get("cursor") for q in queries] == [None, "c1", "c2"]
    assert queries[0] == {"limit": "2", "label": "ws:1", "types": "Spec,Requirement"}


async def test_iter_objects_stops_on_a_repeated_cursor(client: EmergentClient, server: Server) -> None:
    server.default = reply(200, {"items": [{"id": "1"}], "next_cursor": "same", "total": 9})
    with pytest.raises(EmergentError, match="repeated the cursor"):
        async for _ in client.iter_objects(type="Spec"):
            pass
    assert len(server.requests) == 2


async def test_find_by_key_picks_the_live_duplicate_with_the_smallest_canonical_id(client: EmergentClient,
                                                                                   server: Server) -> None:
    server.default = reply(200, {"items": [
        {**OBJ, "id": "v9", "canonical_id": "c-b"}, {**OBJ, "id": "v3", "canonical_id": "c-a"},
        {**OBJ, "id": "v1", "canonical_id": "c-0", "deleted_at": "2026-11-24T00:00:00Z"},
        {**OBJ, "id": "v2", "canonical_id": "c-1", "key": "other"}], "total": 4})
    found = await client.find_by_key("Spec", "auth", label="ws:1")
    assert found is not None and found["id"] == "v3"
    assert dict(server.requests[0].url.params) == {"limit": "50", "type": "Spec", "key": "auth", "label": "ws:1"}
    server.default = reply(200, {"items": None, "total": 0})  # a Go nil slice
    assert await client.find_by_key("Spec", "auth") is None


async def test_search_filters_the_server_would_ignore_are_refused(client: EmergentClient, server: Server) -> None:
    with pytest.raises(ValueError, match="key"):
        await client.find_by_key("Spec", "")
    with pytest.raises(ValueError, match="not both"):
        await client.search_objects(type="Spec", types=["Task"])
    with pytest.raises(ValueError, match="limit"):
        await client.search_objects(limit=201)
    assert server.requests == []


async def test_relationship_pages_use_their_own_camel_case_shape(client: EmergentClient, server: Server) -> None:
    server.default = reply(200, {"data": [REL], "nextCursor": "n1", "hasMore": True})
    page = await client.search_relationships(type="has_requirement", src_id="a", include_deleted=True, limit=10)
    assert (page.data, page.next_cursor, page.has_more) == ([REL], "n1", True)
    assert dict(server.requests[0].url.params) == {"limit": "10", "type": "has_requirement", "src_id": "a",
                                                    "include_deleted": "true"}


async def test_object_edges_read_null_lists_as_empty(client: EmergentClient, server: Server) -> None:
    server.default = reply(200, {"incoming": None, "outgoing": [REL]})
    edges = await client.object_edges("o1")
    assert (edges.incoming, edges.outgoing) == ([], [REL])
    assert server.requests[0].url.path == "/api/graph/objects/o1/edges"


async def test_relationship_create_sends_the_upsert_body(client: EmergentClient, server: Server) -> None:
    server.default = reply(201, REL)
    assert (await client.create_relationship("has_requirement", "a", "b", properties={"x": 1}, weight=0.5)) == REL
    assert server.bodies()[0] == {"type": "has_requirement", "src_id": "a", "dst_id": "b", "properties": {"x": 1},
                                  "weight": 0.5}


async def test_patch_sends_null_to_delete_a_property_and_replace_labels(client: EmergentClient,
                                                                        server: Server) -> None:
    await client.patch_object("o1", properties={"gone": None, "name": "n"}, labels=["a"], replace_labels=True)
    assert server.requests[0].method == "PATCH"
    assert server.bodies()[0] == {"properties": {"gone": None, "name": "n"}, "labels": ["a"], "replaceLabels": True}


async def test_hybrid_search_and_fts_return_scored_hits(client: EmergentClient, server: Server) -> None:
    hits = {"data": [{"object": OBJ, "score": 0.9, "lexicalScore": 0.8}], "total": 1, "hasMore": False, "offset": 0}
    server.default = reply(200, hits)
    page = await client.hybrid_search("login flow", types=["Spec"], limit=5)
    assert page.hits[0]["score"] == 0.9 and page.total == 1 and not page.has_more
    assert server.requests[0].url.path == "/api/graph/search"
    assert server.bodies()[0] == {"query": "login flow", "limit": 5, "types": ["Spec"]}
    await client.fts("login", limit=3, offset=6)
    assert dict(server.requests[1].url.params) == {"q": "login", "limit": "3", "offset": "6"}


async def test_statistics_count_requests_failures_and_the_last_success(client: EmergentClient,
                                                                       server: Server) -> None:
    server.script = [error(404, "not_found", "no such object")]
    assert (await failure(client.get_object("gone"))).code == "NOT_FOUND"
    await client.get_object("o1")
    stats = client.statistics()
    assert (stats.requests, stats.failures, stats.last_error) == (2, 0, None)  # a 404 is an answer
    assert stats.last_success is not None and abs(stats.last_success - time.time()) < 60


# --- against the contract double (specactor/testing/emergent.py), over real HTTP ------------------------

@dataclass
class Live:
    double: Any
    project: str

    def client(self, key: str = "standalone-key", project: str | None = "", attempts: int = 1) -> EmergentClient:
        # Backoff of a millisecond: retries against the double happen, with no wait worth the name.
        return EmergentClient(self.double.url, key, self.project if project == "" else project,
                              max_attempts=attempts, backoff_initial=0.001, backoff_max=0.001, timeout=10.0)


@pytest.fixture
async def live(nursery: trio.Nursery) -> Live:
    double = pytest.importorskip("specactor.testing.emergent")  # hypercorn is an optional dependency
    server = double.EmergentDouble(tokens={"emt_contract": double.PROJECT_ID})
    await nursery.start(server.serve)
    return Live(server, double.PROJECT_ID)


async def test_an_object_lives_through_versions_deletion_and_restore_on_the_double(live: Live) -> None:
    async with live.client() as c:
        created = await c.create_object("Spec", key="auth", properties={"name": "auth", "purpose": "x"},
                                        labels=["ws:1"])
        assert created["canonical_id"] == created["id"] and created["version"] == 1
        canonical = created["canonical_id"]
        patched = await c.patch_object(canonical, properties={"purpose": None})
        assert patched["id"] != canonical and patched["canonical_id"] == canonical
        assert "purpose" not in patched["properties"]
        assert (await c.get_object(created["id"]))["id"] == patched["id"]  # an old id resolves to the HEAD
        found = await c.find_by_key("Spec", "auth", label="ws:1")
        assert found is not None and found["id"] == patched["id"]
        assert (await c.delete_object(canonical))["status"] == "deleted"
        assert await c.find_by_key("Spec", "auth") is None
        tombstone = await c.get_object(canonical)  # the HEAD, deleted
        assert tombstone["deleted_at"] and await c.delete_object(tombstone["id"]) == {"status": "already_deleted"}
        restored = await c.restore_object(canonical)  # refused for version 1, so the HEAD is restored
        assert not restored.get("deleted_at") and restored["canonical_id"] == canonical
        assert (await c.restore_object(canonical))["id"] == restored["id"]  # live: returned as it is
        with pytest.raises(EmergentError) as missing:
            await c.get_object("00000000-0000-4000-8000-000000000000")
        assert missing.value.code == "NOT_FOUND" and missing.value.server_code == "not_found"


async def test_the_double_accepts_each_credential_as_the_client_sends_it(live: Live) -> None:
    async with live.client(key="emt_contract", project=None) as c:  # the token names its project
        assert (await c.create_object("Task", key="1"))["project_id"] == live.project
    async with live.client(project=None) as c:
        err = await failure(c.search_objects(type="Task"))
        assert err.code == "REFUSED" and err.status == 400 and "project" in err.message
    async with live.client(key="wrong") as c:
        assert (await failure(c.search_objects(type="Task"))).code == "UNAUTHORIZED"
        assert (await c.health())["status"] == "healthy"


async def test_a_create_whose_reply_is_lost_is_not_sent_twice(live: Live) -> None:
    live.double.set_faults(apply_then_fail_rate=1.0, paths=("/api/graph/objects",))
    async with live.client(attempts=5) as c:
        err = await failure(c.create_object("Spec", key="lost"))
        assert err.code == "PROVIDER_ERROR" and not err.never_sent
        live.double.set_faults(apply_then_fail_rate=0.0)
        found = await c.find_by_key("Spec", "lost")  # what a caller does before creating again
    assert found is not None and [o["key"] for o in live.double.objects(live.project)] == ["lost"]
    assert live.double.request_counts[("POST", "/api/graph/objects")] == 1


async def test_reads_are_retried_on_the_doubles_503_and_creates_are_not(live: Live) -> None:
    live.double.set_faults(error_rates={503: 1.0})
    async with live.client(attempts=3) as c:
        assert (await failure(c.search_objects(type="Spec"))).status == 503
        assert (await failure(c.create_object("Spec", key="a"))).status == 503
    counts = live.double.request_counts
    assert counts[("GET", "/api/graph/objects/search")] == 3 and counts[("POST", "/api/graph/objects")] == 1


async def test_bulk_creates_paging_and_relationship_upserts_on_the_double(live: Live) -> None:
    async with live.client() as c:
        bulk = await c.bulk_create_objects([{"type": "Requirement", "key": f"r{i}"} for i in range(5)])
        assert (bulk.success, bulk.failed) == (5, 0) and [r.index for r in bulk.results] == [0, 1, 2, 3, 4]
        ids = [r.object["id"] for r in bulk.results if r.object]
        assert [o["key"] async for o in c.iter_objects(type="Requirement", limit=2, order="asc")] == \
            ["r0", "r1", "r2", "r3", "r4"]
        first = await c.create_relationship("depends_on", ids[0], ids[1])
        again = await c.create_relationship("depends_on", ids[0], ids[1])
        assert again["canonical_id"] == first["canonical_id"]
        rels = await c.bulk_create_relationships([{"type": "depends_on", "src_id": ids[1], "dst_id": ids[2]},
                                                  {"type": "depends_on", "src_id": ids[3], "dst_id": ids[3]}])
        assert (rels.success, rels.failed) == (1, 1) and rels.results[1].error
        page = await c.search_relationships(type="depends_on", src_id=ids[0])
        assert [r["canonical_id"] for r in page.data] == [first["canonical_id"]] and not page.has_more
        edges = await c.object_edges(ids[1])
        assert len(edges.incoming) == 1 and len(edges.outgoing) == 1
