"""The storage actor: atomic writes, transactions, path checks, and two processes on one workspace."""

from __future__ import annotations

import fcntl
import os
import random
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from specactor.actors import storage as storage_module
from specactor.actors.change_feed import ChangeFeed, Subscription
from specactor.actors.storage import LockBusy, PathEscape, StorageActor, Tx, atomic_write, resolve_inside, safe_relative
from specactor.domain.changes import Change
from specactor.fs import files as files_module
from tests.actors.storage_worker import COUNTER, PAYLOAD, check_payload

REPO = Path(__file__).resolve().parents[2]
WAIT = 60.0  # seconds any subprocess may take


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def leftovers(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*.tmp"))


# ---------------------------------------------------------------------- atomic writes


def test_atomic_write_creates_the_parents_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c" / "file.txt"
    atomic_write(target, b"first")
    assert target.read_bytes() == b"first"
    atomic_write(target, b"second")
    assert target.read_bytes() == b"second"
    assert leftovers(tmp_path) == []
    assert names(target.parent) == ["file.txt"]


async def test_a_write_through_the_actor_creates_parents_and_leaves_no_temp_file(
        storage: StorageActor, root: Path) -> None:
    with trio.fail_after(10):
        await storage.write("specs/auth/spec.md", b"# Auth\n")
        assert await storage.read("specs/auth/spec.md") == b"# Auth\n"
        assert await storage.read("specs/missing.md") is None
    assert (root / "specs" / "auth" / "spec.md").read_bytes() == b"# Auth\n"
    assert leftovers(root) == []
    assert storage.commits == 1


def test_an_atomic_write_keeps_the_mode_of_the_file_it_replaces_and_the_umask_for_new_ones(
        tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_bytes(b"#!/bin/sh\n")
    script.chmod(0o755)
    atomic_write(script, b"#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    umask = os.umask(0o022)
    try:
        atomic_write(tmp_path / "new.txt", b"x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644


# ---------------------------------------------------------------------- transactions


async def test_a_transaction_reads_its_own_staged_writes_and_commits_them_together(
        storage: StorageActor, root: Path) -> None:
    (root / "old.txt").write_bytes(b"old")
    seen: dict[str, bytes | None] = {}

    def tx_fn(tx: Tx) -> str:
        tx.write("new.txt", b"new")
        tx.write("old.txt", b"replaced")
        seen["new"] = tx.read("new.txt")
        seen["old"] = tx.read("old.txt")
        seen["disk"] = (root / "old.txt").read_bytes()  # nothing committed yet
        tx.delete("new.txt")
        seen["deleted"] = tx.read("new.txt")
        return "result"

    with trio.fail_after(10):
        assert await storage.transact(tx_fn) == "result"
    assert seen == {"new": b"new", "old": b"replaced", "disk": b"old", "deleted": None}
    assert (root / "old.txt").read_bytes() == b"replaced"
    assert not (root / "new.txt").exists()


async def test_a_transaction_that_raises_commits_nothing_and_the_caller_gets_the_error(
        storage: StorageActor, root: Path) -> None:
    def tx_fn(tx: Tx) -> None:
        tx.write("half.txt", b"half")
        raise LookupError("changed my mind")

    with trio.fail_after(10):
        with pytest.raises(LookupError, match="changed my mind"):
            await storage.transact(tx_fn)
        await storage.write("after.txt", b"the actor still works")
    assert not (root / "half.txt").exists()
    assert (root / "after.txt").read_bytes() == b"the actor still works"


async def test_a_transaction_whose_commit_fails_part_way_commits_nothing(storage: StorageActor, root: Path) -> None:
    (root / "a.txt").write_bytes(b"old")
    (root / "plain").write_bytes(b"a file, not a directory")

    def tx_fn(tx: Tx) -> None:
        tx.write("a.txt", b"new")
        tx.write("plain/child.txt", b"cannot exist")

    with trio.fail_after(10), pytest.raises(OSError):
        await storage.transact(tx_fn)
    assert (root / "a.txt").read_bytes() == b"old"


async def test_a_transaction_sees_its_staged_write_under_any_spelling_of_the_path(
        storage: StorageActor, root: Path) -> None:
    seen: list[bytes | None] = []

    def tx_fn(tx: Tx) -> None:
        tx.write("d/a.txt", b"v1")
        seen.append(tx.read("d//a.txt"))
        seen.append(tx.read("./d/a.txt"))
        tx.delete("./d/a.txt")
        tx.write("d/a.txt", b"v2")  # the last operation: the file must hold v2

    with trio.fail_after(10):
        await storage.transact(tx_fn)
    assert seen == [b"v1", b"v1"]
    assert (root / "d" / "a.txt").read_bytes() == b"v2"


async def test_a_peer_holding_the_lock_too_long_yields_lock_busy_not_a_hang(
        storage: StorageActor, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_module, "LOCK_WAIT", 0.2)
    storage.lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(storage.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: conflicts like another process
        with trio.fail_after(10), pytest.raises(LockBusy, match="locked by another process"):
            await storage.write("blocked.txt", b"x")
    finally:
        os.close(fd)
    with trio.fail_after(10):
        await storage.write("free.txt", b"y")  # the actor survived and the lock is free again
    assert not (root / "blocked.txt").exists() and (root / "free.txt").read_bytes() == b"y"


async def test_a_write_waiting_on_a_peer_goes_ahead_once_the_peer_lets_go(storage: StorageActor, root: Path) -> None:
    storage.lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(storage.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(storage.write, "waited.txt", b"w")
                await trio.testing.wait_all_tasks_blocked()
                assert not (root / "waited.txt").exists()  # it waits for the peer
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    assert (root / "waited.txt").read_bytes() == b"w"


async def test_a_waiter_that_gave_up_lets_the_lock_go_when_it_comes(
        storage: StorageActor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_module, "LOCK_WAIT", 0.05)
    storage.lock_path.parent.mkdir(parents=True, exist_ok=True)
    peer = os.open(storage.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(peer, fcntl.LOCK_EX)
    with trio.fail_after(10), pytest.raises(LockBusy):
        await storage.write("blocked.txt", b"x")
    os.close(peer)  # the abandoned waiter's flock now succeeds: it must let go at once
    other = os.open(storage.lock_path, os.O_RDWR)
    try:
        with trio.fail_after(10):  # a hang here: the waiter kept the lock for nobody
            await trio.to_thread.run_sync(fcntl.flock, other, fcntl.LOCK_EX, abandon_on_cancel=True)
    finally:
        os.close(other)


# ---------------------------------------------------------------------- path escapes

ESCAPES = ["/etc/passwd", "../outside.txt", "a/../../outside.txt", "a/..", "..", "a\\b.txt", "a\x00b", ""]


@pytest.mark.parametrize("rel", ESCAPES)
def test_a_path_spelled_to_escape_is_refused(rel: str, root: Path) -> None:
    with pytest.raises(PathEscape):
        safe_relative(rel)
    with pytest.raises(PathEscape):
        resolve_inside(root, rel)


@pytest.mark.parametrize("rel", ["a.txt", "d/e/f.md", "./a.txt", "d//a.txt", "with space/ü.md", "..hidden"])
def test_an_ordinary_relative_path_is_accepted(rel: str, root: Path) -> None:
    assert root.resolve() in resolve_inside(root, rel).resolve().parents


@pytest.fixture
def outside(tmp_path: Path, root: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_bytes(b"secret")
    (root / "dirlink").symlink_to(out, target_is_directory=True)
    (root / "filelink").symlink_to(out / "secret.txt")
    (root / "dangling").symlink_to(out / "not-yet.txt")
    (root / "inside").mkdir()
    (root / "innerlink").symlink_to(root / "inside", target_is_directory=True)
    return out


@pytest.mark.parametrize("rel", ["dirlink/secret.txt", "dirlink/new.txt", "filelink", "dangling",
                                 *ESCAPES])
async def test_the_actor_refuses_to_read_or_write_an_escaping_path(
        rel: str, storage: StorageActor, outside: Path) -> None:
    before = names(outside)
    with trio.fail_after(10):
        with pytest.raises(PathEscape):
            await storage.read(rel)
        with pytest.raises(PathEscape):
            await storage.write(rel, b"pwned")

        def reader(tx: Tx) -> bytes | None:
            return tx.read(rel)

        with pytest.raises(PathEscape):
            await storage.transact(reader)
    assert names(outside) == before
    assert (outside / "secret.txt").read_bytes() == b"secret"


SEGMENTS = st.sampled_from(["a", "b.txt", "..", ".", "", "dirlink", "filelink", "dangling", "innerlink", "inside",
                            "\\", "\x00", "/", "ü", "..."])


@given(parts=st.lists(SEGMENTS, min_size=1, max_size=6), absolute=st.booleans())
def test_any_accepted_path_resolves_inside_the_root(parts: list[str], absolute: bool, root: Path,
                                                    outside: Path) -> None:
    rel = ("/" if absolute else "") + "/".join(parts)
    try:
        target = resolve_inside(root, rel)
    except PathEscape:
        return
    real_root = root.resolve()
    real = target.resolve()
    assert real == real_root or real_root in real.parents, rel
    assert not absolute and ".." not in parts


async def test_a_symlink_that_stays_inside_the_root_is_followed(storage: StorageActor, root: Path,
                                                                outside: Path) -> None:
    with trio.fail_after(10):
        await storage.write("innerlink/x.txt", b"ok")
        assert await storage.read("innerlink/x.txt") == b"ok"
    assert (root / "inside" / "x.txt").read_bytes() == b"ok"


# ---------------------------------------------------------------------- two processes


def worker(root: Path, *args: str, **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.actors.storage_worker", str(root), *args],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)  # type: ignore[call-overload]


@pytest.mark.slow
def test_two_processes_incrementing_one_counter_never_lose_an_update(root: Path) -> None:
    procs = [worker(root, "200") for _ in range(2)]
    try:
        outputs = [p.communicate(timeout=WAIT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=WAIT)
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err.decode()
        assert out == b"done\n"
    assert (root / COUNTER).read_bytes() == b"400"
    assert leftovers(root) == []


async def next_line(stream: trio.abc.ReceiveStream, buf: bytearray) -> str:
    while b"\n" not in buf:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise EOFError("the worker exited early")
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line.decode()


@pytest.mark.slow
async def test_a_kill_during_writes_never_leaves_a_torn_file(root: Path) -> None:
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    target = root / PAYLOAD
    committed_ever = False
    torn_tmp = 0  # temp files a kill left behind: evidence that some kills did land mid-write
    # Kill points: just as a payload is staged (the commit is then writing, fsyncing or
    # renaming), or just after a commit; each at a random iteration.
    points = [("staged", rng.randint(1, 4)) for _ in range(4)] + [("committed", rng.randint(1, 3))]
    rng.shuffle(points)
    for event, k in points:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.actors.storage_worker", str(root), "0", "payload"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            buf = bytearray()
            with trio.fail_after(WAIT):
                while True:
                    line = await next_line(proc.stdout, buf)
                    committed_ever = committed_ever or line.startswith("committed")
                    if line == f"{event} {k}":
                        break
            proc.send_signal(signal.SIGKILL)
        finally:
            with trio.fail_after(WAIT):
                if proc.returncode is None:
                    proc.kill()
                await proc.wait()
                if proc.stdout is not None:
                    await proc.stdout.aclose()
        assert proc.returncode == -signal.SIGKILL
        if committed_ever:
            assert target.exists(), f"killed at {event} {k}: the committed payload vanished"
        torn_tmp += len(leftovers(root))
        if target.exists():
            assert check_payload(target.read_bytes()), f"killed at {event} {k}: torn payload on disk"
    # the workspace lock died with the process: a new writer gets through at once
    with trio.fail_after(WAIT):
        done = await trio.run_process([sys.executable, "-m", "tests.actors.storage_worker", str(root), "1"],
                                      cwd=REPO, capture_stdout=True)
    assert done.stdout == b"done\n"
    print(f"kill points {points}: {torn_tmp} interrupted temp files seen")


async def test_a_volatile_write_commits_atomically_with_the_durable_ones(tmp_path: Path) -> None:
    storage = StorageActor(tmp_path)

    def both(tx: Tx) -> None:
        tx.write("index/.journal", b"1", durable=False)
        tx.write("index/data.md", b"payload")

    await trio.to_thread.run_sync(storage.transact_blocking, both)
    assert (tmp_path / "index" / ".journal").read_bytes() == b"1"
    assert (tmp_path / "index" / "data.md").read_bytes() == b"payload"
    assert not [p for p in (tmp_path / "index").iterdir() if p.name.endswith(".tmp")]


# ---------------------------------------------------------------------- group commit


class Held:
    """A first transaction that holds the actor (in its worker thread) until released, so that
    the next ones queue up behind it and are taken as one group."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, tx: Tx) -> None:
        self.started.set()
        self.release.wait(WAIT)
        tx.write("counter", b"0")

    async def behind(self, storage: StorageActor, fns: list[Callable[[Tx], Any]],
                     defers: frozenset[int] = frozenset()) -> list[Any]:
        """Run `fns` queued behind this transaction (those at the indices in `defers` sent with
        `defers=True`); their outcomes, in order."""
        results: list[Any] = [None] * len(fns)

        async def one(i: int, fn: Callable[[Tx], Any]) -> None:
            try:
                results[i] = await storage.transact(fn, defers=i in defers)
            except Exception as exc:
                results[i] = exc

        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(storage.transact, self)
                await trio.to_thread.run_sync(self.started.wait, WAIT)
                for i, fn in enumerate(fns):
                    nursery.start_soon(one, i, fn)
                await trio.testing.wait_all_tasks_blocked()
                self.release.set()
        return results


def increment(tx: Tx) -> int:
    value = int(tx.read("counter") or b"0") + 1
    tx.write("counter", str(value).encode())
    return value


@pytest.mark.parametrize("writes", [20, 100])
async def test_transactions_queued_behind_a_commit_are_committed_together_each_seeing_the_ones_before(
        storage: StorageActor, root: Path, writes: int) -> None:
    # 100: a burst within the dispatcher's default concurrency (128) waits for one round of fsyncs, not two.
    results = await Held().behind(storage, [increment] * writes)
    assert sorted(results) == list(range(1, writes + 1))
    assert (root / "counter").read_bytes() == str(writes).encode()
    assert storage.groups == 2 and storage.commits == writes + 1
    assert leftovers(root) == []


async def test_a_transaction_that_raises_fails_alone_and_the_rest_of_its_group_is_committed(
        storage: StorageActor, root: Path) -> None:
    def refuse(tx: Tx) -> None:
        tx.write("refused.txt", b"never")
        raise ValueError("refused")

    results = await Held().behind(storage, [increment, refuse, increment])  # queued in any order
    assert sorted([results[0], results[2]]) == [1, 2] and isinstance(results[1], ValueError)
    assert (root / "counter").read_bytes() == b"2" and not (root / "refused.txt").exists()


async def test_when_a_group_commit_fails_none_of_its_transactions_is_acknowledged_or_written(
        storage: StorageActor, root: Path) -> None:
    (root / "plain-file").write_bytes(b"not a directory")

    def impossible(tx: Tx) -> None:
        tx.write("plain-file/child.txt", b"cannot be staged")

    def fine(tx: Tx) -> None:
        tx.write("fine.txt", b"would be fine alone")

    results = await Held().behind(storage, [fine, impossible])
    assert all(isinstance(r, OSError) for r in results)
    assert not (root / "fine.txt").exists() and (root / "counter").read_bytes() == b"0"
    assert leftovers(root) == []
    assert await storage.transact(fine) is None  # the actor carries on


# ---------------------------------------------------------------------- deferred work


class Appends:
    """Deferred work: the lines the group's transactions gave it, appended to `deferred` at once."""

    def __init__(self, root: Path, fail: bool = False) -> None:
        self.root, self.fail = root, fail
        self.lines: list[bytes] = []

    def apply(self) -> None:
        if self.fail:
            raise OSError(28, "No space left on device")
        path = self.root / "deferred"
        atomic_write(path, (path.read_bytes() if path.exists() else b"") + b"".join(self.lines))
        APPLIED.append(len(self.lines))


APPLIED: list[int] = []  # how many lines each `Appends.apply` wrote


def appends(line: bytes, fail: bool = False) -> Callable[[Tx], bytes]:
    def fn(tx: Tx) -> bytes:
        tx.defer("append", lambda: Appends(tx.root, fail)).lines.append(line)
        return line
    return fn


def reads_deferred(tx: Tx) -> bytes:
    return tx.read("deferred") or b""


async def test_work_deferred_by_a_group_is_done_once_before_a_transaction_that_defers_nothing_reads(
        storage: StorageActor, root: Path) -> None:
    APPLIED.clear()
    fns = [appends(b"a\n"), appends(b"b\n"), reads_deferred, appends(b"c\n")]
    results = await Held().behind(storage, fns, defers=frozenset({0, 1, 3}))
    done = (root / "deferred").read_bytes()
    assert sorted(done.splitlines()) == [b"a", b"b", b"c"] and results[:2] + results[3:] == [b"a\n", b"b\n", b"c\n"]
    # The reader ran after the work deferred before it was done, whatever order the three queued in.
    assert done.startswith(results[2]) and sum(APPLIED) == 3 and len(APPLIED) <= 2
    assert storage.groups == 2


async def test_deferred_work_that_fails_fails_the_transactions_that_deferred_it_and_no_other(
        storage: StorageActor, root: Path) -> None:
    fns = [appends(b"x\n", fail=True), increment, appends(b"y\n", fail=True)]
    results = await Held().behind(storage, fns, defers=frozenset({0, 2}))
    assert isinstance(results[0], OSError) and isinstance(results[2], OSError) and results[1] == 1
    assert (root / "counter").read_bytes() == b"1" and not (root / "deferred").exists()
    assert await storage.transact(appends(b"z\n"), defers=True) == b"z\n"  # the actor carries on
    assert (root / "deferred").read_bytes() == b"z\n"


async def test_a_transaction_not_sent_to_defer_cannot(storage: StorageActor) -> None:
    with pytest.raises(RuntimeError, match="defers=True"), trio.fail_after(10):
        await storage.transact(appends(b"never"))


# ---------------------------------------------------------------------- the change feed


def drained(sub: Subscription) -> list[Change]:
    out = []
    while True:
        try:
            out.append(sub.receive_nowait())
        except trio.WouldBlock:
            return out


async def test_a_group_commit_publishes_one_change_per_transaction_that_wrote_in_commit_order(
        storage: StorageActor, root: Path) -> None:
    storage.feed = ChangeFeed()
    sub = storage.feed.subscribe("test")

    def refuse(tx: Tx) -> None:
        tx.write("refused.txt", b"never")
        raise ValueError("refused")

    def reads_only(tx: Tx) -> None:
        tx.read("counter")

    def moves(tx: Tx) -> None:
        tx.delete("counter")
        tx.changed(written=["openspec/changes/archive/x/a.md"], removed=["openspec/changes/x/a.md"])

    results = await Held().behind(storage, [increment, refuse, reads_only, increment])
    changes = drained(sub)
    assert [c.written for c in changes] == [("counter",)] * 3  # the held one, then the two increments
    assert [c.seq for c in changes] == sorted(c.seq for c in changes) and isinstance(results[1], ValueError)
    assert all((c.workspace, c.toolset, c.kind, c.removed) == (str(root), "", "other", ()) for c in changes)
    await storage.transact(moves, toolset="openspec", kind="change")
    (moved,) = drained(sub)
    assert (moved.toolset, moved.kind) == ("openspec", "change")
    assert moved.written == ("openspec/changes/archive/x/a.md",)
    assert moved.removed == ("counter", "openspec/changes/x/a.md")


async def test_a_change_is_on_the_feed_before_its_writer_is_answered(storage: StorageActor) -> None:
    storage.feed = ChangeFeed()
    sub = storage.feed.subscribe("test")
    with trio.fail_after(10):
        await storage.transact(lambda tx: tx.write("openspec/changes/a/tasks.md", b"- [x] 1"), toolset="openspec")
    (change,) = drained(sub)
    assert (change.kind, change.written) == ("task", ("openspec/changes/a/tasks.md",))  # kind_of decides


async def test_a_failed_group_commit_publishes_nothing(storage: StorageActor, root: Path) -> None:
    storage.feed = ChangeFeed()
    sub = storage.feed.subscribe("test")
    (root / "plain-file").write_bytes(b"not a directory")
    with pytest.raises(OSError), trio.fail_after(10):
        await storage.transact(lambda tx: tx.write("plain-file/child.txt", b"cannot be staged"))
    assert drained(sub) == []


# ---------------------------------------------------------------------- what a killed writer left


def _aged(path: Path, data: bytes, seconds: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    then = path.stat().st_mtime - seconds
    os.utime(path, (then, then))
    return path


async def test_the_first_write_removes_temp_files_a_killed_writer_left_but_nothing_else(
        storage: StorageActor, root: Path) -> None:
    stale = [_aged(root / ".airsspec" / "specs" / "1-a" / ".spec.md.k3j_x9q2.tmp", b"torn", 120),
             _aged(root / "openspec" / "changes" / "c" / ".tasks.md.abcd1234.tmp", b"torn", 120)]
    young = _aged(root / ".airsspec" / ".journal.zzzz9999.tmp", b"being written", 1)
    theirs = [_aged(root / ".airsspec" / "notes.tmp", b"not ours", 120),  # not stage's name
              _aged(root / "src" / ".main.py.abcd1234.tmp", b"outside what we write", 120)]
    with trio.fail_after(10):
        await storage.write("specs/x.md", b"x")
    assert not any(p.exists() for p in stale)
    assert young.exists() and all(p.exists() for p in theirs)


def test_a_staged_file_has_the_name_the_sweep_looks_for_and_the_mode_of_its_target(root: Path) -> None:
    target = root / "spec.md"
    target.write_bytes(b"old")
    os.chmod(target, 0o600)
    staged = [storage_module.stage(target, b"new", sync=False) for _ in range(3)]
    assert len(set(staged)) == 3
    assert all(files_module._TEMP_NAME.match(p.name) for p in staged)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in staged)
