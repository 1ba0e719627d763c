"""The storage actor's write-ahead log: a commit is one logged record, a checkpoint makes the files
durable and empties the log, files are swapped into place, and a setting turns it off (what a
crash leaves is repaired: test_wal_recovery.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from specactor.actors import storage as storage_module
from specactor.actors.storage import StorageActor, Tx
from specactor.config import load
from specactor.fs import files as files_module
from specactor.fs import wal
from specactor.testing import open_memory_server
from tests.actors.wal_support import log_of, records, write

pytestmark = pytest.mark.skipif(wal.boot_id() is None, reason="no boot id here (not Linux): no write-ahead log")


# ---------------------------------------------------------------------- the ordinary path


def test_a_commit_is_one_logged_record_and_a_checkpoint_empties_the_log(root: Path) -> None:
    actor = StorageActor(root)
    write(actor, "specs/a.md", b"alpha")
    write(actor, "specs/b.md", b"beta")
    found = records(root)
    assert [f.record.writes for f in found] == [[("specs/a.md", b"alpha")], [("specs/b.md", b"beta")]]
    assert all(f.applied for f in found)
    generation = log_of(actor).generation
    actor.checkpoint_blocking()
    assert records(root) == [] and log_of(actor).generation == generation + 1
    assert (root / "specs" / "a.md").read_bytes() == b"alpha"
    assert (root / ".specactor" / ".gitignore").read_text().splitlines()[0] == "wal"


class Calls:
    """Stands in for libc's syncfs: counts the calls, answers `rc` (0 after really syncing)."""

    def __init__(self, rc: int = 0) -> None:
        self.rc, self.fds = rc, 0

    def __call__(self, fd: int) -> int:
        self.fds += 1
        if self.rc == 0:
            os.fsync(fd)  # what the test can do for the file system: the file itself
        return self.rc


def fsyncs_during(root: Path, monkeypatch: pytest.MonkeyPatch, files: int) -> list[int]:
    """Write `files` files through the log, checkpoint; how many paths the fsync-each way synced."""
    synced: list[int] = []
    real = storage_module._sync_or_report
    monkeypatch.setattr(storage_module, "_sync_or_report", lambda paths: (synced.append(len(paths)), real(paths)))
    actor = StorageActor(root)
    actor.transact_blocking(lambda tx: [tx.write(f"specs/s{k}/spec.md", b"x" * k) for k in range(files)])
    actor.checkpoint_blocking()
    assert records(root) == [] and (root / "specs/s3/spec.md").read_bytes() == b"xxx"
    return synced


def test_a_checkpoint_of_many_files_syncs_each_file_system_once(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls()
    monkeypatch.setattr(files_module, "_syncfs_call", calls)
    assert fsyncs_during(root, monkeypatch, files_module.SYNCFS_FROM) == []  # not one fsync a file
    assert calls.fds == 1  # one file system


def test_a_checkpoint_of_few_files_fsyncs_each(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls()
    monkeypatch.setattr(files_module, "_syncfs_call", calls)
    synced = fsyncs_during(root, monkeypatch, 5)
    assert calls.fds == 0 and synced[0] == 5  # the files, then their folders


@pytest.mark.parametrize("syncfs", [None, Calls(rc=-1)], ids=["no syncfs", "syncfs fails"])
def test_where_syncfs_cannot_be_had_a_checkpoint_fsyncs_each_file(root: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   syncfs: Calls | None) -> None:
    monkeypatch.setattr(files_module, "_syncfs_call", syncfs)
    synced = fsyncs_during(root, monkeypatch, files_module.SYNCFS_FROM)
    assert synced[0] == files_module.SYNCFS_FROM


def test_volatile_files_are_installed_but_not_logged(root: Path) -> None:
    actor = StorageActor(root)

    def fn(tx: Tx) -> None:
        tx.write("index.cache", b"rebuildable", durable=False)
        tx.write("spec.md", b"kept")

    actor.transact_blocking(fn)
    assert [f.record.writes for f in records(root)] == [[("spec.md", b"kept")]]
    assert (root / "index.cache").read_bytes() == b"rebuildable"


def test_without_the_log_a_commit_fsyncs_as_before_and_writes_no_log(root: Path) -> None:
    actor = StorageActor(root, use_log=False)
    write(actor, "a.md", b"plain")
    assert (root / "a.md").read_bytes() == b"plain" and not (root / ".specactor" / "wal").exists()


def test_a_full_log_is_checkpointed_and_the_writes_go_on(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wal, "MAX_RECORDS", 3)
    actor = StorageActor(root)
    for i in range(10):
        write(actor, f"f{i % 4}.md", f"v{i}".encode())
    assert log_of(actor).generation >= 4 and len(records(root)) == 10 % 3
    assert [(root / f"f{k}.md").read_bytes() for k in range(4)] == [b"v8", b"v9", b"v6", b"v7"]


def test_a_transaction_too_big_for_the_log_is_committed_the_fsync_way_after_the_log(root: Path) -> None:
    actor = StorageActor(root)
    write(actor, "small.md", b"logged")
    big = b"x" * (wal.REGION + 1)
    write(actor, "big.bin", big)
    assert records(root) == []  # settled first, then fsynced without a record
    assert (root / "big.bin").read_bytes() == big and (root / "small.md").read_bytes() == b"logged"


def test_a_transaction_that_settles_leaves_the_log_empty(root: Path) -> None:
    actor = StorageActor(root)
    write(actor, "a.md", b"one")
    actor.transact_blocking(lambda tx: tx.settle())
    assert records(root) == []


# ---------------------------------------------------------------------- the actor's own checkpoints


async def test_the_actor_checkpoints_when_idle(root: Path, mock_clock: trio.testing.MockClock,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    actor = StorageActor(root)
    checkpointed = threading.Event()
    checkpoint = actor.checkpoint_blocking

    def watched() -> None:
        checkpoint()
        checkpointed.set()

    monkeypatch.setattr(actor, "checkpoint_blocking", watched)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await actor.write("a.md", b"one")
        assert log_of(actor).count == 1
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(wal.IDLE_CHECKPOINT_S / 2)
        await trio.testing.wait_all_tasks_blocked()
        assert not checkpointed.is_set()  # not idle long enough yet
        mock_clock.jump(wal.IDLE_CHECKPOINT_S)
        assert await trio.to_thread.run_sync(checkpointed.wait, 10)
        assert records(root) == []
        nursery.cancel_scope.cancel()


async def test_a_stopping_actor_leaves_the_log_empty(root: Path) -> None:
    actor = StorageActor(root)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.write("a.md", b"one")
            nursery.cancel_scope.cancel()
    assert records(root) == [] and (root / "a.md").read_bytes() == b"one"


# ---------------------------------------------------------------------- installing a file


def test_installing_over_a_file_swaps_it_in_and_leaves_no_temp_file(root: Path) -> None:
    target = root / "f.md"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    tmp = storage_module.stage(target, b"new", sync=False)
    storage_module.install(tmp, target)
    assert target.read_bytes() == b"new" and oct(target.stat().st_mode & 0o777) == oct(0o640)
    assert sorted(p.name for p in root.iterdir()) == ["f.md"]


def test_installing_where_no_file_is_yet_renames(root: Path) -> None:
    target = root / "d" / "new.md"
    tmp = storage_module.stage(target, b"first", sync=False)
    storage_module.install(tmp, target)
    assert target.read_bytes() == b"first" and sorted(p.name for p in target.parent.iterdir()) == ["new.md"]


def test_installing_over_a_directory_fails_and_leaves_it_alone(root: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "inside.md").write_bytes(b"keep")
    tmp = storage_module.stage(root / "d", b"not a directory", sync=False)
    with pytest.raises(OSError):
        storage_module.install(tmp, root / "d")
    assert (root / "d" / "inside.md").read_bytes() == b"keep"


# ---------------------------------------------------------------------- the setting


@pytest.mark.parametrize(("value", "logged"), [("false", False), ("true", True)])
async def test_the_storage_log_setting_decides_whether_a_server_writes_through_the_log(
        root: Path, value: str, logged: bool) -> None:
    config = load({"root": str(root), "toolsets": ["airsspec"], "session_log.enabled": False},
                  environ={"SPECACTOR_STORAGE_LOG": value})
    assert config.storage_log is logged
    async with open_memory_server(config) as client:
        with trio.fail_after(30):
            await client.initialize()
            reply = await client.request("tools/call", {"name": "spec_create", "arguments": {
                "title": "Log or not", "description": "d"}}, timeout=30)
            assert reply["result"]["structuredContent"]["success"]
            assert (root / ".specactor" / "wal").exists() is logged


def test_a_log_that_cannot_be_made_leaves_commits_to_fsync(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_room(self: wal.WriteAheadLog) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(wal.WriteAheadLog, "open", no_room)
    actor = StorageActor(root)
    write(actor, "a.md", b"still written, durably")
    write(actor, "b.md", b"and the next")
    assert (root / "a.md").read_bytes() == b"still written, durably" and actor._wal is None
