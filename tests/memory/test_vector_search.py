"""Semantic search over the store's cached matrices: loaded once, extended by adds, loaded again after a
removal, consistent across connections, never loaded without numpy, and numpy never imported at start."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from specactor.domain.memory.embeddings import pack
from specactor.domain.memory.layers import Layer, scope_key
from specactor.domain.memory.records import NewMemory, SearchSpec
from specactor.sqlite.memory_db import apply_sync, connect, delete_memory, in_read_tx, insert_memory, search
from specactor.sqlite.vector_cache import VectorCache
from tests.memory.test_search_properties import IDS, SCOPES, store

USER: Layer = "user"


def add(conn: sqlite3.Connection, text: str, vector: list[float]) -> str:
    new = NewMemory(text, USER, scope_key(USER, IDS), {}, [], {}, pack(vector))
    return insert_memory(conn, new).memory_id


def found(conn: sqlite3.Connection, cache: VectorCache | None, vector: list[float],
          threshold: float = 0.5) -> list[str]:
    out = search(conn, SearchSpec("x", SCOPES, 10, threshold, [], "semantic", vector), cache)
    return [r.content for r in out.results]


def test_adds_extend_the_cached_matrix_and_a_delete_loads_it_again() -> None:
    cache = VectorCache()
    with store() as conn:
        add(conn, "north", [1.0, 0.0])
        doomed = add(conn, "north east", [1.0, 0.9])
        assert found(conn, cache, [1.0, 0.0]) == ["north", "north east"] and cache.loads == 1
        add(conn, "north north east", [1.0, 0.4])
        assert found(conn, cache, [1.0, 0.0]) == ["north", "north north east", "north east"] and cache.loads == 1
        delete_memory(conn, doomed)
        assert found(conn, cache, [1.0, 0.0]) == ["north", "north north east"] and cache.loads == 2
        assert found(conn, cache, [0.0, 1.0]) == [] and cache.loads == 2


def test_a_reader_sees_the_writers_commits_and_an_older_snapshot_keeps_its_own_rows(tmp_path: Path) -> None:
    cache = VectorCache()
    writer, reader, old = (connect(tmp_path / "m.db", writer=True), connect(tmp_path / "m.db", writer=False),
                           connect(tmp_path / "m.db", writer=False))
    try:
        add(writer, "first", [1.0, 0.0])
        old.execute("BEGIN")
        assert found(old, cache, [1.0, 0.0]) == ["first"]  # the snapshot `old` keeps open
        add(writer, "second", [1.0, 0.1])
        assert in_read_tx(reader, lambda c: found(c, cache, [1.0, 0.0])) == ["first", "second"]
        assert found(old, cache, [1.0, 0.0]) == ["first"]  # the matrix's prefix, not the newer rows
        old.execute("COMMIT")
        assert cache.loads == 1
    finally:
        for conn in (writer, reader, old):
            conn.close()


def test_an_orphaned_pointer_leaves_the_cached_matrix() -> None:
    from specactor.domain.knowledge.sync import Plan, SyncApply

    cache = VectorCache()
    with store() as conn:
        new = NewMemory("pointer", USER, scope_key(USER, IDS), {}, [], {"knowledgePointer": {}}, pack([1.0, 0.0]),
                        knowledge_id="adr-1")
        insert_memory(conn, new)
        assert found(conn, cache, [1.0, 0.0]) == ["pointer"]
        apply_sync(conn, SyncApply(Plan(orphans=["adr-1"]), 0, None, "c", 1.0))
        assert found(conn, cache, [1.0, 0.0]) == []


def test_without_numpy_the_search_scores_in_python_with_the_same_results(monkeypatch: pytest.MonkeyPatch) -> None:
    with store() as conn:
        for i in range(20):
            add(conn, f"memory {i}", [1.0, i / 10, (i % 3) / 5])
        with_numpy = found(conn, VectorCache(), [1.0, 0.5, 0.2], 0.0)
        monkeypatch.setitem(sys.modules, "specactor.domain.memory.vectors", None)  # import fails: no numpy
        cache = VectorCache()
        assert found(conn, cache, [1.0, 0.5, 0.2], 0.0) == with_numpy and not cache.available()
        assert cache.loads == 0


def test_the_server_starts_without_importing_numpy() -> None:
    code = ("import sys, specactor.cli, specactor.app, specactor.toolsets.memory, specactor.actors.memory_actors\n"
            "from specactor.actors.memory_store import MemoryStoreActor\n"
            "print('numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "False"


def test_numpy_before_2_without_vecdot_scores_by_matrix_product_with_the_same_results(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    with store() as conn:
        for i in range(20):
            add(conn, f"memory {i}", [1.0, i / 10, (i % 3) / 5])
        with_vecdot = found(conn, VectorCache(), [1.0, 0.5, 0.2], 0.0)
        monkeypatch.delattr(np, "vecdot")
        assert found(conn, VectorCache(), [1.0, 0.5, 0.2], 0.0) == with_vecdot == found(conn, None, [1.0, 0.5, 0.2],
                                                                                        0.0)
