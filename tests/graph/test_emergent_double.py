"""The Emergent double answers as the v0.7.0 server does (emergent.md sections 1-5 and 8), over real HTTP,
and injects the faults it is asked for."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from specactor.testing.emergent import PROJECT_ID, EmergentDouble

OTHER_PROJECT = "9b2f1e4d-3c5a-4b6e-8f7d-0a1b2c3d4e5f"
TOKEN = "emt_project_token"
STANDALONE = {"X-API-Key": "standalone-key", "X-Project-ID": PROJECT_ID}


@pytest.fixture
async def double(nursery: trio.Nursery) -> EmergentDouble:
    double = EmergentDouble(tokens={TOKEN: OTHER_PROJECT}, inverse_types={"blocks": "blocked_by"})
    await nursery.start(double.serve)
    return double


@pytest.fixture
async def client(double: EmergentDouble) -> AsyncIterator[httpx.AsyncClient]:
    assert double.url is not None
    async with httpx.AsyncClient(base_url=double.url, headers=STANDALONE, timeout=10) as client:
        yield client


async def create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/api/graph/objects", json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def relate(client: httpx.AsyncClient, type_: str, src: str, dst: str, **body: Any) -> httpx.Response:
    return await client.post("/api/graph/relationships", json={"type": type_, "src_id": src, "dst_id": dst, **body})


def error_of(response: httpx.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["message"]


# ---------------------------------------------------------------------- auth and context


async def test_a_standalone_key_in_x_api_key_reaches_the_project_in_x_project_id(client: httpx.AsyncClient) -> None:
    created = await create(client, type="Task")
    assert created["project_id"] == PROJECT_ID


async def test_a_project_token_as_bearer_is_accepted_and_its_project_wins_over_the_header(
        double: EmergentDouble) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Project-ID": PROJECT_ID}
    async with httpx.AsyncClient(base_url=str(double.url), headers=headers) as client:
        created = await create(client, type="Task")
    assert created["project_id"] == OTHER_PROJECT
    assert double.objects(OTHER_PROJECT)[0]["id"] == created["id"]
    assert double.objects(PROJECT_ID) == []


@pytest.mark.parametrize(("headers", "code"), [
    ({"X-API-Key": TOKEN}, "missing_token"),  # emt_ tokens are never standalone keys
    ({"X-API-Key": "wrong-key"}, "missing_token"),
    ({"Authorization": "Bearer emt_unknown"}, "invalid_token"),
    ({"Authorization": "Bearer some-oidc-token"}, "invalid_token"),
    ({"Authorization": "Basic dXNlcjpwYXNz"}, "missing_token"),
    ({}, "missing_token"),
])
async def test_every_auth_failure_is_401_in_the_error_envelope(double: EmergentDouble, headers: dict[str, str],
                                                               code: str) -> None:
    async with httpx.AsyncClient(base_url=str(double.url), headers={**headers, "X-Project-ID": PROJECT_ID}) as client:
        response = await client.get("/api/graph/objects/search")
    assert response.status_code == 401
    assert response.json() == {"error": {"code": code, "message": response.json()["error"]["message"]}}
    assert double.objects() == []


@pytest.mark.parametrize(("project", "status", "code", "message"), [
    (None, 400, "bad_request", "invalid project_id"),  # v0.7.0 overwrites "project_id is required"
    ("not-a-uuid", 400, "bad_request", "invalid project_id"),
    (OTHER_PROJECT.replace("9b", "00"), 404, "project_not_found", "Project not found"),
])
async def test_a_standalone_key_needs_a_known_project_uuid(double: EmergentDouble, project: str | None, status: int,
                                                           code: str, message: str) -> None:
    headers = {"X-API-Key": "standalone-key", **({"X-Project-ID": project} if project else {})}
    async with httpx.AsyncClient(base_url=str(double.url), headers=headers) as client:
        response = await client.post("/api/graph/objects", json={"type": "Task"})
    assert error_of(response) == (status, code, message)


async def test_health_needs_no_credentials(double: EmergentDouble) -> None:
    async with httpx.AsyncClient(base_url=str(double.url)) as client:
        for path in ("/health", "/api/health", "/ready"):
            response = await client.get(path)
            assert response.status_code == 200 and "status" in response.json()
        healthz = await client.get("/healthz")
    assert (healthz.status_code, healthz.text) == (200, "OK")


async def test_unknown_routes_wrong_methods_and_bad_json_answer_in_the_envelope(client: httpx.AsyncClient) -> None:
    assert error_of(await client.get("/nowhere")) == (404, "not_found", "Not Found")
    assert error_of(await client.get("/api/graph/nowhere"))[:2] == (404, "not_found")
    assert (await client.put("/api/graph/objects/search")).status_code == 405
    assert "error" in (await client.put("/api/graph/objects/search")).json()
    bad = await client.post("/api/graph/objects", content=b"{not json", headers={"content-type": "application/json"})
    assert error_of(bad) == (400, "bad_request", "invalid request body")
    assert error_of(await client.get("/api/graph/objects/not-a-uuid")) == (400, "bad_request", "invalid object id")


async def test_unknown_routes_under_api_graph_still_ask_for_credentials_first(double: EmergentDouble) -> None:
    async with httpx.AsyncClient(base_url=str(double.url)) as client:
        response = await client.get("/api/graph/nowhere")
    assert error_of(response)[:2] == (401, "missing_token")


# ---------------------------------------------------------------------- objects and versions


async def test_a_new_object_is_version_one_and_its_own_canonical(client: httpx.AsyncClient) -> None:
    created = await create(client, type="Task", key="1.1", status="pending", labels=["a"], properties={"n": 1})
    assert created["canonical_id"] == created["id"]
    assert created["version"] == 1
    assert (created["type"], created["key"], created["status"]) == ("Task", "1.1", "pending")
    assert (created["labels"], created["properties"]) == (["a"], {"n": 1})
    assert created["created_at"].endswith("Z")
    assert "deleted_at" not in created and "supersedes_id" not in created  # Go's omitempty


async def test_a_patch_writes_a_new_row_and_the_old_row_points_at_it(client: httpx.AsyncClient) -> None:
    first = await create(client, type="Task", properties={"title": "one"})
    patched = (await client.patch(f"/api/graph/objects/{first['id']}", json={"properties": {"title": "two"}})).json()
    assert patched["id"] != first["id"]
    assert (patched["canonical_id"], patched["version"]) == (first["id"], 2)
    old = (await client.get(f"/api/graph/objects/{first['id']}")).json()
    assert old["supersedes_id"] == patched["id"] and old["properties"] == {"title": "one"}
    head = (await client.get(f"/api/graph/objects/{first['id']}", params={"resolveHead": "true"})).json()
    assert head["id"] == patched["id"]
    history = (await client.get(f"/api/graph/objects/{patched['id']}/history")).json()["versions"]
    assert [v["version"] for v in history] == [2, 1]


async def test_a_patch_merges_properties_and_a_null_deletes_a_key(client: httpx.AsyncClient) -> None:
    first = await create(client, type="Task", properties={"keep": 1, "drop": 2}, labels=["x"])
    url = f"/api/graph/objects/{first['id']}"
    merged = (await client.patch(url, json={"properties": {"drop": None, "add": 3}, "labels": ["y"]})).json()
    assert merged["properties"] == {"keep": 1, "add": 3}
    assert merged["labels"] == ["x", "y"]
    replaced = (await client.patch(url, json={"labels": ["z"], "replaceLabels": True, "status": "done"})).json()
    assert (replaced["labels"], replaced["status"], replaced["version"]) == (["z"], "done", 3)


async def test_delete_writes_a_tombstone_and_the_tombstone_refuses_a_second_delete_and_a_patch(
        client: httpx.AsyncClient, double: EmergentDouble) -> None:
    first = await create(client, type="Task", key="gone")
    assert (await client.delete(f"/api/graph/objects/{first['id']}")).json() == {"status": "deleted"}
    tombstone = (await client.get(f"/api/graph/objects/{first['id']}", params={"resolveHead": "true"})).json()
    assert tombstone["version"] == 2 and tombstone["deleted_at"]
    again = await client.delete(f"/api/graph/objects/{tombstone['id']}")
    assert error_of(again) == (400, "bad_request", "object already deleted")
    patch = await client.patch(f"/api/graph/objects/{tombstone['id']}", json={"properties": {"a": 1}})
    assert error_of(patch) == (400, "bad_request", "cannot patch deleted object")
    found = (await client.get("/api/graph/objects/search", params={"type": "Task", "key": "gone"})).json()
    assert found == {"items": [], "total": 0}
    found = (await client.get("/api/graph/objects/search", params={"key": "gone", "include_deleted": "true"})).json()
    assert found["total"] == 1
    restored = (await client.post(f"/api/graph/objects/{first['id']}/restore"))
    assert error_of(restored) == (400, "bad_request", "object is not deleted")  # the row named is live
    restored = (await client.post(f"/api/graph/objects/{tombstone['id']}/restore")).json()
    assert restored["version"] == 3 and "deleted_at" not in restored
    assert [o["id"] for o in double.objects()] == [restored["id"]]


async def test_v0_7_checks_deleted_on_the_row_named_so_an_old_id_still_versions_a_deleted_head(
        client: httpx.AsyncClient) -> None:
    first = await create(client, type="Task")
    await client.delete(f"/api/graph/objects/{first['id']}")
    twice = await client.delete(f"/api/graph/objects/{first['id']}")  # the canonical row is not a tombstone
    assert twice.status_code == 200
    revived = (await client.patch(f"/api/graph/objects/{first['id']}", json={"properties": {"a": 1}})).json()
    assert revived["version"] == 4 and "deleted_at" not in revived


@pytest.mark.parametrize(("body", "message"), [
    ({}, "type is required"),
    ({"type": "T" * 65}, "type must be at most 64 characters"),
    ({"type": "Task", "key": "k" * 129}, "key must be at most 128 characters"),
    ({"type": "Task", "labels": [str(i) for i in range(33)]}, "labels must be at most 32, each at most 64 characters"),
    ({"type": "Task", "properties": []}, "invalid request body"),
])
async def test_an_invalid_object_is_400_with_a_message(client: httpx.AsyncClient, body: dict[str, Any],
                                                      message: str) -> None:
    assert error_of(await client.post("/api/graph/objects", json=body)) == (400, "bad_request", message)


# ---------------------------------------------------------------------- search


async def test_search_pages_by_cursor_with_the_limit_clamped_to_200(client: httpx.AsyncClient) -> None:
    for start in (0, 100, 200):
        items = [{"type": "Spec", "key": f"s{i}"} for i in range(start, min(start + 100, 250))]
        assert (await client.post("/api/graph/objects/bulk", json={"items": items})).json()["success"] == len(items)
    await create(client, type="Other")
    seen: list[str] = []
    params: dict[str, str] = {"type": "Spec", "limit": "500"}
    pages = []
    while True:
        page = (await client.get("/api/graph/objects/search", params=params)).json()
        pages.append(len(page["items"]))
        assert page["total"] == 250
        seen += [item["key"] for item in page["items"]]
        if "next_cursor" not in page:
            break
        assert json.loads(page["next_cursor"]).keys() == {"created_at", "id"}  # v0.7.0: plain JSON
        params["cursor"] = page["next_cursor"]
    assert pages == [200, 50]
    assert seen == [f"s{i}" for i in reversed(range(250))]  # newest first by default
    ascending = (await client.get("/api/graph/objects/search", params={"type": "Spec", "order": "asc"})).json()
    assert [item["key"] for item in ascending["items"]] == [f"s{i}" for i in range(20)]  # limit 20 by default


async def test_search_finds_by_type_and_key_and_reports_duplicates(client: httpx.AsyncClient,
                                                                   double: EmergentDouble) -> None:
    one, two = await create(client, type="Task", key="1"), await create(client, type="Task", key="1")
    await create(client, type="Spec", key="1")
    found = (await client.get("/api/graph/objects/search", params={"type": "Task", "key": "1"})).json()
    assert {item["id"] for item in found["items"]} == {one["id"], two["id"]}
    assert double.duplicate_keys() == [("Task", "1")]


async def test_search_filters_by_label_status_and_repeated_types(client: httpx.AsyncClient) -> None:
    await create(client, type="A", labels=["red", "big"], status="open")
    await create(client, type="B", labels=["blue"], status="open")
    await create(client, type="C", labels=["red"], status="closed")

    async def types(params: list[tuple[str, str | int | float | bool | None]]) -> list[str]:
        page = (await client.get("/api/graph/objects/search", params=params)).json()
        return sorted(item["type"] for item in page["items"])

    assert await types([("label", "red")]) == ["A", "C"]
    assert await types([("labels", "big"), ("labels", "blue")]) == ["A", "B"]  # any of them
    assert await types([("types", "A"), ("types", "B"), ("status", "open")]) == ["A", "B"]
    assert await types([("types", "A, C"), ("labels", "red,blue")]) == ["A", "C"]  # csv too
    assert await types([("property_filters", '[{"path": "x", "op": "exists"}]')]) == []


async def test_a_cursor_that_is_not_the_servers_is_400(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/graph/objects/search", params={"cursor": "bm90LWpzb24="})
    assert error_of(response) == (400, "bad_request", "invalid cursor")


async def test_full_text_needs_every_word_and_hybrid_search_any(client: httpx.AsyncClient) -> None:
    both = await create(client, type="Requirement", key="login", properties={"text": "users log in with a password"})
    await create(client, type="Requirement", key="logout", properties={"text": "users log out"})
    fts = (await client.get("/api/graph/objects/fts", params={"q": "password users"})).json()
    assert [hit["object"]["id"] for hit in fts["data"]] == [both["id"]]
    assert (fts["total"], fts["hasMore"], fts["offset"]) == (1, False, 0)
    hybrid = (await client.post("/api/graph/search", json={"query": "password users", "limit": 5})).json()
    assert len(hybrid["data"]) == 2 and hybrid["data"][0]["object"]["id"] == both["id"]
    assert hybrid["data"][0]["score"] > hybrid["data"][1]["score"]
    assert error_of(await client.get("/api/graph/objects/fts"))[2] == "query parameter 'q' is required"
    assert error_of(await client.post("/api/graph/search", json={}))[2] == "either query or vector is required"


# ---------------------------------------------------------------------- bulk


@pytest.mark.parametrize(("count", "message"), [(0, "items is required and must not be empty"),
                                                (101, "items must not exceed 100")])
async def test_bulk_takes_one_to_a_hundred_items(client: httpx.AsyncClient, double: EmergentDouble, count: int,
                                                 message: str) -> None:
    items = [{"type": "Task"}] * count
    for path in ("/api/graph/objects/bulk", "/api/graph/relationships/bulk"):
        assert error_of(await client.post(path, json={"items": items})) == (400, "bad_request", message)
    assert double.objects() == []


async def test_bulk_creates_each_item_on_its_own(client: httpx.AsyncClient) -> None:
    reply = await client.post("/api/graph/objects/bulk", json={"items": [{"type": "Task"}, {"key": "no type"}]})
    assert reply.status_code == 200
    body = reply.json()
    assert (body["success"], body["failed"]) == (1, 1)
    ok, failed = body["results"]
    assert ok["index"] == 0 and ok["success"] and ok["object"]["version"] == 1
    assert failed == {"index": 1, "success": False, "error": "bad_request: type is required"}


async def test_bulk_update_status_changes_live_heads_in_place(client: httpx.AsyncClient) -> None:
    task = await create(client, type="Task", status="pending")
    body = {"ids": [task["id"], "not-a-uuid"], "status": "done"}
    reply = (await client.post("/api/graph/objects/bulk-update-status", json=body)).json()
    assert (reply["success"], reply["failed"]) == (1, 1)
    assert reply["results"][1] == {"id": "not-a-uuid", "success": False, "error": "invalid UUID"}
    head = (await client.get(f"/api/graph/objects/{task['id']}")).json()
    assert (head["status"], head["version"]) == ("done", 1)


# ---------------------------------------------------------------------- relationships


async def test_a_relationship_upserts_on_type_src_and_dst(client: httpx.AsyncClient) -> None:
    a, b = await create(client, type="Task"), await create(client, type="Task")
    first = await relate(client, "depends_on", a["id"], b["id"], properties={"why": "x"})
    assert first.status_code == 201
    same = await relate(client, "depends_on", a["id"], b["id"], properties={"why": "x"}, weight=2.0)
    assert same.status_code == 201 and same.json()["id"] == first.json()["id"]  # weight is not compared
    changed = (await relate(client, "depends_on", a["id"], b["id"], properties={"why": "y"})).json()
    assert (changed["canonical_id"], changed["version"]) == (first.json()["id"], 2)
    assert (await client.delete(f"/api/graph/relationships/{changed['id']}")).json()["deleted_at"]
    again = await client.delete(f"/api/graph/relationships/{changed['id']}")
    assert error_of(again) == (400, "bad_request", "already_deleted")
    revived = (await relate(client, "depends_on", a["id"], b["id"], properties={"why": "y"})).json()
    assert revived["version"] == 4 and "deleted_at" not in revived
    history = (await client.get(f"/api/graph/relationships/{revived['id']}/history")).json()
    assert [r["version"] for r in history] == [4, 3, 2, 1]


async def test_a_new_relationship_with_an_inverse_type_makes_the_inverse_too(client: httpx.AsyncClient,
                                                                              double: EmergentDouble) -> None:
    a, b = await create(client, type="Task"), await create(client, type="Task")
    made = (await relate(client, "blocks", a["id"], b["id"])).json()
    inverse = made["inverse_relationship"]
    assert (inverse["type"], inverse["src_id"], inverse["dst_id"]) == ("blocked_by", b["id"], a["id"])
    assert "inverse_relationship" not in (await relate(client, "blocks", a["id"], b["id"])).json()
    assert sorted(r["type"] for r in double.relationships()) == ["blocked_by", "blocks"]
    edges = (await client.get(f"/api/graph/objects/{a['id']}/edges")).json()
    assert ([r["type"] for r in edges["outgoing"]], [r["type"] for r in edges["incoming"]]) == (["blocks"],
                                                                                              ["blocked_by"])


async def test_relationship_endpoints_must_exist_and_differ(client: httpx.AsyncClient) -> None:
    a = await create(client, type="Task")
    assert error_of(await relate(client, "x", a["id"], a["id"])) == (400, "bad_request", "self_loop_not_allowed")
    missing = "11111111-2222-4333-8444-555555555555"
    assert error_of(await relate(client, "x", a["id"], missing)) == (404, "not_found", "dst_object_not_found")
    no_dst = await client.post("/api/graph/relationships", json={"type": "x", "src_id": a["id"]})
    assert error_of(no_dst) == (400, "bad_request", "dst_id is required")
    assert error_of(await relate(client, "x", a["id"], ""))[2] == "invalid request body"  # not a uuid.UUID


async def test_a_relationship_cannot_reach_into_another_project(client: httpx.AsyncClient,
                                                                double: EmergentDouble) -> None:
    mine = await create(client, type="Task")
    async with httpx.AsyncClient(base_url=str(double.url), headers={"Authorization": f"Bearer {TOKEN}"}) as other:
        theirs = await create(other, type="Task")
    response = await relate(client, "x", mine["id"], theirs["id"])
    assert error_of(response) == (400, "bad_request", "relationship_project_mismatch")
    assert error_of(await client.get(f"/api/graph/objects/{theirs['id']}")) == (404, "not_found", "Resource not found")


async def test_relationship_search_pages_with_data_next_cursor_and_has_more(client: httpx.AsyncClient) -> None:
    hub = await create(client, type="Change")
    spokes = (await client.post("/api/graph/objects/bulk", json={"items": [{"type": "Task"}] * 25})).json()
    items = [{"type": "has_task", "src_id": hub["id"], "dst_id": r["object"]["id"]} for r in spokes["results"]]
    assert (await client.post("/api/graph/relationships/bulk", json={"items": items})).json()["success"] == 25
    first = (await client.get("/api/graph/relationships/search", params={"src_id": hub["id"]})).json()
    assert (len(first["data"]), first["hasMore"]) == (20, True)
    rest = (await client.get("/api/graph/relationships/search",
                             params={"src_id": hub["id"], "cursor": first["nextCursor"]})).json()
    assert (len(rest["data"]), rest["hasMore"], "nextCursor" in rest) == (5, False, False)
    ids = [r["dst_id"] for r in first["data"] + rest["data"]]
    assert ids == [item["dst_id"] for item in items]  # oldest first: the relationship default


# ---------------------------------------------------------------------- faults


async def test_latency_delays_every_reply(client: httpx.AsyncClient, double: EmergentDouble) -> None:
    double.set_faults(latency=0.2)
    start = trio.current_time()
    assert (await client.get("/health")).status_code == 200
    assert trio.current_time() - start >= 0.2


async def test_an_injected_429_carries_retry_after_and_applies_nothing(client: httpx.AsyncClient,
                                                                       double: EmergentDouble) -> None:
    double.set_faults(error_rates={429: 1.0}, retry_after=7)
    response = await client.post("/api/graph/objects", json={"type": "Task"})
    assert (response.status_code, response.headers["retry-after"]) == (429, "7")
    assert response.json()["error"]["code"] == "too_many_requests"
    double.set_faults(error_rates={503: 1.0})
    assert error_of(await client.get("/health"))[:2] == (503, "service_unavailable")
    assert double.objects() == []


async def test_a_reset_is_a_transport_error_and_applies_nothing(client: httpx.AsyncClient,
                                                                double: EmergentDouble) -> None:
    double.set_faults(reset_rate=1.0)
    with pytest.raises(httpx.TransportError):
        await client.post("/api/graph/objects", json={"type": "Task"})
    double.set_faults(reset_rate=0.0)
    assert double.objects() == []
    assert (await client.get("/health")).status_code == 200  # the client's next connection is fine


async def test_apply_then_fail_applies_the_write_and_loses_the_reply(client: httpx.AsyncClient,
                                                                     double: EmergentDouble) -> None:
    double.set_faults(apply_then_fail_rate=1.0)
    with pytest.raises(httpx.TransportError):
        await client.post("/api/graph/objects", json={"type": "Task", "key": "lost"})
    assert (await client.get("/api/graph/objects/search")).status_code == 200  # reads are not writes
    assert [o["key"] for o in double.objects()] == ["lost"]


async def test_a_stall_holds_the_request_for_stall_seconds(client: httpx.AsyncClient, double: EmergentDouble) -> None:
    double.set_faults(stall_rate=1.0, stall_seconds=0.3)
    start = trio.current_time()
    with trio.fail_after(10):
        assert (await client.get("/health")).status_code == 200
    assert trio.current_time() - start >= 0.3


async def test_down_resets_everything_health_included_even_outside_the_fault_paths(
        client: httpx.AsyncClient, double: EmergentDouble) -> None:
    double.set_faults(reset_rate=1.0, paths=("/api/graph",))
    assert (await client.get("/health")).status_code == 200  # outside the paths
    double.set_faults(reset_rate=0.0, down=True)
    for path in ("/health", "/api/graph/objects/search"):
        with pytest.raises(httpx.TransportError):
            await client.get(path)
    double.set_faults(down=False)
    assert (await client.get("/health")).status_code == 200


async def test_the_same_seed_draws_the_same_faults(nursery: trio.Nursery) -> None:
    outcomes = []
    for _ in range(2):
        double = EmergentDouble(seed=7)
        double.set_faults(error_rates={500: 0.5})
        await nursery.start(double.serve)
        async with httpx.AsyncClient(base_url=str(double.url)) as client:
            outcomes.append([(await client.get("/health")).status_code for _ in range(12)])
    assert outcomes[0] == outcomes[1] and {200, 500} == set(outcomes[0])


# ---------------------------------------------------------------------- control, threads, CLI


async def test_the_control_endpoints_set_faults_show_state_and_reset(client: httpx.AsyncClient,
                                                                     double: EmergentDouble) -> None:
    task = await create(client, type="Task", key="1")
    put = await client.put("/_double/faults", json={"error_rates": {"503": 1.0}, "paths": ["/api/graph/objects"]})
    assert put.json()["error_rates"] == {"503": 1.0}
    assert double.faults.error_rates == {503: 1.0}
    assert (await client.get("/api/graph/objects/search")).status_code == 503
    state = (await client.get("/_double/state", params={"project": PROJECT_ID})).json()  # never faulted
    assert [o["id"] for o in state["objects"]] == [task["id"]]
    assert state["counts"]["GET /api/graph/objects/search"] == 1 and state["relationships"] == []
    assert (await client.put("/_double/faults", json={"bogus": 1})).status_code == 400
    assert (await client.put("/_double/faults", json={})).json()["error_rates"] == {}
    assert (await client.post("/_double/reset")).json() == {"status": "reset"}
    assert double.objects() == [] and double.request_counts == {}


def test_running_in_thread_serves_a_synchronous_test() -> None:
    double = EmergentDouble()
    with double.running_in_thread() as url, httpx.Client(base_url=url, headers=STANDALONE) as client:
        created = client.post("/api/graph/objects", json={"type": "Task"}).json()
        assert double.objects()[0]["id"] == created["id"]
        assert double.request_counts == {("POST", "/api/graph/objects"): 1}
    with pytest.raises(httpx.TransportError), httpx.Client() as after:
        after.get(f"{url}/health")


@pytest.mark.slow
async def test_the_cli_serves_until_killed_and_writes_its_url(tmp_path: Path) -> None:
    port_file = tmp_path / "emergent.url"
    command = [sys.executable, "-m", "specactor.testing.emergent", "--api-key", "k", "--token", f"{TOKEN}={PROJECT_ID}",
               "--latency-ms", "1", "--port-file", str(port_file)]
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                assert chunk, "the CLI exited before printing its URL"
                line += chunk
        url = line.decode().strip()
        assert port_file.read_text().strip() == url
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            assert (await client.post("/api/graph/objects", json={"type": "Task"})).status_code == 201
    finally:
        process.kill()
        with trio.fail_after(10):
            await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()
