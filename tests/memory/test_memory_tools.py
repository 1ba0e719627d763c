"""memory_add, memory_search and memory_delete through the whole server, on a real SQLite store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from specactor.sqlite.memory_db import connect
from specactor.testing import MemoryClient, open_memory_server
from tests.memory.conftest import call, error, ok, server_config


async def test_memory_add_returns_the_entry_with_its_id_in_the_user_layer_by_default(client: MemoryClient) -> None:
    entry = await ok(client, "memory_add", {"content": "We chose PostgreSQL for billing", "tags": ["db", "db"],
                                            "metadata": {"source": "meeting"}})
    assert entry["memoryId"].startswith("mem_")
    assert entry["layer"] == "user" and entry["identifiers"] == {"userId": "alice"}
    assert entry["tags"] == ["db"] and entry["metadata"] == {"source": "meeting"}
    assert entry["createdAt"] == entry["updatedAt"]


async def test_a_memory_is_found_by_its_words_and_unrelated_words_find_nothing(client: MemoryClient) -> None:
    entry = await ok(client, "memory_add", {"content": "Billing uses PostgreSQL with logical replication"})
    await ok(client, "memory_add", {"content": "The frontend is written in TypeScript"})
    found = await ok(client, "memory_search", {"query": "which database does billing use?"})
    assert [r["memoryId"] for r in found["results"]] == [entry["memoryId"]]
    hit = found["results"][0]
    assert hit["layer"] == "user" and hit["content"].startswith("Billing") and 0.7 <= hit["score"] <= 1.0
    assert found["totalCount"] == 1
    assert found["searchedLayers"] == ["agent", "user", "session", "project", "company"]
    assert (await ok(client, "memory_search", {"query": "kubernetes helm"}))["results"] == []


async def test_a_query_full_of_fts_syntax_still_searches(client: MemoryClient) -> None:
    await ok(client, "memory_add", {"content": "retry with exponential backoff near the edge"})
    for query in ['NEAR(retry "backoff', "retry* AND (backoff OR", '"', "col:retry ^backoff", "AND OR NOT"]:
        found = await ok(client, "memory_search", {"query": query, "threshold": 0.0})
        assert isinstance(found["results"], list), query
    found = await ok(client, "memory_search", {"query": 'NEAR(retry "backoff', "threshold": 0.0})
    assert len(found["results"]) == 1


async def test_limit_and_threshold_default_to_10_and_0_7(client: MemoryClient) -> None:
    for i in range(12):
        await ok(client, "memory_add", {"content": f"deploy checklist item {i} for the payments service"})
    await ok(client, "memory_add", {"content": "payments are reconciled nightly"})
    found = await ok(client, "memory_search", {"query": "payments deploy checklist"})
    assert len(found["results"]) == 10 and found["totalCount"] == 12  # the nightly one scores below 0.7
    loose = await ok(client, "memory_search", {"query": "payments deploy checklist", "threshold": 0.0,
                                               "limit": 100})
    assert loose["totalCount"] == 13


async def test_memory_delete_forgets_and_deleting_again_is_not_found_with_the_id(client: MemoryClient) -> None:
    entry = await ok(client, "memory_add", {"content": "the staging cluster is called koala"})
    gone = await ok(client, "memory_delete", {"memoryId": entry["memoryId"]})
    assert gone["deleted"] is True and gone["memoryId"] == entry["memoryId"]
    assert (await ok(client, "memory_search", {"query": "koala", "threshold": 0.0}))["results"] == []
    err = await error(client, "memory_delete", {"memoryId": entry["memoryId"]})
    assert err["code"] == "NOT_FOUND" and err["details"]["id"] == entry["memoryId"] and err["retryable"] is False


async def test_a_layer_needs_its_identifiers_and_a_call_can_supply_or_override_them(client: MemoryClient) -> None:
    err = await error(client, "memory_add", {"content": "standup at ten", "layer": "team"})
    assert err["code"] == "NOT_FOUND" and err["details"]["id"] == "teamId"
    entry = await ok(client, "memory_add", {"content": "standup at ten", "layer": "team",
                                            "identifiers": {"teamId": "platform"}})
    assert entry["identifiers"] == {"teamId": "platform"}
    mine = await ok(client, "memory_search", {"query": "standup", "identifiers": {"teamId": "platform"}})
    assert [r["layer"] for r in mine["results"]] == ["team"] and "team" in mine["searchedLayers"]
    other = await ok(client, "memory_search", {"query": "standup", "layers": ["team"],
                                               "identifiers": {"teamId": "mobile"}})
    assert other["results"] == [] and other["searchedLayers"] == ["team"]
    bob = await ok(client, "memory_add", {"content": "bob likes tabs", "identifiers": {"userId": "bob"}})
    assert bob["identifiers"] == {"userId": "bob"}
    assert (await ok(client, "memory_search", {"query": "tabs"}))["results"] == []
    err = await error(client, "memory_search", {"query": "standup", "layers": ["org"]})
    assert err["code"] == "NOT_FOUND" and err["details"]["field"] == "identifiers.orgId"


async def test_agent_and_session_defaults_come_from_the_mcp_session(env: Path) -> None:
    async with open_memory_server(server_config(env)) as first:
        await first.initialize()
        agent = await ok(first, "memory_add", {"content": "prefers small diffs", "layer": "agent"})
        session = await ok(first, "memory_add", {"content": "currently refactoring the parser", "layer": "session"})
        assert agent["identifiers"] == {"agentId": "memory-client", "userId": "alice"}
        assert session["identifiers"] == {"userId": "alice", "sessionId": first.conn.session.id}
        project = await ok(first, "memory_add", {"content": "the parser lives in wire", "layer": "project"})
        assert project["identifiers"] == {"projectId": "specactor-ws"}
    async with open_memory_server(server_config(env)) as second:
        await second.initialize()
        found = await ok(second, "memory_search", {"query": "parser diffs", "threshold": 0.0})
        assert {r["memoryId"] for r in found["results"]} == {agent["memoryId"], project["memoryId"]}


async def test_results_come_by_layer_precedence_then_score(client: MemoryClient) -> None:
    await ok(client, "memory_add", {"content": "lint rules lint rules lint", "layer": "project"})
    weak = await ok(client, "memory_add", {"content": "lint rules and many other unrelated words about coffee "
                                                      "machines and the office kitchen", "layer": "user"})
    strong = await ok(client, "memory_add", {"content": "lint rules", "layer": "user"})
    found = await ok(client, "memory_search", {"query": "lint rules", "threshold": 0.0})
    assert [r["layer"] for r in found["results"]] == ["user", "user", "project"]
    assert [r["memoryId"] for r in found["results"][:2]] == [strong["memoryId"], weak["memoryId"]]
    assert found["results"][0]["score"] >= found["results"][1]["score"]


async def test_a_tag_filter_keeps_memories_carrying_every_tag(client: MemoryClient) -> None:
    both = await ok(client, "memory_add", {"content": "rotate the keys", "tags": ["ops", "security"]})
    await ok(client, "memory_add", {"content": "rotate the logs", "tags": ["ops"]})
    found = await ok(client, "memory_search", {"query": "rotate", "tags": ["security", "ops"], "threshold": 0.0})
    assert [r["memoryId"] for r in found["results"]] == [both["memoryId"]]
    assert found["results"][0]["tags"] == ["ops", "security"]


async def test_an_acknowledged_memory_survives_a_restart(env: Path) -> None:
    async with open_memory_server(server_config(env)) as first:
        await first.initialize()
        entry = await ok(first, "memory_add", {"content": "durable facts stay"})
    db = sqlite3.connect(env.parent / "data" / "memory.db")
    assert db.execute("SELECT content FROM memories WHERE id = ?", (entry["memoryId"],)).fetchone() == (
        "durable facts stay",)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()
    async with open_memory_server(server_config(env)) as second:
        await second.initialize()
        found = await ok(second, "memory_search", {"query": "durable facts"})
        assert [r["memoryId"] for r in found["results"]] == [entry["memoryId"]]


async def test_concurrent_adds_are_group_committed_and_all_acknowledged(client: MemoryClient) -> None:
    for i in range(40):  # all in flight at once: the writer drains them into few transactions
        await client.send({"jsonrpc": "2.0", "id": f"add-{i}", "method": "tools/call",
                           "params": {"name": "memory_add", "arguments": {"content": f"burst memory number {i}"}}})
    replies = [await client.reply_for(f"add-{i}", timeout=30) for i in range(40)]
    ids = {r["result"]["structuredContent"]["data"]["memoryId"] for r in replies}
    found = await ok(client, "memory_search", {"query": "burst memory", "limit": 100})
    assert len(ids) == 40 and found["totalCount"] == 40


def test_a_database_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    connect(path, writer=True).close()
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(ValueError, match="schema version 99"):
        connect(path, writer=True)


async def test_an_unopenable_database_is_an_internal_error_naming_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("SPECACTOR_MEMORY_DB", str(tmp_path / "file" / "memory.db"))
    ws = tmp_path / "ws"
    ws.mkdir()
    async with open_memory_server(server_config(ws)) as client:
        await client.initialize()
        envelope = await call(client, "memory_add", {"content": "x"})
        assert envelope["error"]["code"] == "INTERNAL" and "memory.db" in envelope["error"]["message"]
