"""The memory store actor: it owns the memory database, and nothing else.

SQLite in WAL mode with `synchronous=FULL`: one writer connection, on which queued writes are
group-committed (one transaction, one fsync, each write in its own savepoint so one failure
spoils no other), and READERS reader connections, each draining the queued reads in batches
(up to READ_BATCH per trip to its thread, each read in a read transaction of its own). Every
database call runs on a worker thread; a reply is sent only after its transaction committed.
The actor reports itself started at once and opens (and migrates) the database as its first job.
While the database cannot be opened, each call is answered with why (INTERNAL, naming the file)
and the next call tries again: an unopenable database fails the memory tools, never the actor
or its supervisor, and a database fixed meanwhile is used at once.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import outcome
import trio

from specactor.actors.mailbox import Letter, Mailbox, post
from specactor.actors.supervisor import ChildSpec
from specactor.logsetup import get_logger
from specactor.protocol.errors import ToolError
from specactor.sqlite.lexicon import Lexicon
from specactor.sqlite.memory_db import close_all, connect, group_commit, read_each
from specactor.sqlite.vector_cache import VectorCache

log = get_logger("specactor.memory_store")
T = TypeVar("T")
# Reads run on READERS threads at once (SQLite releases the GIL while it steps, so they overlap), each
# taking up to READ_BATCH queued reads per trip. Measured with 100 memory_searches at once
# (bench.iowait, hybrid search stage): a thread per read on 4 readers cost 1.14-1.24 ms of
# server CPU a search, the GIL passed back and forth between five threads; batches on 1-2 readers
# 0.55-0.59 ms, and P95 112-124 -> 83-85 ms. Two, not one: a slow read (a semantic scan of 100,000
# memories) must not hold up every other.
READERS = 2
# Callers wait for their answer, so the queue holds about one letter per request in flight;
# 256 lets a burst of adds queue up (and be group-committed) without blocking the senders.
QUEUE = 256
READ_BATCH = 16  # a batch answers together, so small enough that the first answers are not held long
CALL_TIMEOUT = 60.0


@dataclass(frozen=True)
class Write:
    fn: Callable[[sqlite3.Connection], Any]


@dataclass(frozen=True)
class Read:
    fn: Callable[[sqlite3.Connection], Any]
    # How many reads `fn` stands for (the memory searcher's chunk of searches): a reader's trip takes up to
    # READ_BATCH of them, so that a burst's chunks spread over both readers instead of riding one trip.
    weight: int = 1


class MemoryStoreActor:
    """Args:
        db_path: the SQLite file (created, with its folder).
        readers: reader connections: how many reads run at once.
    """

    def __init__(self, db_path: Path, *, readers: int = READERS) -> None:
        self.db_path = db_path
        self.readers = readers
        self.mailbox: Mailbox[Read | Write] = Mailbox("memory-store", QUEUE)
        self.commits = 0
        # The scopes' vectors as numpy matrices, for the searches run on the readers (`memory_db.search`);
        # each search checks them against its snapshot, so a restart or another process loses nothing.
        self.vectors = VectorCache()
        # The counts the searches' lexical passes read besides their matches, per generation (`sqlite/lexicon.py`).
        self.lexicon = Lexicon()
        # Whether the database is open (and migrated): until then, nothing else should open the file.
        self.opened = False
        # Permanent: it serves as long as the app runs. A restart loses nothing (a write is
        # answered only once committed; letters still queued wait for the next instance) and
        # cannot fail, since opening the database is not part of starting.
        self.spec = ChildSpec("memory-store", self.run, restart="permanent")

    async def read(self, fn: Callable[[sqlite3.Connection], T], *, weight: int = 1) -> T:
        """Run `fn` in a read transaction (one consistent snapshot) on a reader connection.

        Args:
            weight: how many reads `fn` makes (`Read.weight`).

        Raises:
            ToolError: INTERNAL, the database cannot be opened. ActorError: the store crashed or
                did not answer in time. Exception: whatever `fn` raised.
        """
        result: T = await self.mailbox.call(Read(fn, weight), CALL_TIMEOUT)
        return result

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` in a write transaction; returns once that transaction is committed.

        Raises:
            As `read`; when `fn` raises, its savepoint is rolled back and nothing of it is written.
        """
        result: T = await self.mailbox.call(Write(fn), CALL_TIMEOUT)
        return result

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the database, then serve the mailbox until cancelled."""
        task_status.started()
        conns, early = await self._open()
        read_send, read_recv = trio.open_memory_channel[Letter[Read | Write]](QUEUE)
        # The writer drains what is queued into one transaction; as deep as the mailbox.
        write_send, write_recv = trio.open_memory_channel[Letter[Read | Write]](QUEUE)
        self.opened = True
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._batches, conns[0], write_recv, QUEUE, self._group_commit)
                for conn in conns[1:]:
                    nursery.start_soon(self._batches, conn, read_recv, READ_BATCH, read_each)
                for letter in early:
                    await self._route(letter, write_send, read_send)
                async for letter in self.mailbox:
                    await self._route(letter, write_send, read_send)
        finally:
            self.opened = False
            _abandon(write_recv)
            _abandon(read_recv)
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(close_all, conns)

    async def _route(self, letter: Letter[Read | Write], writes: trio.MemorySendChannel[Letter[Read | Write]],
                     reads: trio.MemorySendChannel[Letter[Read | Write]]) -> None:
        match letter.body:
            case Write():
                await post(writes, letter)  # the route's loop checkpoints as it takes the next letter
            case Read():
                await post(reads, letter)
            case _:  # a sender's bug: crash, and the supervisor starts a store that knows nothing of it
                with letter:
                    raise TypeError(f"the memory store got a message it does not know: {letter.body!r}")

    async def _open(self) -> tuple[list[sqlite3.Connection], list[Letter[Read | Write]]]:
        """The writer and the readers, and the call that was held while they were opened.

        Tried at once; while opening fails, the calls waiting are answered with why, and the
        next call to come tries again (and is served once the database opens).
        """
        held: list[Letter[Read | Write]] = []
        while True:
            try:
                return await trio.to_thread.run_sync(self._connect), held
            except Exception as exc:
                log.error("the memory database cannot be opened", db=str(self.db_path),
                          error=f"{type(exc).__name__}: {exc}")
                failure = ToolError("INTERNAL", f"the memory database {self.db_path} cannot be opened: {exc}")
            while True:
                try:
                    held.append(self.mailbox.receive_nowait())
                except trio.WouldBlock:
                    break
            for letter in held:
                with letter:
                    letter.fail(failure)
            held = [await self.mailbox.receive()]

    def _connect(self) -> list[sqlite3.Connection]:
        """On a worker thread: the writer (which migrates), then the readers; none left open on failure."""
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.vectors.clear()  # the file may be another than the one the matrices came from
        self.lexicon.clear()  # and than the one the counts came from, at the same generation perhaps
        conns = [connect(self.db_path, writer=True)]
        try:
            for _ in range(self.readers):
                conns.append(connect(self.db_path, writer=False))
        except BaseException:
            close_all(conns)
            raise
        return conns

    async def _batches(self, conn: sqlite3.Connection, inbox: trio.MemoryReceiveChannel[Letter[Read | Write]],
                       limit: int, run: Callable[[sqlite3.Connection, list[Callable[[sqlite3.Connection], Any]]],
                                                 list[outcome.Outcome[Any]]]) -> None:
        """Serve `inbox` on `conn`: each trip to a worker thread takes what is queued, up to `limit` reads
        (`Read.weight` each), and `run`s it there; each letter gets its own outcome. A letter taken that
        would pass the limit opens the next trip."""
        carried: Letter[Read | Write] | None = None
        try:
            while True:
                if carried is not None:
                    first, carried = carried, None
                else:
                    try:
                        first = await inbox.receive()
                    except trio.EndOfChannel:
                        return
                batch = [first]
                weight = _weight(first)
                while weight < limit:
                    try:
                        letter = inbox.receive_nowait()
                    except trio.WouldBlock:
                        break
                    if weight + _weight(letter) > limit:
                        carried = letter
                        break
                    batch.append(letter)
                    weight += _weight(letter)
                with contextlib.ExitStack() as held:  # a crash mid-batch tells every caller of the batch at once
                    for letter in batch:
                        held.enter_context(letter)
                    results = await trio.to_thread.run_sync(run, conn, [ltr.body.fn for ltr in batch])
                    for letter, result in zip(batch, results, strict=True):
                        letter.answer(result)
        finally:
            if carried is not None:
                with carried:
                    pass  # closing its reply channel tells its caller at once (ActorCrashed)

    def _group_commit(self, conn: sqlite3.Connection,
                      fns: list[Callable[[sqlite3.Connection], Any]]) -> list[outcome.Outcome[Any]]:
        results: list[outcome.Outcome[Any]] = group_commit(conn, fns)
        self.commits += 1  # on the worker thread, once committed (read by tests and metrics)
        return results


def _weight(letter: Letter[Read | Write]) -> int:
    return letter.body.weight if isinstance(letter.body, Read) else 1


def _abandon(inbox: trio.MemoryReceiveChannel[Letter[Read | Write]]) -> None:
    """Close the writes queued for a writer that is gone: each caller learns at once (ActorCrashed)
    that nothing of its write was done, instead of waiting out its timeout."""
    while True:
        try:
            letter = inbox.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return
        with letter:
            pass  # closing its reply channel is the answer
