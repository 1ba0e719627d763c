"""The second half of a chunk of memory searches (`memory_db.finishes`: the cosines, the fusion, the
rows) as a worker-pool task, so that a burst's searches are scored on other cores while this process
answers them (`actors/memory_searcher.py`).

A worker keeps, per memory database, one read-only connection (opened on first use, never creating
the file), its own vector cache and its own lexicon: both are checked against each read transaction's
snapshot (the `generation` and per-scope counters the writer's triggers keep), so a worker's caches are
as safe as the store's readers' own. A chunk crosses as msgpack (its specs, query vectors and lexical
passes) and its answers come back the same way; a search that fails in a worker comes back as a
`Failed` (its ToolError, or INTERNAL naming what was raised) and fails alone, as it would in-process.
No trio here: this module is imported by the worker processes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import msgspec
import outcome

from specactor.concurrency.tasks import Task
from specactor.domain.memory.api import MemorySearchOut
from specactor.domain.memory.records import SearchSpec
from specactor.protocol.errors import ToolError, ToolErrorCode
from specactor.sqlite.lexicon import Lexicon
from specactor.sqlite.memory_db import LexicalPass, connect, finishes, in_read_tx
from specactor.sqlite.vector_cache import VectorCache

Work = list[tuple[SearchSpec, LexicalPass | None]]


class Failed(msgspec.Struct, tag=True):
    """A search that failed in the worker: the error its caller gets."""

    code: ToolErrorCode
    message: str
    details: dict[str, object] = {}
    retryable: bool = False


class Found(msgspec.Struct, tag=True):
    out: MemorySearchOut


Answer = Found | Failed
_WORK = msgspec.msgpack.Decoder(Work)


class Database:
    """A worker's view of one memory database: its connection (opened on first use) and caches."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn: sqlite3.Connection | None = None
        self.vectors = VectorCache()
        self.lexicon = Lexicon()

    def connection(self) -> sqlite3.Connection:
        if self.conn is None:
            try:
                self.conn = connect(self.path, writer=False, existing=True)
            except (sqlite3.Error, ValueError, OSError) as exc:
                raise ToolError("INTERNAL", f"the memory database {self.path} cannot be opened: {exc}") from None
        return self.conn


def key(path: Path) -> str:
    """The workers' cache key of the database at `path`."""
    return f"memory-db:{path}"


def encode(work: Work) -> bytes:
    return msgspec.msgpack.encode(work)


def finish_chunk(db: Database, payload: bytes) -> list[Answer]:
    """`finishes` of the chunk `payload` (`encode`d), in one read transaction of `db`."""
    work = _WORK.decode(payload)
    try:
        results = in_read_tx(db.connection(), lambda conn: finishes(conn, work, db.vectors, db.lexicon))
    except Exception as exc:  # the database, not one search: every search of the chunk learns why
        return [_failed(exc)] * len(work)
    return [Found(r.value) if isinstance(r, outcome.Value) else _failed(r.error)  # type: ignore[attr-defined]
            for r in results]


def outcomes(answers: Sequence[Answer]) -> list[outcome.Outcome[MemorySearchOut]]:
    """A worker's answers as `finishes` answers in-process."""
    return [outcome.Value(a.out) if isinstance(a, Found) else
            outcome.Error(ToolError(a.code, a.message, dict(a.details), retryable=a.retryable)) for a in answers]


def _failed(exc: BaseException) -> Failed:
    if isinstance(exc, ToolError):
        return Failed(exc.code, exc.message, dict(exc.details), exc.retryable)
    return Failed("INTERNAL", f"the memory search failed: {type(exc).__name__}: {exc}")


def _load(data: bytes) -> Database:
    return Database(Path(data.decode()))


def _dump(db: Database) -> bytes:
    return str(db.path).encode()


FINISH: Task[Database, list[outcome.Outcome[MemorySearchOut]]] = Task(
    "memory_search", finish_chunk, _load, _dump, list[Answer], outcomes)
