"""Fixtures the storage tests share: a workspace root, and a storage actor running on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from specactor.actors import storage as storage_module
from specactor.actors import wal
from specactor.actors.storage import StorageActor


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
