"""Knowledge pointers get vectors as memory_add's memories do, so a pure semantic search finds them; an
embeddings outage during a sync leaves them without, fails nothing, and the next sync embeds them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from specactor.testing import MemoryClient, open_memory_server
from tests.memory.conftest import Repo, item, ok, server_config
from tests.memory.test_embeddings import Endpoint, endpoint

__all__ = ["endpoint"]  # the fixture, imported for these tests


@pytest.fixture
async def semantic(env: Path, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[MemoryClient]:
    monkeypatch.setenv("SPECACTOR_EMBEDDINGS_URL", endpoint.url)
    monkeypatch.setenv("SPECACTOR_MEMORY_MODE", "semantic")
    async with open_memory_server(server_config(env)) as client:
        await client.initialize()
        yield client


def pointers(found: dict[str, Any]) -> list[str]:
    """The item ids of the pointers found (a pointer's text ends with its item's id)."""
    return [r["content"].splitlines()[-1] for r in found["results"]]


async def test_a_pure_semantic_search_finds_a_knowledge_pointer(semantic: MemoryClient, repo: Repo,
                                                                 endpoint: Endpoint) -> None:
    repo.write("company/patterns/pets.md", item("pat-pets", "Every office keeps a cat"))
    repo.write("company/patterns/cars.md", item("pat-cars", "Park the automobile outside"))
    repo.commit()
    await ok(semantic, "sync_now", {})
    assert pointers(await ok(semantic, "memory_search", {"query": "kitten"})) == ["(pat-pets)"]
    assert pointers(await ok(semantic, "memory_search", {"query": "car"})) == ["(pat-cars)"]
    synced = [r for r in endpoint.requests if len(r["body"]["input"]) == 2]
    assert len(synced) == 1  # both pointers in one request


async def test_pointers_synced_during_an_outage_are_embedded_by_the_next_sync(semantic: MemoryClient, repo: Repo,
                                                                              endpoint: Endpoint) -> None:
    repo.write("company/patterns/pets.md", item("pat-pets", "Every office keeps a cat"))
    repo.commit()
    endpoint.default = (503, {})
    assert (await ok(semantic, "sync_now", {}))["added"] == 1  # the sync is not failed by the outage
    endpoint.default = (200, {})
    assert pointers(await ok(semantic, "memory_search", {"query": "kitten"})) == []  # no vector yet

    repo.write("company/patterns/cars.md", item("pat-cars", "Park the automobile outside"))
    repo.commit()
    assert (await ok(semantic, "sync_now", {}))["added"] == 1
    assert pointers(await ok(semantic, "memory_search", {"query": "kitten"})) == ["(pat-pets)"]
    assert pointers(await ok(semantic, "memory_search", {"query": "automobile"})) == ["(pat-cars)"]
    assert await ok(semantic, "sync_now", {})  # nothing left to embed: no request
    assert sum(len(r["body"]["input"]) for r in endpoint.requests if r["body"]["input"] != ["kitten"]
               and r["body"]["input"] != ["automobile"]) == 1 + 2


async def test_a_lexical_server_does_not_embed_pointers(env: Path, repo: Repo, endpoint: Endpoint,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECACTOR_EMBEDDINGS_URL", endpoint.url)
    monkeypatch.setenv("SPECACTOR_MEMORY_MODE", "lexical")
    repo.write("company/patterns/pets.md", item("pat-pets", "Every office keeps a cat"))
    repo.commit()
    async with open_memory_server(server_config(env)) as client:
        await client.initialize()
        await ok(client, "sync_now", {})
        assert pointers(await ok(client, "memory_search", {"query": "cat office"})) == ["(pat-pets)"]
    assert endpoint.requests == []
