"""A burst's memory searches scored in the worker pool (`sqlite/search_task.py`, `MemorySearcher.pool`):
what a worker answers equals what the store's readers answer, a worker's failure fails only the searches
it held, a worker that never answers is given up on, and a worker never creates a database."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import outcome
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.peers.embeddings import embed
from specactor.actors import memory_searcher
from specactor.actors.mailbox import ActorTimeout
from specactor.actors.runtime import TrioRuntime
from specactor.actors.worker_pool import WorkerPool
from specactor.domain.memory.api import MemorySearchOut
from specactor.domain.memory.records import SearchSpec
from specactor.protocol.errors import ToolError
from specactor.sqlite import search_task
from specactor.sqlite.lexicon import Lexicon
from specactor.sqlite.memory_db import (
    connect,
    delete_memory,
    finishes,
    in_read_tx,
    lexical_pass,
    search,
)
from specactor.sqlite.vector_cache import VectorCache
from tests.memory.test_embeddings import Endpoint, endpoint, vector  # noqa: F401  (the endpoint fixture)
from tests.memory.test_memory_searcher import DIMS, MEMORIES, QUERIES, SCOPES, add, searcher_with, served, texts
from tests.memory.test_memory_searcher import store as searcher_store


@contextmanager
def store() -> Iterator[tuple[Path, sqlite3.Connection, sqlite3.Connection]]:
    """`test_memory_searcher.store`'s writer and reader, and the database's path."""
    with searcher_store() as (writer, reader):
        yield Path(reader.execute("PRAGMA database_list").fetchone()[2]), writer, reader


def answers(results: list[outcome.Outcome[MemorySearchOut]]) -> list[Any]:
    return [rounded(r.value) if isinstance(r, outcome.Value) else repr(r.error) for r in results]  # type: ignore[attr-defined]


def rounded(out: MemorySearchOut) -> tuple[list[tuple[str, str, float]], int]:
    return [(hit.memory_id, hit.content, round(hit.score, 12)) for hit in out.results], out.total_count


def through_a_worker(db: search_task.Database, work: search_task.Work) -> list[outcome.Outcome[MemorySearchOut]]:
    """What a pool worker would answer: the chunk and the answer each cross as bytes."""
    sent = msgspec.msgpack.encode(search_task.finish_chunk(db, search_task.encode(work)))
    return search_task.FINISH.decode(sent)


@settings(max_examples=60, deadline=None)
@given(memories=st.lists(texts, min_size=1, max_size=12), between=st.lists(texts, max_size=3),
       forget=st.lists(st.integers(0, 11), max_size=3),
       queries=st.lists(st.tuples(texts, st.sampled_from(["lexical", "hybrid", "semantic"]),
                                  st.sampled_from([0.0, 0.3, 0.7]), st.booleans()), min_size=1, max_size=5))
def test_a_chunk_scored_in_a_worker_answers_as_the_store_s_readers_would(
        memories: list[str], between: list[str], forget: list[int], queries: list[tuple[str, str, float, bool]],
        ) -> None:
    with store() as (path, writer, reader):
        ids = [add(writer, text) for text in memories]
        specs = [SearchSpec(q, SCOPES, 50, threshold, [], mode, embed(q, DIMS) if mode != "lexical" else None)  # type: ignore[arg-type]
                 for q, mode, threshold, _ in queries]
        # Some searches bring the lexical pass their search ran while the vector was fetched, before the writes.
        passes = [in_read_tx(reader, functools.partial(lexical_pass, spec=spec)) if early else None
                  for spec, (_, _, _, early) in zip(specs, queries, strict=True)]
        for text in between:
            add(writer, text)
        for n in forget:
            if n < len(ids):
                delete_memory(writer, ids[n])
        work = list(zip(specs, passes, strict=True))
        here = in_read_tx(reader, lambda conn: finishes(conn, work, VectorCache(), Lexicon()))
        db = search_task.Database(path)
        try:
            assert answers(through_a_worker(db, work)) == answers(here)
            assert answers(through_a_worker(db, work)) == answers(here)  # again, on the worker's warm caches
        finally:
            if db.conn is not None:
                db.conn.close()
        alone = [in_read_tx(reader, functools.partial(search, spec=spec)) for spec in specs]
        assert answers(here) == [rounded(a) for a in alone]


def test_a_worker_never_creates_a_database_and_each_search_of_its_chunk_is_told_which_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "memory.db"
    work: search_task.Work = [(SearchSpec("cat", SCOPES, 10, 0.0, [], "lexical"), None)] * 3
    got = through_a_worker(search_task.Database(missing), work)
    errors = [r.error for r in got]  # type: ignore[attr-defined]
    assert all(isinstance(e, ToolError) and e.code == "INTERNAL" and str(missing) in e.message for e in errors)
    assert not missing.exists() and not missing.parent.exists()


def test_a_search_that_fails_in_a_worker_comes_back_as_the_same_tool_error() -> None:
    failed = search_task._failed(ToolError("RATE_LIMITED", "slow down", {"retry_after": 3}))
    (back,) = search_task.outcomes([msgspec.msgpack.decode(msgspec.msgpack.encode(failed), type=search_task.Answer)])
    error = back.error  # type: ignore[attr-defined]
    assert (error.code, error.message, error.details, error.retryable) == ("RATE_LIMITED", "slow down",
                                                                          {"retry_after": 3}, True)
    other = search_task._failed(sqlite3.OperationalError("disk I/O error"))
    assert other.code == "INTERNAL" and "OperationalError: disk I/O error" in other.message


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "lexical"])
async def test_a_burst_scored_in_pool_workers_answers_as_each_search_alone(
        tmp_path: Path, endpoint: Endpoint, mode: str) -> None:  # noqa: F811
    pool = WorkerPool(2, TrioRuntime(), alone_in_process=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        with trio.fail_after(90):
            await pool.wait_started()
        actors = await searcher_with(tmp_path, nursery, endpoint.url, MEMORIES)
        actors.searcher.pool = pool
        specs = [SearchSpec(q, SCOPES, 10, 0.0, [], mode) for q in QUERIES * 5]  # type: ignore[arg-type]
        got = await served(actors, specs)
        assert pool.statistics().pooled >= 1  # 40 searches: three chunks, at least one of them in a worker
        conn = connect(tmp_path / "store" / "memory.db", writer=False)
        try:
            for spec, out in zip(specs, got, strict=True):
                alone = in_read_tx(conn, functools.partial(search, spec=SearchSpec(
                    spec.query, SCOPES, 10, 0.0, [], mode,  # type: ignore[arg-type]
                    vector(spec.query) if mode != "lexical" else None)))
                assert isinstance(out, MemorySearchOut), out
                assert rounded(out) == rounded(alone)  # the numpy path's scores equal the Python path's to ~1e-15
        finally:
            conn.close()
        nursery.cancel_scope.cancel()


class _Failing:
    """A pool whose first job's worker dies, as `WorkerPool` reports a death; the next job runs as asked."""

    def __init__(self) -> None:
        self.calls = 0

    async def call(self, task: Any, key: str, state: Any, *args: Any, inline: Any, overlapping: bool = False) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise ToolError("INTERNAL", "the worker process running memory_search died (killed by SIGKILL)",
                            retryable=True)
        return await inline()


class _Hung:
    def __init__(self) -> None:
        self.cancelled = False

    async def call(self, task: Any, key: str, state: Any, *args: Any, inline: Any, overlapping: bool = False) -> Any:
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled = True  # the pool kills a worker whose job is cancelled


async def test_a_chunk_whose_worker_died_fails_its_searches_only_and_the_next_chunk_is_served(
        tmp_path: Path, endpoint: Endpoint) -> None:  # noqa: F811
    async with trio.open_nursery() as nursery:
        actors = await searcher_with(tmp_path, nursery, endpoint.url, MEMORIES)
        actors.searcher.pool = _Failing()  # type: ignore[assignment]
        got = await served(actors, [SearchSpec(q, SCOPES, 10, 0.0, [], "hybrid") for q in QUERIES * 4])
        died = [g for g in got if isinstance(g, ToolError)]
        assert len(died) == 16 and all(e.code == "INTERNAL" and "SIGKILL" in e.message for e in died)
        assert sum(isinstance(g, MemorySearchOut) for g in got) == 16
        again = await served(actors, [SearchSpec(q, SCOPES, 10, 0.0, [], "hybrid") for q in QUERIES])
        assert all(isinstance(g, MemorySearchOut) for g in again)
        nursery.cancel_scope.cancel()


async def test_a_worker_that_never_answers_is_given_up_on_and_its_searches_are_told(
        tmp_path: Path, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setattr(memory_searcher, "CALL_TIMEOUT", 0.5)
    async with trio.open_nursery() as nursery:
        actors = await searcher_with(tmp_path, nursery, endpoint.url, MEMORIES)
        hung = _Hung()
        actors.searcher.pool = hung  # type: ignore[assignment]
        got = await served(actors, [SearchSpec(q, SCOPES, 10, 0.0, [], "semantic") for q in QUERIES])
        assert all(isinstance(g, ActorTimeout) and "pool worker" in str(g) for g in got), got
        assert hung.cancelled
        nursery.cancel_scope.cancel()
