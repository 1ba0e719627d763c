"""After a crash, of the machine or of a writer between logging and installing: the write-ahead
log restores what was lost and nothing changed after it, and two writers share one log."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from specactor.actors.storage import StorageActor, Tx
from specactor.fs import wal
from tests.actors.wal_support import aged, log_of, lost, records, write

pytestmark = pytest.mark.skipif(wal.boot_id() is None, reason="no boot id here (not Linux): no write-ahead log")


# ---------------------------------------------------------------------- after a crash


def test_after_a_reboot_files_the_crash_lost_are_restored_from_the_log(root: Path, boots: list[str]) -> None:
    before = StorageActor(root)
    write(before, "specs/a.md", b"acknowledged")
    write(before, "specs/new/b.md", b"also acknowledged")
    write(before, "gone.md", b"to be deleted")
    write(before, "gone.md", None)
    # the machine dies: the page cache held the new files, the disk has older ones (or none)
    aged(root / "specs" / "a.md", b"stale", 60)
    lost(root / "specs" / "new" / "b.md")
    aged(root / "gone.md", b"came back", 60)
    boots.append("boot-after-the-crash")
    after = StorageActor(root)
    after.checkpoint_blocking()  # what the actor does first when it starts
    assert (root / "specs" / "a.md").read_bytes() == b"acknowledged"
    assert (root / "specs" / "new" / "b.md").read_bytes() == b"also acknowledged"
    assert not (root / "gone.md").exists()
    assert records(root) == []


LATER = [pytest.param(5_000_000_000, id="5s"), pytest.param(1, id="1ns")]


@pytest.mark.parametrize("later_ns", LATER)
def test_a_file_edited_after_its_record_is_kept_when_restoring(root: Path, boots: list[str], later_ns: int) -> None:
    before = StorageActor(root)
    write(before, "spec.md", b"written by specactor")
    record_ns = records(root)[0].record.time_ns
    (root / "spec.md").write_bytes(b"edited by hand later")
    os.utime(root / "spec.md", ns=(record_ns + later_ns,) * 2)
    boots.append("boot-after-the-crash")
    StorageActor(root).checkpoint_blocking()
    assert (root / "spec.md").read_bytes() == b"edited by hand later"


@pytest.mark.parametrize("later_ns", LATER)
def test_a_file_deleted_after_its_record_is_not_brought_back(root: Path, boots: list[str], later_ns: int) -> None:
    before = StorageActor(root)
    write(before, "specs/a.md", b"written, then deleted by hand")
    record_ns = records(root)[0].record.time_ns
    (root / "specs" / "a.md").unlink()
    os.utime(root / "specs", ns=(record_ns + later_ns,) * 2)  # the folder's time says: after the record
    boots.append("boot-after-the-crash")
    StorageActor(root).checkpoint_blocking()
    assert not (root / "specs" / "a.md").exists() and records(root) == []


@pytest.mark.parametrize("change", ["edited", "deleted"])
def test_a_change_stamped_with_the_record_time_itself_is_restored_over(
        root: Path, boots: list[str], change: str) -> None:
    # A tie: within one tick of the filesystem's clock, the record's own files carry its time
    # too, and a lost install must be repaired (the module docstring of fs/wal.py).
    before = StorageActor(root)
    write(before, "specs/a.md", b"acknowledged")
    record_ns = records(root)[0].record.time_ns
    if change == "edited":
        (root / "specs" / "a.md").write_bytes(b"changed in the same tick")
        os.utime(root / "specs" / "a.md", ns=(record_ns,) * 2)
    else:
        (root / "specs" / "a.md").unlink()
        os.utime(root / "specs", ns=(record_ns,) * 2)
    boots.append("boot-after-the-crash")
    StorageActor(root).checkpoint_blocking()
    assert (root / "specs" / "a.md").read_bytes() == b"acknowledged"


def test_the_record_time_is_on_the_filesystem_clock_so_nothing_done_after_it_looks_older(root: Path) -> None:
    # time.time() runs ahead of the coarse clock files are stamped with: against it, a folder
    # changed right after a record was often older than the record (one write in six here).
    actor = StorageActor(root)
    for n in range(100):
        write(actor, "specs/a.md", b"version %d" % n)
        record_ns = records(root)[-1].record.time_ns
        assert (root / "specs" / "a.md").stat().st_mtime_ns <= record_ns  # its own file: not newer
        (root / "specs" / "a.md").unlink()
        (root / "specs" / "b.md").write_bytes(b"made after the record")
        assert (root / "specs").stat().st_mtime_ns >= record_ns
        assert (root / "specs" / "b.md").stat().st_mtime_ns >= record_ns
        if n % 50 == 49:
            actor.checkpoint_blocking()  # the log holds at most MAX_RECORDS


def test_a_record_an_older_specactor_timed_with_time_time_is_still_restored(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    older = wal.WriteAheadLog(root / ".specactor", "an-older-boot")
    older.open()
    older.catch_up()
    monkeypatch.setattr(wal.WriteAheadLog, "stamp", lambda self, touched: time.time())  # seconds, a float
    older.append([("lost.md", b"acknowledged"), ("edited.md", b"acknowledged too")], [])
    older.close()
    aged(root / "lost.md", b"stale", 60)
    (root / "edited.md").write_bytes(b"edited later")
    os.utime(root / "edited.md", (time.time() + 5,) * 2)
    StorageActor(root).checkpoint_blocking()
    assert (root / "lost.md").read_bytes() == b"acknowledged"
    assert (root / "edited.md").read_bytes() == b"edited later"


def test_a_writer_without_the_log_settles_it_before_committing(root: Path, boots: list[str]) -> None:
    logged = StorageActor(root)
    write(logged, "a.md", b"v1, logged")
    plain = StorageActor(root, use_log=False)
    write(plain, "a.md", b"v2, fsynced without the log")
    write(plain, "b.md", b"also without it")
    assert records(root) == []  # v1's record is gone: nothing older can be replayed over v2
    boots.append("boot-after-the-crash")
    StorageActor(root).checkpoint_blocking()
    assert (root / "a.md").read_bytes() == b"v2, fsynced without the log"


def test_a_storage_no_actor_loop_serves_checkpoints_as_it_goes(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wal, "IDLE_CHECKPOINT_S", 0.0)
    actor = StorageActor(root)  # used through transact_blocking only, as a toolset's second root is
    write(actor, "a.md", b"one")
    write(actor, "b.md", b"two")
    assert records(root) == []


def test_a_group_whose_size_the_estimate_missed_is_committed_the_fsync_way(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    actor = StorageActor(root)
    write(actor, "first.md", b"logged")
    monkeypatch.setattr(wal.WriteAheadLog, "append", lambda *a, **k: (_ for _ in ()).throw(wal.LogFull()))
    write(actor, "big.md", b"did not fit after all")
    assert (root / "big.md").read_bytes() == b"did not fit after all"
    assert sorted(p.name for p in root.iterdir() if p.name.endswith(".tmp")) == []


def test_within_one_boot_installed_records_are_not_redone(root: Path, boots: list[str]) -> None:
    first = StorageActor(root)
    write(first, "spec.md", b"from the log")
    aged(root / "spec.md", b"older bytes, same boot: a hand edit the restore must not undo", 60)
    StorageActor(root).checkpoint_blocking()
    assert (root / "spec.md").read_bytes().startswith(b"older bytes")


def test_a_record_its_writer_logged_but_never_installed_is_rolled_forward(root: Path) -> None:
    (root / "spec.md").write_bytes(b"old")
    os.utime(root / "spec.md", (time.time() - 60,) * 2)
    dying = wal.WriteAheadLog(root / ".specactor", wal.boot_id() or "")
    dying.open()
    dying.catch_up()
    dying.append([("spec.md", b"logged, then the writer was killed")], [])  # never installed
    dying.close()
    other = StorageActor(root)
    write(other, "other.md", b"the next writer")
    assert (root / "spec.md").read_bytes() == b"logged, then the writer was killed"


def test_a_torn_record_at_the_end_of_the_log_is_ignored(root: Path, boots: list[str]) -> None:
    actor = StorageActor(root)
    write(actor, "a.md", b"whole")
    end = log_of(actor).end
    fd = os.open(root / ".specactor" / "wal", os.O_WRONLY)
    os.pwrite(fd, wal.RECORD.pack(wal.RECORD_MAGIC, log_of(actor).generation, 100, 0, 0) + b"half", end)
    os.close(fd)
    assert len(records(root)) == 1
    write(actor, "b.md", b"after the torn one")  # overwrites it
    assert [f.record.writes[0][0] for f in records(root)] == ["a.md", "b.md"]


def test_a_log_naming_a_path_outside_the_workspace_restores_nothing_there(
        root: Path, boots: list[str], tmp_path: Path) -> None:
    rogue = wal.WriteAheadLog(root / ".specactor", "an-older-boot")
    rogue.open()
    rogue.catch_up()
    rogue.append([("../outside.txt", b"escape"), ("inside.md", b"fine")], [])
    rogue.close()
    StorageActor(root).checkpoint_blocking()
    assert not (tmp_path / "outside.txt").exists() and (root / "inside.md").read_bytes() == b"fine"


def test_a_log_cut_short_is_replaced_by_a_fresh_one(root: Path) -> None:
    (root / ".specactor").mkdir()
    (root / ".specactor" / "wal").write_bytes(b"SPECWAL1 but far too short")
    actor = StorageActor(root)
    write(actor, "a.md", b"fine")
    assert os.path.getsize(root / ".specactor" / "wal") == wal.REGION and len(records(root)) == 1


def test_a_commit_that_fails_while_installing_is_voided_and_the_records_after_it_still_count(
        root: Path, boots: list[str]) -> None:
    actor = StorageActor(root)
    (root / "d").mkdir()  # a file cannot be installed over a directory

    def fails(tx: Tx) -> None:
        tx.write("a.md", b"from the failed commit")
        tx.write("d", b"not a directory")

    with pytest.raises(OSError):
        actor.transact_blocking(fails)
    write(actor, "b.md", b"after it")
    assert [(f.state, f.record.writes[-1][0]) for f in records(root)] == [(wal.VOID, "d"), (wal.INSTALLED, "b.md")]
    aged(root / "a.md", b"before", 60)
    lost(root / "b.md")
    boots.append("reboot")
    StorageActor(root).checkpoint_blocking()
    assert (root / "b.md").read_bytes() == b"after it" and (root / "a.md").read_bytes() == b"before"


def test_a_torn_header_starts_a_generation_no_old_record_can_belong_to(root: Path, boots: list[str]) -> None:
    actor = StorageActor(root)
    write(actor, "a.md", b"one")
    actor.checkpoint_blocking()  # generation 2 now; the generation-1 record is still in the region
    fd = os.open(root / ".specactor" / "wal", os.O_WRONLY)
    os.pwrite(fd, b"torn!", 0)
    os.close(fd)
    aged(root / "a.md", b"edited since, and now deleted by hand", 60)
    (root / "a.md").unlink()
    boots.append("reboot")
    StorageActor(root).checkpoint_blocking()
    assert not (root / "a.md").exists()  # the stale record was not taken for a current one
    assert records(root) == []


def test_a_file_that_cannot_be_restored_is_reported_and_the_others_are_restored(
        root: Path, boots: list[str]) -> None:
    before = StorageActor(root)
    write(before, "x/inner.md", b"logged")
    write(before, "y.md", b"also logged")
    (root / "x" / "inner.md").unlink()
    (root / "x").rmdir()
    (root / "x").write_bytes(b"now a file where the folder was")
    os.utime(root / "x", (time.time() - 60,) * 2)
    lost(root / "y.md")
    boots.append("reboot")
    after = StorageActor(root)
    after.checkpoint_blocking()
    assert (root / "y.md").read_bytes() == b"also logged" and records(root) == []
    write(after, "z.md", b"the workspace still takes writes")


# ---------------------------------------------------------------------- two writers, one log


def test_two_writers_share_the_log_and_either_checkpoint_covers_both(root: Path, boots: list[str]) -> None:
    a, b = StorageActor(root), StorageActor(root)
    write(a, "a.md", b"from a")
    write(b, "b.md", b"from b")
    assert log_of(b).dirty == {"a.md", "b.md"}  # b read a's record when it took the lock
    b.checkpoint_blocking()
    write(a, "a.md", b"a again")  # a sees the new generation and starts over in it
    assert [f.record.writes for f in records(root)] == [[("a.md", b"a again")]]
    aged(root / "a.md", b"lost", 60)
    boots.append("reboot")
    StorageActor(root).checkpoint_blocking()
    assert (root / "a.md").read_bytes() == b"a again" and (root / "b.md").read_bytes() == b"from b"
