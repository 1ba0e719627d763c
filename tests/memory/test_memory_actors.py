"""The memory actors live under the app's supervisor: each starts on first use, a crashed one is
restarted and the tools go on answering, a database that cannot be opened fails only the tools
that need it (and is used once it opens), and every committed write is published on the change
feed once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specactor.testing import MemoryClient, open_memory_server
from tests.memory.conftest import Repo, error, item, ok, server_config
from tests.test_change_feed_writes import one, published

NAMES = ("memory-store", "knowledge-reader", "knowledge-sync")


def watch(client: MemoryClient, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The memory actors the app built (Services.memory), by their supervisor names."""
    memory = client.app.services.memory
    return {a.spec.name: a for a in (memory.store, memory.reader, memory.sync)}


def crash(actor: Any) -> None:
    """A message the actor does not know, as a bug would send: it crashes on it."""
    actor.mailbox.cast_nowait("a message nobody should send")


async def test_the_memory_actors_start_on_first_use_under_the_apps_supervisor(client: MemoryClient,
                                                                              repo: Repo) -> None:
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.commit()
    supervisor = client.app.supervisor
    assert not any(supervisor.running(name) for name in NAMES)  # initialize was answered without them
    await ok(client, "memory_add", {"content": "the first memory"})
    assert [supervisor.running(name) for name in NAMES] == [True, False, False]
    await ok(client, "knowledge_query", {})
    assert [supervisor.running(name) for name in NAMES] == [True, True, False]
    await ok(client, "sync_now", {})
    assert all(supervisor.running(name) for name in NAMES) and supervisor.restarts == {}


async def test_a_crashed_memory_store_is_restarted_and_the_memory_tools_go_on_answering(
        client: MemoryClient, monkeypatch: pytest.MonkeyPatch) -> None:
    actors = watch(client, monkeypatch)
    kept = await ok(client, "memory_add", {"content": "written before the crash"})
    crash(actors["memory-store"])
    added = await ok(client, "memory_add", {"content": "written after the crash"})  # queued behind the bad letter
    found = await ok(client, "memory_search", {"query": "written crash", "threshold": 0.0})
    assert {r["memoryId"] for r in found["results"]} == {kept["memoryId"], added["memoryId"]}
    assert (await ok(client, "memory_delete", {"memoryId": kept["memoryId"]}))["deleted"] is True
    assert client.app.supervisor.restarts == {"memory-store": 1}


async def test_a_crashed_knowledge_reader_is_restarted_and_sees_the_next_commit(
        client: MemoryClient, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    actors = watch(client, monkeypatch)
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.commit()
    assert [i["id"] for i in (await ok(client, "knowledge_query", {}))["items"]] == ["adr-a"]
    crash(actors["knowledge-reader"])
    repo.write("company/adrs/b.md", item("adr-b", "Bravo"))
    repo.commit()
    assert {i["id"] for i in (await ok(client, "knowledge_query", {}))["items"]} == {"adr-a", "adr-b"}
    assert (await ok(client, "knowledge_show", {"id": "adr-b", "includeHistory": True}))["history"]
    assert (await ok(client, "sync_now", {}))["added"] == 2
    assert client.app.supervisor.restarts == {"knowledge-reader": 1}


async def test_a_crashed_knowledge_sync_is_restarted_and_the_next_sync_completes(
        client: MemoryClient, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    actors = watch(client, monkeypatch)
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.commit()
    assert (await ok(client, "sync_now", {}))["added"] == 1
    crash(actors["knowledge-sync"])
    repo.write("company/adrs/b.md", item("adr-b", "Bravo"))
    repo.commit()
    result = await ok(client, "sync_now", {})
    assert (result["added"], result["unchanged"]) == (1, 1)
    assert client.app.supervisor.restarts == {"knowledge-sync": 1}


async def test_an_unopenable_database_fails_only_the_tools_that_need_it_until_it_opens(
        env: Path, repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the database's folder should be")
    monkeypatch.setenv("SPECACTOR_MEMORY_DB", str(blocker / "memory.db"))
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.commit()
    async with open_memory_server(server_config(env)) as client:
        await client.initialize()
        for tool, arguments in (("memory_add", {"content": "x"}), ("memory_search", {"query": "x"}),
                                ("sync_status", {}), ("memory_add", {"content": "y"})):
            err = await error(client, tool, arguments)
            assert err["code"] == "INTERNAL" and str(blocker / "memory.db") in err["message"], tool
        assert (await ok(client, "knowledge_query", {}))["totalCount"] == 1  # git alone still answers
        assert (await client.request("ping"))["result"] == {}
        blocker.unlink()
        entry = await ok(client, "memory_add", {"content": "stored once the folder can be made"})
        assert entry["memoryId"] and client.app.supervisor.restarts == {}  # refused, never crashed


async def test_memory_add_and_delete_are_published_once_each_after_their_commit(client: MemoryClient) -> None:
    sub = client.app.services.feed.subscribe("test")
    workspace = str(client.app.config.root_path)
    entry = await ok(client, "memory_add", {"content": "published once"})
    added = one(sub)
    assert (added.workspace, added.toolset, added.kind, added.written, added.removed, added.origin) == (
        workspace, "memory", "memory", (f"memory/{entry['memoryId']}",), (), "self")
    await ok(client, "memory_search", {"query": "published"})
    await error(client, "memory_add", {"content": "no team", "layer": "team"})  # refused: nothing written
    assert published(sub) == []
    await ok(client, "memory_delete", {"memoryId": entry["memoryId"]})
    deleted = one(sub)
    assert (deleted.toolset, deleted.kind, deleted.written, deleted.removed) == (
        "memory", "memory", (), (f"memory/{entry['memoryId']}",))
    await error(client, "memory_delete", {"memoryId": entry["memoryId"]})  # gone already: nothing written
    assert published(sub) == []
    sub.close()


async def test_a_sync_is_published_once_with_the_items_it_wrote_and_orphaned(client: MemoryClient,
                                                                             repo: Repo) -> None:
    sub = client.app.services.feed.subscribe("test")
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.write("company/policies/b.md", item("pol-b", "Bravo"))
    repo.commit()
    for i in range(5):  # all in flight at once: they share syncs, and only one of them writes
        await client.send({"jsonrpc": "2.0", "id": f"sync-{i}", "method": "tools/call",
                           "params": {"name": "sync_now", "arguments": {}}})
    replies = [await client.reply_for(f"sync-{i}", timeout=30) for i in range(5)]
    assert all(r["result"]["structuredContent"]["success"] for r in replies), replies
    synced = one(sub)
    assert (synced.workspace, synced.toolset, synced.kind, sorted(synced.written), synced.removed) == (
        str(client.app.config.root_path), "knowledge", "knowledge", ["company/adrs/a.md", "company/policies/b.md"],
        ())
    await ok(client, "sync_now", {})  # nothing new: nothing written
    assert published(sub) == []
    repo.remove("company/adrs/a.md")
    repo.commit()
    await ok(client, "sync_now", {})
    orphaned = one(sub)
    assert (orphaned.written, orphaned.removed) == ((), ("company/adrs/a.md",))
    sub.close()
