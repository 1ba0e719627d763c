"""Helpers for the write-ahead log tests: reading the log as another process would, writing
through a storage without its actor loop, and leaving files as a crash would."""

from __future__ import annotations

import os
import time
from pathlib import Path

from specactor.actors.storage import StorageActor, Tx
from specactor.fs import wal


def log_of(actor: StorageActor) -> wal.WriteAheadLog:
    assert actor._wal is not None, "the actor has no write-ahead log"
    return actor._wal


def records(root: Path) -> list[wal.Found]:
    """The records of the log's current generation, read as a new process would."""
    reader = wal.WriteAheadLog(root / ".specactor", "reader")
    reader.open()
    try:
        return reader.catch_up()
    finally:
        reader.close()


def write(actor: StorageActor, rel: str, data: bytes | None) -> None:
    def fn(tx: Tx) -> None:
        if data is None:
            tx.delete(rel)
        else:
            tx.write(rel, data)

    actor.transact_blocking(fn)


def aged(path: Path, data: bytes, seconds_ago: float) -> None:
    """Put `data` at `path` as a crash could have left it: an older version, older than the log."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    then = time.time() - seconds_ago
    os.utime(path, (then, then))


def lost(path: Path) -> None:
    """Take `path` away as a crash that lost its creation would: the folder as it was before."""
    path.unlink()
    then = time.time() - 60
    os.utime(path.parent, (then, then))
