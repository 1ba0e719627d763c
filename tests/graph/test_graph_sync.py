"""Graph sync through the tools, against the contract double over real HTTP: the workspace appears in
the graph, a tool's write follows, writes never wait for Emergent, outages and lost replies make no
duplicates, refusals become dead letters, and a forced sync repairs a graph edited by hand."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from specactor.testing import MemoryClient, open_memory_server
from specactor.testing.emergent import PROJECT_ID, EmergentDouble, Faults
from tests.conftest import check_frames
from tests.graph.support import graph_config, mirror_matches, write_change

WS = "acme/auth-svc"


@pytest.fixture
async def double() -> AsyncIterator[EmergentDouble]:
    server = EmergentDouble()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        yield server
        nursery.cancel_scope.cancel()


async def call(client: MemoryClient, tool: str, timeout: float = 30, **arguments: Any) -> dict[str, Any]:
    reply = await client.request("tools/call", {"name": tool, "arguments": arguments}, timeout=timeout)
    return reply["result"]["structuredContent"]  # type: ignore[no-any-return]


async def synced(client: MemoryClient, force: bool = False) -> dict[str, Any]:
    out = await call(client, "graph_sync", timeout=60, force=force)
    assert out["success"] is True, out
    assert out["data"]["pending"] == 0, out
    return out["data"]  # type: ignore[no-any-return]


async def test_the_workspace_appears_in_the_graph_and_a_ticked_task_follows(tmp_path: Path,
                                                                            double: EmergentDouble) -> None:
    write_change(tmp_path)
    async with open_memory_server(graph_config(tmp_path, double.url)) as client:
        await client.initialize()
        first = await synced(client)
        assert first["created"] > 0 and first["failed"] == 0, first
        mirror_matches(double, tmp_path)
        ticked = await call(client, "task_complete", changeId="add-2fa", task="1.5")
        assert ticked["success"] is True, ticked
        second = await synced(client)
        assert second["updated"] >= 1 and second["created"] == 0, second
        mirror_matches(double, tmp_path)
        task = next(o for o in double.objects(PROJECT_ID) if o["key"] == f"{WS}/change:add-2fa/task:1.5")
        assert task["properties"]["status"] == "completed"
        status = await call(client, "graph_status")
        assert status["data"]["connected"] is True and status["data"]["outbox"]["pending"] == 0, status
        resource = await client.request("resources/read", {"uri": "specactor://graph/status"})
        assert '"pending":0' in resource["result"]["contents"][0]["text"]
        check_frames(client)


async def test_a_write_replies_while_emergent_is_down_and_the_backlog_drains_when_it_is_back(
        tmp_path: Path, double: EmergentDouble) -> None:
    write_change(tmp_path)
    double.set_faults(down=True)
    async with open_memory_server(graph_config(tmp_path, double.url)) as client:
        await client.initialize()
        with trio.fail_after(10):  # a write never waits for the graph
            ticked = await call(client, "task_complete", changeId="add-2fa", task="1.5")
        assert ticked["success"] is True, ticked
        down = await call(client, "graph_sync")
        assert down["success"] is False and down["error"]["code"] == "PROVIDER_ERROR", down
        assert double.url in down["error"]["message"] and "outbox" in down["error"]["message"]
        status = (await call(client, "graph_status"))["data"]
        assert status["connected"] is False and status["outbox"]["pending"] > 0 and status["lastError"], status
        search = await call(client, "graph_search", query="second factor")
        assert search["success"] is False and search["error"]["code"] == "PROVIDER_ERROR", search
        double.set_faults(down=False)
        await synced(client)
        mirror_matches(double, tmp_path)


async def test_lost_replies_and_server_errors_never_make_a_second_object(tmp_path: Path,
                                                                         double: EmergentDouble) -> None:
    write_change(tmp_path)
    write_change(tmp_path, "add-sso")
    double.faults = Faults(apply_then_fail_rate=0.5, error_rates={503: 0.2}, reset_rate=0.1)
    async with open_memory_server(graph_config(tmp_path, double.url)) as client:
        await client.initialize()
        for _ in range(20):
            out = await call(client, "graph_sync", timeout=60)
            if out["success"] and out["data"]["pending"] == 0:
                break
        double.faults = Faults()
        await synced(client)
        assert double.duplicate_keys(PROJECT_ID) == []
        mirror_matches(double, tmp_path)


async def test_a_refused_item_is_a_dead_letter_with_the_servers_words(tmp_path: Path, double: EmergentDouble) -> None:
    write_change(tmp_path)
    async with open_memory_server(graph_config(tmp_path, double.url)) as client:
        await client.initialize()
        await synced(client)
        double.set_faults(error_rates={400: 1.0}, paths=["/api/graph/objects/"])  # every PATCH refused
        assert (await call(client, "task_complete", changeId="add-2fa", task="1.5"))["success"] is True
        out = await call(client, "graph_sync")
        assert out["success"] is True and out["data"]["failed"] >= 1, out
        status = (await call(client, "graph_status"))["data"]
        assert status["outbox"]["deadLetters"] >= 1 and status["outbox"]["pending"] == 0, status
        letter = status["recentDeadLetters"][0]
        assert letter["code"] == "REFUSED" and letter["status"] == 400 and letter["key"].startswith(WS), letter
        double.set_faults(error_rates={}, paths=[])
        await synced(client, force=True)  # a forced sync tries the dead letters again
        assert (await call(client, "graph_status"))["data"]["outbox"]["deadLetters"] == 0
        mirror_matches(double, tmp_path)


async def test_a_forced_sync_repairs_objects_deleted_changed_or_duplicated_by_hand(tmp_path: Path,
                                                                                  double: EmergentDouble) -> None:
    write_change(tmp_path)
    async with open_memory_server(graph_config(tmp_path, double.url)) as client:
        await client.initialize()
        await synced(client)
        import httpx

        headers = {"X-API-Key": "standalone-key", "X-Project-ID": PROJECT_ID}
        objects = {o["key"]: o for o in double.objects(PROJECT_ID)}
        async with httpx.AsyncClient(base_url=double.url, headers=headers) as http:
            proposal = objects[f"{WS}/change:add-2fa/proposal"]
            await http.delete(f"/api/graph/objects/{proposal['canonical_id']}")
            change = objects[f"{WS}/change:add-2fa"]
            await http.patch(f"/api/graph/objects/{change['canonical_id']}", json={"properties": {"name": "edited"}})
            task = objects[f"{WS}/change:add-2fa/task:1.1"]
            copy = {k: task[k] for k in ("type", "key", "properties", "labels")}
            assert (await http.post("/api/graph/objects", json=copy)).status_code == 201
            stray = {"type": "Task", "key": f"{WS}/change:gone/task:9", "labels": [f"workspace:{WS}"],
                     "properties": {"number": "9", "description": "left over", "status": "pending"}}
            assert (await http.post("/api/graph/objects", json=stray)).status_code == 201
        assert double.duplicate_keys(PROJECT_ID)
        out = await synced(client, force=True)
        assert out["deleted"] >= 2 and out["created"] + out["updated"] >= 2, out
        mirror_matches(double, tmp_path)


async def test_graph_get_answers_an_object_with_its_neighbours_and_search_finds_it(tmp_path: Path,
                                                                                    double: EmergentDouble) -> None:
    write_change(tmp_path)
    async with open_memory_server(graph_config(tmp_path, double.url)) as client:
        await client.initialize()
        await synced(client)
        got = await call(client, "graph_get", key="change:add-2fa", depth=2)
        assert got["success"] is True, got
        data = got["data"]
        assert data["object"]["type"] == "Change" and data["object"]["workspace"] == WS
        kinds = {(n["relationship"], n["object"]["type"], n["depth"]) for n in data["neighbours"]}
        assert {("has_proposal", "Proposal", 1), ("has_task", "Task", 1), ("has_spec", "Spec", 1),
                ("has_requirement", "Requirement", 2)} <= kinds, kinds
        by_id = await call(client, "graph_get", id=data["object"]["canonicalId"], depth=0)
        assert by_id["data"]["object"]["key"] == f"{WS}/change:add-2fa" and by_id["data"]["neighbours"] == []
        missing = await call(client, "graph_get", key="change:nothing")
        assert missing["success"] is False and missing["error"]["code"] == "NOT_FOUND"
        neither = await call(client, "graph_get")
        assert neither["success"] is False and neither["error"]["code"] == "NOT_FOUND"
        found = await call(client, "graph_search", query="second factor", types=["Proposal"], workspaceOnly=True)
        assert found["success"] is True and found["data"]["hits"], found
        assert all(h["object"]["type"] == "Proposal" for h in found["data"]["hits"])
        check_frames(client)


async def test_two_servers_on_one_workspace_share_its_outbox_and_one_drains_it_at_a_time(
        tmp_path: Path, double: EmergentDouble) -> None:
    write_change(tmp_path)
    config = graph_config(tmp_path, double.url)
    async with open_memory_server(config) as first:
        await first.initialize()
        await synced(first)
        async with open_memory_server(config) as second:  # a second assistant on the same repository
            await second.initialize()
            assert (await call(second, "task_complete", changeId="add-2fa", task="1.5"))["success"] is True
            await synced(second)  # queued by the second, drained by the first
            assert first.app.services.graph.rounds > 0
            mirror_matches(double, tmp_path)
        assert double.duplicate_keys(PROJECT_ID) == []
    ignored = (tmp_path / ".specactor" / ".gitignore").read_text().splitlines()
    assert {"graph.db", "graph.db-wal", "graph.db-shm", "graph.db.lock"} <= set(ignored)


async def test_the_second_server_drains_once_the_first_is_gone(tmp_path: Path, double: EmergentDouble) -> None:
    write_change(tmp_path)
    config = graph_config(tmp_path, double.url)
    async with open_memory_server(config) as second:
        await second.initialize()
        async with open_memory_server(config) as first:
            await first.initialize()
            await synced(first)
        # the first server stopped: its lock is free, and the second takes it on its next try
        assert (await call(second, "task_complete", changeId="add-2fa", task="1.6"))["success"] is True
        await synced(second)
        mirror_matches(double, tmp_path)
