"""The in-process link: the whole server in this process, from sync code, threads and asyncio."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP client is not installed: pip install 'specactor[langchain]'")

from specactor.adapters.in_process import InProcessLink
from specactor.adapters.mcp_link import LinkError
from tests.context.workspace import MINE, Workspace


@pytest.fixture
def link(ws: Workspace) -> Iterator[InProcessLink]:
    with InProcessLink(ws.root, timeout=30) as link:
        yield link


def test_tools_resources_and_calls_answer_as_over_mcp(link: InProcessLink) -> None:
    names = [t.name for t in link.list_tools()]
    assert "memory_add" in names and "knowledge_check" in names and "spec_create" in names
    added = link.call("memory_add", {"content": "The shop's queue is RabbitMQ.", "layer": "project"})
    assert added["success"] is True and added["data"]["memoryId"].startswith("mem_")
    refused = link.call("memory_search", {"query": 7})
    assert refused["success"] is False and refused["error"]["code"] == "INVALID_INPUT"
    context = link.read_resource("specactor://context")
    assert MINE[0] in context and "RabbitMQ" in context


def test_calls_from_many_threads_each_get_their_own_answer(link: InProcessLink) -> None:
    texts = [f"Fact number {n} about the shop." for n in range(24)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda t: link.call("memory_add", {"content": t, "layer": "project"}), texts))
    ids = [a["data"]["memoryId"] for a in answers]
    assert all(a["success"] for a in answers) and len(set(ids)) == len(texts)


def test_an_asyncio_caller_awaits_its_answer(link: InProcessLink) -> None:
    async def both() -> list[dict[str, object]]:
        return list(await asyncio.gather(link.acall("sync_status", {}), link.acall("memory_search", {"query": "x"})))

    status, searched = asyncio.run(both())
    assert status["success"] is True and searched["success"] is True


def test_a_refused_request_is_a_link_error_naming_it(link: InProcessLink) -> None:
    with pytest.raises(LinkError, match="resources/read"):
        link.read_resource("specactor://no-such-thing")


def test_a_closed_link_starts_again_and_kept_what_was_written(ws: Workspace) -> None:
    link = InProcessLink(ws.root, timeout=30)
    added = link.call("memory_add", {"content": "Kept across a restart.", "layer": "project"})
    link.close()
    try:
        found = link.call("memory_search", {"query": "kept across restart", "threshold": 0.1})
    finally:
        link.close()
    assert added["data"]["memoryId"] in [r["memoryId"] for r in found["data"]["results"]]


def test_a_workspace_with_bad_settings_fails_to_start_with_the_reason(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECACTOR_TOOLSETS", "no-such-toolset")
    with pytest.raises(LinkError, match="could not start"), InProcessLink(tmp_path, timeout=30) as link:
        link.list_tools()
