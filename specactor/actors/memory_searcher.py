"""The memory searcher: every `memory_search` goes through it, so that a burst of searches is served
as one batch instead of as many calls to two actors.

It takes the searches queued when it looks (a burst's, queued in one scheduler tick), up to BATCH,
and serves them together:

- the queries that need a vector (hybrid and semantic modes, with an embeddings endpoint) go out in
  one request (`EmbeddingsClient.embed`, once for the batch);
- meanwhile, in hybrid mode, the lexical passes (`memory_db.lexical_pass`, which need no vector) run
  on the store's readers, so that the FTS work is done while the endpoint is being waited for;
- once the vectors are back, the rest of each search (`memory_db.finish`: the cosines, the fusion,
  the rows) runs; a finish that sees other data than its lexical pass saw (`generation`) searches
  again in its own read transaction, so each answer is as of one snapshot;
- each trip to the store carries up to CHUNK searches, one read transaction for all of them, so
  both readers work and the answers go out chunk by chunk;
- with a worker pool (`pool`), the chunks' finishes that overlap run in its worker processes
  (`sqlite/search_task.py`), on the other cores: this process's one interpreter then only answers them.
  A burst's chunks all go there (none runs in-process beside the answers); chunks of CHUNK, not one
  per worker: a static cut leaves a worker idle while the other finishes a heavy piece.

A failed embeddings request fails each search that needed its vector with that request's error
(RATE_LIMITED, PROVIDER_ERROR: the tool layer's retries resend the search); a search that fails in
the store fails alone. Why a batch: docs/decisions.md ("memory_search as a batch").
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import outcome
import trio

from specactor.actors.embeddings import EMBED_BATCH, EmbeddingsClient
from specactor.actors.mailbox import ActorTimeout, Letter, Mailbox
from specactor.actors.memory_store import CALL_TIMEOUT, READ_BATCH, MemoryStoreActor
from specactor.actors.supervisor import ChildSpec
from specactor.domain.memory.api import MemorySearchOut
from specactor.domain.memory.records import SearchSpec
from specactor.sqlite import search_task
from specactor.sqlite.memory_db import LexicalPass, finishes, lexical_passes

if TYPE_CHECKING:
    from specactor.actors.worker_pool import WorkerPool

# One letter per search waiting for its answer: a burst of 100 concurrent searches queues without
# blocking its senders, as the store's and the embeddings client's mailboxes do.
QUEUE = 256
# Searches served together: one embeddings request carries at most EMBED_BATCH texts.
BATCH = EMBED_BATCH
# Searches per trip to the store: the store's own batch size, so a chunk is answered as soon as one
# reader has run it, while the other reader runs the next.
CHUNK = READ_BATCH


@dataclass(frozen=True)
class Search:
    spec: SearchSpec  # without its query vector: the searcher fetches it when `spec.mode` needs one


class _Vectors:
    """The batch's embeddings request, once it is answered: the vectors, or the error."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.vectors: list[list[float]] = []
        self.error: Exception | None = None


class MemorySearcher:
    """Args:
        store: the memory store, whose readers run the searches.
        embeddings: the embeddings client, or None (lexical mode: no search needs a vector).
    """

    def __init__(self, store: MemoryStoreActor, embeddings: EmbeddingsClient | None) -> None:
        self.store = store
        self.embeddings = embeddings
        self.mailbox: Mailbox[Search] = Mailbox("memory-searcher", QUEUE)
        # Where a burst's chunks are scored besides the store's readers (the memory toolset sets it on the
        # first search); None: always on the readers.
        self.pool: WorkerPool | None = None
        self._db: search_task.Database | None = None  # the pool's state: the store's database, by path
        # A search waits for the embeddings request and two trips to the store, each bounded already.
        self.call_timeout = 2 * CALL_TIMEOUT + (embeddings.call_timeout if embeddings is not None else 0.0)
        # Permanent: it holds nothing but the batches in flight, whose callers learn of a crash at once.
        self.spec = ChildSpec("memory-searcher", self.run, restart="permanent")

    async def search(self, spec: SearchSpec) -> MemorySearchOut:
        """`memory_db.search` of `spec`, its query embedded first when its mode needs a vector.

        Raises:
            RateLimited, ProviderError, ToolError: the embeddings request failed. ToolError: INTERNAL,
                the database cannot be opened. ActorError: an actor crashed or did not answer in time.
        """
        found: MemorySearchOut = await self.mailbox.call(Search(spec), self.call_timeout)
        return found

    def _needs_vector(self, spec: SearchSpec) -> bool:
        return self.embeddings is not None and spec.mode != "lexical"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the queued searches in batches until cancelled."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            async for first in self.mailbox:
                batch = [first]
                while len(batch) < BATCH:
                    try:
                        batch.append(self.mailbox.receive_nowait())
                    except trio.WouldBlock:
                        break
                with contextlib.ExitStack() as held:  # a crash here tells the batch at once
                    for letter in batch:
                        held.enter_context(letter)
                        if not isinstance(letter.body, Search):  # a sender's bug: crash, be restarted
                            raise TypeError(f"the memory searcher got a message it does not know: {letter.body!r}")
                    nursery.start_soon(self._serve, batch)
                    held.pop_all()  # the batch's task answers them now

    async def _serve(self, batch: list[Letter[Search]]) -> None:
        with contextlib.ExitStack() as held:
            for letter in batch:
                held.enter_context(letter)
            wanting = [letter.body.spec.query for letter in batch if self._needs_vector(letter.body.spec)]
            vectors = _Vectors()
            async with trio.open_nursery() as nursery:
                if wanting:
                    nursery.start_soon(self._embed, wanting, vectors)
                else:
                    vectors.done.set()
                at = 0  # where each chunk's vectors start among `wanting`'s
                async with trio.open_nursery() as chunks:
                    for start in range(0, len(batch), CHUNK):
                        chunk = batch[start:start + CHUNK]
                        chunks.start_soon(self._chunk, chunk, at, vectors, len(batch) > CHUNK)
                        at += sum(self._needs_vector(letter.body.spec) for letter in chunk)
                # Every search is answered: one still waiting for the vectors failed in the store already,
                # so a request still out is wanted by nobody.
                nursery.cancel_scope.cancel()

    async def _embed(self, texts: list[str], vectors: _Vectors) -> None:
        assert self.embeddings is not None
        try:
            vectors.vectors = await self.embeddings.embed(texts)
        except Exception as exc:  # the same error for every search that needed a vector
            vectors.error = exc
        vectors.done.set()

    async def _chunk(self, chunk: Sequence[Letter[Search]], at: int, vectors: _Vectors, overlapping: bool) -> None:
        specs = [letter.body.spec for letter in chunk]
        passes: list[outcome.Outcome[LexicalPass] | None] = [None] * len(chunk)
        early = [i for i, spec in enumerate(specs) if spec.mode == "hybrid" and self._needs_vector(spec)]
        if early and not vectors.done.is_set():  # the FTS work, while the endpoint is waited for
            try:
                lexicon = self.store.lexicon
                got = await self.store.read(lambda conn: lexical_passes(conn, [specs[i] for i in early], lexicon),
                                            weight=len(early))
            except Exception as exc:  # the store cannot serve: the chunk's searches learn why
                _fail(chunk, exc)
                return
            for i, one in zip(early, got, strict=True):
                passes[i] = one
        await vectors.done.wait()
        work: list[tuple[SearchSpec, LexicalPass | None]] = []
        asked: list[Letter[Search]] = []
        for i, (letter, spec) in enumerate(zip(chunk, specs, strict=True)):
            if self._needs_vector(spec):
                if vectors.error is not None:
                    letter.fail(vectors.error)
                    continue
                spec = replace(spec, query_vector=vectors.vectors[at])
                at += 1
            lexical = passes[i]
            if isinstance(lexical, outcome.Error):
                letter.fail(lexical.error)
                continue
            work.append((spec, lexical.unwrap() if lexical is not None else None))
            asked.append(letter)
        if not work:
            return
        try:
            results = await self._finish(work, overlapping)
        except Exception as exc:
            _fail(asked, exc)
            return
        for letter, result in zip(asked, results, strict=True):
            letter.answer(result)

    async def _finish(self, work: list[tuple[SearchSpec, LexicalPass | None]], overlapping: bool,
                      ) -> list[outcome.Outcome[MemorySearchOut]]:
        """`finishes` of `work`: on the store's readers, or in a pool worker when the pool takes it (it
        does when chunks overlap, a burst's, so that they are scored on the other cores; `overlapping`:
        this chunk is one of its batch's several, all of which go to the workers)."""
        store = self.store

        async def here() -> list[outcome.Outcome[MemorySearchOut]]:
            return await store.read(lambda conn: finishes(conn, work, store.vectors, store.lexicon),
                                    weight=len(work))

        pool = self.pool
        if pool is None or not store.opened:  # a worker must not open a file the store has not migrated
            return await here()
        if self._db is None or self._db.path != store.db_path:
            self._db = search_task.Database(store.db_path)
        try:
            with trio.fail_after(CALL_TIMEOUT):  # a hung worker is killed (the pool's cancel) and replaced
                return await pool.call(search_task.FINISH, search_task.key(store.db_path), self._db,
                                       search_task.encode(work), inline=here, overlapping=overlapping)
        except trio.TooSlowError:
            raise ActorTimeout(f"a pool worker did not finish {len(work)} memory searches within "
                               f"{CALL_TIMEOUT:g} s") from None


def _fail(letters: Sequence[Letter[Search]], error: BaseException) -> None:
    for letter in letters:
        letter.fail(error)
