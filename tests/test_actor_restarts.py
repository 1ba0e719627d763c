"""Every actor the app supervises can crash: each kind, killed in turn, comes back, and the server
goes on answering with the restarted actor (reads, writes through the storage actor, memory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from specactor.testing import MemoryClient, open_memory_server
from tests.conftest import fixture_config


async def serves(client: MemoryClient, step: int) -> None:
    """A ping, a write through the storage actor, a resource read: all answered."""
    assert (await client.request("ping"))["result"] == {}
    reply = await client.request("tools/call", {"name": "spec_create", "arguments": {
        "title": f"restart check {step}", "description": "written after an actor was restarted"}}, timeout=30)
    assert reply["result"]["structuredContent"]["success"] is True, reply
    metrics = await client.request("resources/read", {"uri": "specactor://metrics"})
    assert metrics["result"]["contents"], metrics


async def restarted(client: MemoryClient, name: str, before: int) -> None:
    sup = client.app.supervisor
    for _ in range(1000):  # the supervisor's backoff is real time: 10 ms at first
        if sup.restarts.get(name, 0) > before and name in sup.children:
            return
        await trio.sleep(0.01)
    raise AssertionError(f"{name} was not restarted within 10 s")


@pytest.fixture
def memory_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPECACTOR_MEMORY_DB", str(tmp_path / "data" / "memory.db"))
    monkeypatch.setenv("SPECACTOR_KNOWLEDGE_REPO", str(tmp_path / "knowledge"))
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


async def test_each_actor_killed_in_turn_is_restarted_and_the_server_keeps_answering(memory_env: Path) -> None:
    async with open_memory_server(fixture_config(memory_env)) as client:
        await client.initialize()
        mem: dict[str, Any] = await client.request("tools/call", {"name": "memory_add", "arguments": {
            "content": "actors come back after a crash", "layer": "project"}}, timeout=30)
        assert mem["result"]["structuredContent"]["success"] is True, mem  # starts the memory actors on demand
        await serves(client, 0)
        names = [n for n in client.app.supervisor.children if n not in ("stdio", "http")]
        assert {"metrics", "session-log", "storage", "dispatcher", "resource-notifier"} <= set(names)
        for step, name in enumerate(names, 1):
            before = client.app.supervisor.restarts.get(name, 0)
            client.app.supervisor.kill(name)
            await restarted(client, name, before)
            await serves(client, step)
            found = await client.request("tools/call", {"name": "memory_search", "arguments": {
                "query": "actors crash"}}, timeout=30)
            assert found["result"]["structuredContent"]["success"] is True, (name, found)
