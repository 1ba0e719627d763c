"""Fixtures the storage tests share: a workspace root, and a storage actor running on it.

`SPECACTOR_REPEAT=N` runs every test of the modules in `REPEATED` N times (CI's slow job uses it
to show a timing-dependent failure is gone, not just rarer); unset, each runs once.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from specactor.actors import storage as storage_module
from specactor.actors.storage import StorageActor
from specactor.fs import wal

REPEATED = frozenset({"tests.actors.test_wal_recovery"})


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    repeat = int(os.environ.get("SPECACTOR_REPEAT") or 1)
    if repeat > 1 and metafunc.module.__name__ in REPEATED:
        metafunc.fixturenames.append("repeat_round")
        metafunc.parametrize("repeat_round", range(repeat), ids=lambda n: f"round{n}")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
async def storage(root: Path) -> AsyncIterator[StorageActor]:
    actor = StorageActor(root)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        yield actor
        nursery.cancel_scope.cancel()


@pytest.fixture
def boots(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The boot id the storage sees; append to it to play a reboot."""
    seen = [wal.boot_id() or "boot-1"]
    monkeypatch.setattr(storage_module, "current_boot", lambda: seen[-1])
    yield seen
