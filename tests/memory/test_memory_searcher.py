"""memory_search as a batch (`actors/memory_searcher.py`): searches sent together share one embeddings
request, their lexical passes run while it is out, and each answer equals the search run on its own;
a write between a search's two read transactions is seen, and a failed request fails its batch only."""

from __future__ import annotations

import functools
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import outcome
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.peers.embeddings import embed
from specactor.actors.mailbox import Letter
from specactor.actors.memory_actors import MemoryActors
from specactor.actors.memory_store import READ_BATCH, MemoryStoreActor, Read, Write
from specactor.domain.memory.api import MemorySearchOut
from specactor.domain.memory.embeddings import pack
from specactor.domain.memory.layers import Identifiers, scope_key
from specactor.domain.memory.records import EmbeddingsEndpoint, NewMemory, SearchSpec
from specactor.protocol.errors import ToolError
from specactor.sqlite.lexicon import Lexicon
from specactor.sqlite.memory_db import (
    connect,
    delete_memory,
    finish,
    generation,
    insert_memory,
    lexical_pass,
    search,
)
from specactor.sqlite.vector_cache import VectorCache
from tests.memory.conftest import started
from tests.memory.test_embeddings import Endpoint, endpoint, vector  # noqa: F401  (the endpoint fixture)

WORDS = ["cat", "dog", "fish", "bird", "frog", "lion", "wolf", "bear", "deer", "mole"]
DIMS = 16
KEY = scope_key("user", Identifiers(user_id="u"))
SCOPES: list[Any] = [("user", KEY)]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


@contextmanager
def store() -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    """A writer and a reader on a fresh database."""
    with tempfile.TemporaryDirectory() as tmp:
        writer = connect(Path(tmp) / "m.db", writer=True)
        writer.execute("PRAGMA synchronous=OFF")  # durability is not what these properties are about
        reader = connect(Path(tmp) / "m.db", writer=False)
        try:
            yield writer, reader
        finally:
            reader.close()
            writer.close()


def add(conn: sqlite3.Connection, text: str) -> str:
    new = NewMemory(text, "user", KEY, {"userId": "u"}, [], {}, pack(embed(text, DIMS)))
    return insert_memory(conn, new).memory_id


def read(conn: sqlite3.Connection, fn: Any) -> Any:
    conn.execute("BEGIN")
    try:
        return fn(conn)
    finally:
        conn.execute("COMMIT")


def answer(out: MemorySearchOut) -> list[tuple[str, float]]:
    return [(hit.memory_id, round(hit.score, 12)) for hit in out.results]


@settings(max_examples=60, deadline=None)
@given(before=st.lists(texts, min_size=1, max_size=12), between=st.lists(texts, max_size=4),
       forget=st.lists(st.integers(0, 11), max_size=3), query=texts,
       mode=st.sampled_from(["lexical", "hybrid", "semantic"]), threshold=st.sampled_from([0.0, 0.3, 0.7]),
       cached=st.booleans())
def test_a_search_split_around_writes_answers_as_one_search_after_them(
        before: list[str], between: list[str], forget: list[int], query: str, mode: str, threshold: float,
        cached: bool) -> None:
    with store() as (writer, reader):
        ids = [add(writer, text) for text in before]
        spec = SearchSpec(query, SCOPES, 50, threshold, [], mode, embed(query, DIMS))  # type: ignore[arg-type]
        vectors = VectorCache() if cached else None
        lexicon = Lexicon() if cached else None
        if lexicon is not None:  # counts of the generation before the writes, ready to be wrongly reused
            read(reader, lambda conn: search(conn, spec, vectors, lexicon))
        first = read(reader, lambda conn: lexical_pass(conn, spec, lexicon))
        for text in between:
            add(writer, text)
        for n in forget:
            if n < len(ids):
                delete_memory(writer, ids[n])
        split = read(reader, lambda conn: finish(conn, spec, first, vectors, lexicon))
        again = read(reader, lambda conn: search(conn, spec, vectors, lexicon))
        whole = read(reader, lambda conn: search(conn, spec))
        assert answer(split) == answer(whole) and split.total_count == whole.total_count
        assert answer(again) == answer(whole) and again.total_count == whole.total_count


def test_a_lexical_pass_at_a_generation_already_seen_asks_the_database_only_for_its_matches() -> None:
    with store() as (writer, reader):
        for text in ["cat dog", "dog fish", "bird frog cat"]:
            add(writer, text)
        spec = SearchSpec("cat dog bird", SCOPES, 10, 0.3, [], "hybrid", None)
        lexicon = Lexicon()
        asked: list[str] = []
        reader.set_trace_callback(asked.append)
        cold = read(reader, lambda conn: lexical_pass(conn, spec, lexicon))
        cold_asked, asked[:] = len(asked), []
        warm = read(reader, lambda conn: lexical_pass(conn, spec, lexicon))
        statements = [a for a in asked if a.startswith("SELECT")]
        assert warm == cold
        # The generation and the scope's matches; not the row count, the three words' counts, the scope's row.
        assert len(statements) == 2 and "bm25" in statements[1], statements
        assert cold_asked > len(asked)
        add(writer, "cat cat cat")  # a new generation: its counts are read afresh
        after = read(reader, lambda conn: lexical_pass(conn, spec, lexicon))
        assert after.generation > cold.generation
        assert after == read(reader, lambda conn: lexical_pass(conn, spec))


def test_the_lexicon_keeps_the_newest_generation_and_gives_an_older_one_counts_of_its_own() -> None:
    lexicon = Lexicon()
    newest = lexicon.at(5)
    assert lexicon.at(5) is newest
    older = lexicon.at(3)
    assert older is not newest and older.generation == 3 and lexicon.at(5) is newest
    assert lexicon.at(6) is not newest and lexicon.at(6).generation == 6
    lexicon.clear()
    assert lexicon.at(6).generation == 6 and lexicon.at(6) is lexicon.at(6)


def test_every_change_to_the_memories_moves_the_generation_on() -> None:
    with store() as (writer, reader):
        seen = [generation(reader)]
        memory = add(writer, "cat dog")
        seen.append(generation(reader))
        delete_memory(writer, memory)
        seen.append(generation(reader))
        assert seen[0] < seen[1] < seen[2]


async def served(actors: MemoryActors, specs: list[SearchSpec]) -> list[MemorySearchOut | BaseException]:
    """Every search of `specs` sent to the searcher at once; each answer or error, in order."""
    out: list[MemorySearchOut | BaseException] = [ValueError("unanswered")] * len(specs)

    async def one(i: int) -> None:
        try:
            out[i] = await actors.searcher.search(specs[i])
        except Exception as exc:
            out[i] = exc

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for i in range(len(specs)):
                nursery.start_soon(one, i)
    return out


async def searcher_with(tmp_path: Path, nursery: trio.Nursery, url: str, memories: list[str]) -> MemoryActors:
    actors = MemoryActors(tmp_path / "store" / "memory.db", tmp_path / "knowledge", embeddings=EmbeddingsEndpoint(url))
    await started(nursery, actors)
    for text in memories:
        new = NewMemory(text, "user", KEY, {"userId": "u"}, [], {}, pack(vector(text)))
        await actors.store.write(functools.partial(insert_memory, new=new))
    return actors


MEMORIES = ["the cat sleeps", "a kitten plays", "the dog barks", "a puppy runs", "the car stops", "cat and dog"]
QUERIES = ["cat", "kitten plays", "dog", "automobile", "the car", "feline", "puppy dog", "cat dog car"]


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "lexical"])
async def test_searches_sent_together_share_one_request_and_each_answers_as_it_would_alone(
        tmp_path: Path, endpoint: Endpoint, mode: str) -> None:  # noqa: F811
    async with trio.open_nursery() as nursery:
        actors = await searcher_with(tmp_path, nursery, endpoint.url, MEMORIES)
        asked = len(endpoint.requests)
        specs = [SearchSpec(q, SCOPES, 10, 0.0, [], mode) for q in QUERIES * 5]  # type: ignore[arg-type]
        got = await served(actors, specs)
        sent = endpoint.requests[asked:]
        if mode == "lexical":
            assert sent == []
        else:
            assert [sorted(r["body"]["input"]) for r in sent] == [sorted(s.query for s in specs)]  # one for the 40
        conn = connect(tmp_path / "store" / "memory.db", writer=False)
        try:
            for spec, out in zip(specs, got, strict=True):
                alone = read(conn, lambda c, spec=spec: search(
                    c, replace(spec, query_vector=vector(spec.query) if mode != "lexical" else None)))
                assert isinstance(out, MemorySearchOut), out
                assert answer(out) == answer(alone) and out.total_count == alone.total_count
                assert out.results or mode != "hybrid" or spec.query in ("automobile", "feline")
        finally:
            conn.close()
        nursery.cancel_scope.cancel()


async def test_a_failed_embeddings_request_fails_each_search_of_its_batch_and_the_next_batch_is_served(
        tmp_path: Path, endpoint: Endpoint) -> None:  # noqa: F811
    async with trio.open_nursery() as nursery:
        actors = await searcher_with(tmp_path, nursery, endpoint.url, MEMORIES)
        endpoint.script = [(400, {})]  # refused: final, not retried
        specs = [SearchSpec(q, SCOPES, 10, 0.0, [], "hybrid") for q in QUERIES]
        failed = await served(actors, specs)
        assert all(isinstance(e, ToolError) and e.code == "PROVIDER_ERROR" and "HTTP 400" in str(e) for e in failed)
        again = await served(actors, specs)
        assert all(isinstance(out, MemorySearchOut) for out in again)
        first = again[0]
        assert isinstance(first, MemorySearchOut) and answer(first)  # "cat" finds the cat
        nursery.cancel_scope.cancel()


class _NoPool:
    """A worker pool no search may reach: nothing but the store may open a database it has not opened."""

    calls = 0

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        raise AssertionError("a chunk reached the pool before the store opened its database")


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
async def test_a_search_whose_database_cannot_be_opened_is_told_why_and_the_searcher_keeps_serving(
        tmp_path: Path, endpoint: Endpoint, mode: str) -> None:  # noqa: F811
    (tmp_path / "blocked").write_text("a file where the database's folder should be")
    actors = MemoryActors(tmp_path / "blocked" / "memory.db", tmp_path / "knowledge",
                          embeddings=EmbeddingsEndpoint(endpoint.url))
    pool = _NoPool()
    actors.searcher.pool = pool  # type: ignore[assignment]
    async with trio.open_nursery() as nursery:
        await started(nursery, actors)
        for _ in range(2):
            got = await served(actors, [SearchSpec(q, SCOPES, 10, 0.0, [], mode)  # type: ignore[arg-type]
                                        for q in QUERIES[:3] * 6])
            assert all(isinstance(e, ToolError) and e.code == "INTERNAL" and "memory.db" in str(e) for e in got)
        assert pool.calls == 0 and not actors.store.opened
        nursery.cancel_scope.cancel()



async def test_a_readers_trip_takes_up_to_sixteen_reads_counting_each_letters_weight(tmp_path: Path) -> None:
    store = MemoryStoreActor(tmp_path / "memory.db")
    send, receive = trio.open_memory_channel[Letter[Read | Write]](64)
    trips: list[list[int]] = []

    def run(conn: Any, fns: list[Any]) -> list[Any]:
        trips.append([fn() for fn in fns])
        return [outcome.Value(None)] * len(fns)

    weights = [READ_BATCH, 4, READ_BATCH, *[1] * 20, 8, 8, 8]
    for weight in weights:
        send.send_nowait(Letter(Read(functools.partial(int, weight), weight)))
    send.close()
    with trio.fail_after(30):
        await store._batches(None, receive, READ_BATCH, run)  # type: ignore[arg-type]
    assert trips == [[16], [4], [16], [1] * 16, [1] * 4 + [8], [8, 8]]


async def test_each_trip_the_searcher_asks_of_the_store_counts_as_the_searches_it_carries(
        tmp_path: Path, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    async with trio.open_nursery() as nursery:
        actors = await searcher_with(tmp_path, nursery, endpoint.url, MEMORIES)
        weights: list[int] = []
        read = actors.store.read

        async def recorded(fn: Any, *, weight: int = 1) -> Any:
            weights.append(weight)
            return await read(fn, weight=weight)

        monkeypatch.setattr(actors.store, "read", recorded)
        await served(actors, [SearchSpec(q, SCOPES, 10, 0.0, [], "lexical") for q in QUERIES * 5])
        assert sorted(weights) == [8, 16, 16]  # 40 searches: one finish trip per chunk
        nursery.cancel_scope.cancel()
