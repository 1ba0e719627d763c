"""Two processes creating one new memory store at the same moment: both open it, and the schema
is created once, whole (issue 12: the second one's `CREATE TABLE scopes` used to fail)."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

from specactor.domain.memory.schema import LATEST
from tests.memory import store_opener

ROUNDS = 50
WAIT = 120.0  # both processes' 50 rounds, with room for a loaded machine

TABLES = {"scopes", "memories", "memory_tags", "memory_fts", "counters", "sync_state", "knowledge_items"}


def test_two_processes_creating_a_new_store_at_once_both_open_it_and_the_schema_is_whole(tmp_path: Path) -> None:
    paths = [tmp_path / f"round-{n:02d}" / "memory.db" for n in range(ROUNDS)]
    for path in paths:
        path.parent.mkdir()
    spawn = multiprocessing.get_context("spawn")  # no fork of a process that has threads
    barrier = spawn.Barrier(2, timeout=WAIT)
    results: multiprocessing.queues.Queue[list[str]] = spawn.Queue()
    workers = [spawn.Process(target=store_opener.open_each, args=(paths, barrier, results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        errors = [results.get(timeout=WAIT) for _ in workers]
    finally:
        for worker in workers:
            worker.join(timeout=WAIT)
            if worker.exitcode is None:
                worker.kill()
                worker.join()
        results.close()
        results.join_thread()
    assert errors == [[], []]
    assert [worker.exitcode for worker in workers] == [0, 0]
    for path in paths:
        db = sqlite3.connect(path)
        try:
            assert db.execute("PRAGMA user_version").fetchone() == (LATEST,)
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
            assert TABLES <= names, path
            assert sorted(db.execute("SELECT * FROM counters").fetchall()) == [("fts_rows", 0), ("generation", 0)]
            assert db.execute("SELECT count(*) FROM sync_state").fetchone() == (1,)
        finally:
            db.close()
