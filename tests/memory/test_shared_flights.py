"""Concurrent callers share work that waits on I/O: one embeddings request for the texts asked for
together, one sync (and one manifest write) for the sync_now calls that arrive while another runs,
without any caller missing a commit made before its call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from specactor.actors.memory_actors import MemoryActors
from specactor.domain.memory import scoring
from specactor.protocol.errors import ToolError
from specactor.sqlite.memory_db import load_sync
from tests.memory.conftest import Repo, actors_for, item, started
from tests.memory.test_embeddings import Endpoint, endpoint, vector

__all__ = ["endpoint"]  # the fixture, imported for these tests


async def actor_for(nursery: trio.Nursery, tmp_path: Path, repo: Repo, url: str | None = None) -> MemoryActors:
    return await started(nursery, actors_for(tmp_path, repo.root, url))


async def test_texts_asked_for_together_share_one_embeddings_request(tmp_path: Path, repo: Repo,
                                                                     endpoint: Endpoint, nursery: trio.Nursery) -> None:
    actor = (await actor_for(nursery, tmp_path, repo, endpoint.url)).embeddings
    assert actor is not None
    texts = ["the cat", "a puppy", "my automobile", "kitten", "dog", "car"]
    got: dict[str, list[float]] = {}

    async def embed(text: str) -> None:
        (got[text],) = await actor.embed([text])

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for text in texts:
                nursery.start_soon(embed, text)
    assert len(endpoint.requests) == 1 and sorted(endpoint.requests[0]["body"]["input"]) == sorted(texts)
    assert got == {t: vector(t) for t in texts}


async def test_a_lone_text_is_sent_at_once_and_later_ones_get_their_own_request(
        tmp_path: Path, repo: Repo, endpoint: Endpoint, nursery: trio.Nursery) -> None:
    actor = (await actor_for(nursery, tmp_path, repo, endpoint.url)).embeddings
    assert actor is not None
    with trio.fail_after(30):
        assert await actor.embed(["cat"]) == [vector("cat")]
        assert await actor.embed(["dog", "car"]) == [vector("dog"), vector("car")]
    assert [r["body"]["input"] for r in endpoint.requests] == [["cat"], ["dog", "car"]]


async def test_a_failed_shared_request_fails_every_caller_of_it(tmp_path: Path, repo: Repo,
                                                                endpoint: Endpoint, nursery: trio.Nursery) -> None:
    actor = (await actor_for(nursery, tmp_path, repo, endpoint.url)).embeddings
    assert actor is not None
    endpoint.default = (401, {})
    failures: list[str] = []

    async def embed(text: str) -> None:
        try:
            await actor.embed([text])
        except ToolError as err:
            failures.append(err.code)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for text in ("cat", "dog", "car"):
                nursery.start_soon(embed, text)
    assert failures == ["PROVIDER_ERROR"] * 3 and len(endpoint.requests) == 1


def test_unit_cosine_of_unit_vectors_is_the_cosine() -> None:
    a, b = [3.0, 4.0, 0.0], [4.0, 3.0, 5.0]
    assert scoring.unit_cosine(scoring.unit(a), scoring.unit(b)) == pytest.approx(scoring.cosine(a, b))
    assert scoring.unit([0.0, 0.0]) == [0.0, 0.0] and scoring.unit_cosine([1.0], [1.0, 0.0]) == 0.0
    assert scoring.unit_cosine(scoring.unit([1.0, 0.0]), scoring.unit([-1.0, 0.0])) == 0.0


async def total_syncs(actors: MemoryActors) -> int:
    return (await actors.store.read(load_sync)).stats.total_syncs


async def test_concurrent_syncs_run_once_and_publish_one_manifest(tmp_path: Path, repo: Repo,
                                                                  nursery: trio.Nursery) -> None:
    actors = await actor_for(nursery, tmp_path, repo)
    actor = actors.sync
    for i in range(3):
        repo.write(f"company/adrs/{i}.md", item(f"adr-{i}", f"Decision {i}"))
    head = repo.commit()
    published: list[dict[str, Any]] = []
    commits: list[str | None] = []

    async def publish(manifest: dict[str, Any]) -> None:
        published.append(manifest)

    async def sync() -> None:
        commits.append((await actor.sync(force=False, company_id="default", publish=publish))[1])

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(sync)
        assert commits == [head] * 10 and len(published) == 1 and await total_syncs(actors) == 1


async def test_a_sync_call_made_after_a_commit_sees_it_even_while_an_older_sync_runs(
        tmp_path: Path, repo: Repo, nursery: trio.Nursery) -> None:
    actors = await actor_for(nursery, tmp_path, repo)
    actor = actors.sync
    repo.write("company/adrs/a.md", item("adr-a", "First"))
    first = repo.commit("first")
    listing = actors.reader.listing
    reading, release = trio.Event(), trio.Event()

    async def held_listing(commit: str | None) -> dict[str, str]:
        if not reading.is_set():  # the first sync has read HEAD; hold it there
            reading.set()
            await release.wait()
        return await listing(commit)

    actors.reader.listing = held_listing  # type: ignore[method-assign]
    commits: dict[str, str | None] = {}

    async def sync(name: str) -> None:
        commits[name] = (await actor.sync(force=False, company_id="default"))[1]

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sync, "early")
            await reading.wait()
            repo.write("company/adrs/b.md", item("adr-b", "Second"))
            second = repo.commit("second")
            nursery.start_soon(sync, "late")
            nursery.start_soon(sync, "later")
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert commits == {"early": first, "late": second, "later": second}
        assert await total_syncs(actors) == 2
