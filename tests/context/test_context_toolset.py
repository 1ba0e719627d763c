"""The prompt `session_context` and the resource `specactor://context`, through the in-memory server."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import trio

from specactor.config import Config, SessionLogConfig, load
from specactor.context.reader import get_session_context, instructions_summary
from specactor.testing import open_memory_server
from specactor.toolsets import context as context_toolset
from tests.context.workspace import MINE, THEIRS, Workspace, add_memories, workspace
from tests.memory.conftest import Repo


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    built = workspace(tmp_path)
    for name, value in built.env().items():
        monkeypatch.setenv(name, value)
    for name in [n for n in __import__("os").environ if n.startswith("SPECACTOR_")]:
        if name not in ("SPECACTOR_MEMORY_DB", "SPECACTOR_KNOWLEDGE_REPO"):
            monkeypatch.delenv(name)
    return built


def _config(root: Path) -> Config:
    return msgspec.structs.replace(load({"root": str(root)}), session_log=SessionLogConfig(enabled=False))


async def test_prompt_and_resource_answer_the_commands_context(ws: Workspace) -> None:
    async with open_memory_server(_config(ws.root), context_toolset.register) as client:
        await client.initialize()
        with trio.fail_after(30):
            prompt = await client.request("prompts/get", {"name": "session_context", "arguments": {"budget": "5000"}})
            resource = await client.request("resources/read", {"uri": "specactor://context"})
    said = prompt["result"]["messages"][0]["content"]["text"]
    assert said == resource["result"]["contents"][0]["text"] == get_session_context(ws.root)
    assert MINE[0] in said and THEIRS not in said and said.index("[block]") < said.index(MINE[0])


async def test_the_text_follows_a_new_memory_and_a_new_commit(ws: Workspace) -> None:
    """The text is made once per snapshot and memories; either changing makes it again."""
    async def read(client: object) -> str:
        with trio.fail_after(30):
            reply = await client.request("resources/read", {"uri": "specactor://context"})  # type: ignore[attr-defined]
        text: str = reply["result"]["contents"][0]["text"]
        return text

    async with open_memory_server(_config(ws.root), context_toolset.register) as client:
        await client.initialize()
        first = await read(client)
        assert await read(client) == first
        add_memories(ws.db, "shop", ["The shop's queue is RabbitMQ."])
        second = await read(client)
        assert "RabbitMQ" in second and second != first
        repo = Repo(ws.knowledge)
        repo.remove("projects/shop/policies/no-eval.md")
        repo.commit("drop the eval rule")
        third = await read(client)
    assert "pol-eval" in second and "pol-eval" not in third and "RabbitMQ" in third
    assert third == get_session_context(ws.root)


async def test_a_bad_budget_is_refused(ws: Workspace) -> None:
    async with open_memory_server(_config(ws.root), context_toolset.register) as client:
        await client.initialize()
        with trio.fail_after(30):
            reply = await client.request("prompts/get", {"name": "session_context", "arguments": {"budget": "lots"}})
    assert "error" in reply or reply["result"].get("isError")


def test_instructions_gain_the_binding_items_within_two_kilobytes(ws: Workspace) -> None:
    out = instructions_summary(_config(ws.root), "specactor serves things.")
    assert out.startswith("specactor serves things.\n\n") and "adr-042-database-selection" in out
    assert len(out.encode()) <= 2048 and "specactor://context" in out


def test_instructions_stay_as_they_are_without_knowledge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECACTOR_KNOWLEDGE_REPO", str(tmp_path / "none"))
    assert instructions_summary(_config(tmp_path), "base") == "base"
