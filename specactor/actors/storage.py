"""The storage actor: it owns every write to the workspace.

Each write is atomic (temp file in the same directory, swapped into place: `fs/files.py`)
and durable before it is acknowledged: logged in the write-ahead log (`fs/wal.py`, one
fdatasync) or, where there is none, fsynced with its directories. It happens under an advisory
lock on `<root>/.specactor/workspace.lock`, so two specactor processes on one workspace
serialise their read-modify-write transactions and never lose an update. Paths are checked
first: nothing outside the root is read or written, and a symlink that leads out of it is
refused (reads walk each path through `fs/confined.py`).

Each committed transaction that wrote something is published on the change feed, once, from
the event loop, after its commit and before its caller is answered: the paths it wrote and
removed (relative to the root), its toolset, its kind. In a group commit each transaction is
one event, in commit order. An archive's files moved outside the commit (`Tx.changed`) are
published with its transaction.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec
import outcome
import trio

from specactor.actors.change_feed import ChangeFeed
from specactor.actors.mailbox import Mailbox
from specactor.domain.changes import Change, Kind, kind_of
from specactor.fs import wal
from specactor.fs.confined import Confined, read_confined
from specactor.fs.files import (
    PathEscape,
    atomic_write,
    commit,
    fsync_dir,
    fsync_present,
    install,
    normal_relative,
    resolve_inside,
    safe_relative,
    stage,
    sweep_stale_temps,
    unlink_quietly,
)
from specactor.logsetup import get_logger

T = TypeVar("T")
log = get_logger("specactor.storage")

__all__ = ["LockBusy", "PathEscape", "StorageActor", "Tx", "atomic_write", "commit", "fsync_dir", "install",
           "normal_relative", "resolve_inside", "safe_relative", "stage", "sweep_stale_temps"]

LOCK_WAIT = 10.0  # seconds to wait for another process's transaction before giving up


class LockBusy(RuntimeError):
    pass


@functools.cache
def current_boot() -> str | None:
    """This boot's id (tests replace this to play a reboot)."""
    return wal.boot_id()


class Tx(msgspec.Struct):
    """A transaction's view of the workspace: reads see its own staged writes."""

    root: Path
    writes: dict[str, bytes | None] = msgspec.field(default_factory=dict)
    volatile: set[str] = msgspec.field(default_factory=set)
    paths: dict[str, Path] = msgspec.field(default_factory=dict)  # checked targets of `writes`, resolved once
    seen: dict[str, Path] = msgspec.field(default_factory=dict)  # checked paths this transaction read
    dirs: set[str] = msgspec.field(default_factory=set)  # directories found not to be symlinks
    base: Tx | None = None  # the earlier transactions of a group commit, not yet on disk
    settle_hook: Callable[[], None] | None = None
    files: Confined | None = None  # reads go through it (one per transaction: it keeps folders open)
    outside: tuple[list[str], list[str]] = msgspec.field(default_factory=lambda: ([], []))  # see `changed`
    batch: _Batch | None = None  # the group's deferred work (`defer`)
    deferring: bool = False  # this transaction deferred work: it is answered once that is done

    def defer(self, key: str, make: Callable[[], D]) -> D:
        """The group's deferred work under `key` (made by `make` the first time); the caller adds
        its part to it. The group does it once for every transaction that added to it: after the
        log's checkpoint, before any transaction that defers nothing runs, and before the group
        commits. This transaction is answered only once it is done; if it fails, so does this one.
        Only transactions sent with `defers=True` may call it: they read the disk as it was before
        the deferred work, and must `flush` before reading what it changes."""
        if self.batch is None:
            raise RuntimeError("this transaction was not sent with defers=True")
        work = self.batch.work.get(key)
        if work is None:
            work = self.batch.work[key] = make()
        self.deferring = True
        return work  # type: ignore[return-value]

    def deferred(self, key: str) -> Deferred | None:
        """The group's deferred work under `key`, if any is waiting."""
        return self.batch.work.get(key) if self.batch is not None else None

    def flush(self) -> None:
        """Do the group's deferred work now (this transaction is about to read what it changes)."""
        if self.batch is not None:
            self.batch.flush()

    def settle(self) -> None:
        """Make every write acknowledged so far durable on disk (the write-ahead log's
        checkpoint), for a transaction about to change files around the storage: moving a
        directory. Not this transaction's own writes, nor its group's: they commit after it."""
        if self.settle_hook is not None:
            self.settle_hook()

    def changed(self, written: Iterable[str] = (), removed: Iterable[str] = ()) -> None:
        """Paths this transaction changed on disk itself, outside its staged writes (an archive
        moves a folder): published on the change feed with its writes."""
        self.outside[0].extend(written)
        self.outside[1].extend(removed)

    def published(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The paths written and removed, for the change feed: staged writes, then `changed`."""
        written = [rel for rel, data in self.writes.items() if data is not None]
        removed = [rel for rel, data in self.writes.items() if data is None]
        return (*dict.fromkeys([*written, *self.outside[0]]),), (*dict.fromkeys([*removed, *self.outside[1]]),)

    def read(self, rel: str) -> bytes | None:
        key = normal_relative(rel)  # "./a" and "d//a" are the same files as "a" and "d/a"
        if key in self.writes:
            return self.writes[key]
        if self.base is not None and key in self.base.writes:
            return self.base.writes[key]
        if self.files is None:
            return read_confined(self.root, key)
        return self.files.read(key)

    def _resolve(self, key: str) -> Path:
        """`resolve_inside` once per path and transaction (a read-modify-write checks it once)."""
        path = self.seen.get(key)  # every path in `paths` was resolved here first
        if path is None:
            path = self.seen[key] = resolve_inside(self.root, key, self.dirs)
        return path

    def write(self, rel: str, data: bytes, *, durable: bool = True) -> None:
        """Stage `data` for `rel`. `durable=False` skips the contents' fsync (still atomic): for
        caches and indexes that a reader can rebuild."""
        key = normal_relative(rel)
        self.paths[key] = self._resolve(key)
        self.writes.pop(key, None)  # the last operation on a path is the one that counts
        self.writes[key] = data
        if durable:
            self.volatile.discard(key)
        else:
            self.volatile.add(key)

    def delete(self, rel: str) -> None:
        key = normal_relative(rel)
        self.paths[key] = self._resolve(key)
        self.writes.pop(key, None)
        self.writes[key] = None

    def absorb(self, other: Tx) -> None:
        """Take `other`'s writes as if they had been made here, after this one's own."""
        for key, data in other.writes.items():
            self.writes.pop(key, None)
            self.writes[key] = data
            self.paths[key] = other.paths[key]
            if key in other.volatile:
                self.volatile.add(key)
            else:
                self.volatile.discard(key)

    def commit(self) -> None:
        """Apply the staged writes and deletes (`commit`)."""
        writes = [(self.paths[rel], data) for rel, data in self.writes.items() if data is not None]
        deletes = [self.paths[rel] for rel, data in self.writes.items() if data is None]
        commit(writes, deletes, frozenset(self.paths[rel] for rel in self.volatile))


class Deferred(Protocol):
    """Work transactions of a group hand to the group (`Tx.defer`): done once for all of them."""

    def apply(self) -> None:
        """Do it, durably (under the workspace lock, after the log's checkpoint)."""


D = TypeVar("D", bound=Deferred)


class _Batch:
    """A group commit's deferred work, and which transactions' answers wait on it."""

    def __init__(self, settle: Callable[[], None], results: list[outcome.Outcome[Any]]) -> None:
        self.settle = settle
        self.results = results
        self.work: dict[str, Deferred] = {}
        self.owners: list[int] = []  # indices in `results` of the transactions that deferred work

    def flush(self) -> None:
        """Do the waiting work (settling the log first: it may move files the log names). If it
        fails, every transaction that deferred part of it fails with the error, which is raised."""
        if not self.work:
            return
        work, owners = list(self.work.values()), self.owners
        self.work, self.owners = {}, []
        try:
            self.settle()
            for one in work:
                one.apply()
        except Exception as exc:
            for index in owners:
                self.results[index] = outcome.Error(exc)
            raise

    def flush_quietly(self) -> None:
        with contextlib.suppress(Exception):  # the transactions that deferred it carry the error
            self.flush()


class Transact(msgspec.Struct, frozen=True):
    fn: Callable[[Tx], Any]
    toolset: str = ""  # who writes, for the change feed
    kind: Kind | None = None  # the event's kind, when the writer knows better than `kind_of`
    defers: bool = False  # `fn` may defer work to its group (`Tx.defer`), and reads as the doc there says


class Committed(msgspec.Struct, frozen=True):
    """What a transaction did, for the change feed (`published` is empty when it wrote nothing)."""

    body: Transact
    written: tuple[str, ...]
    removed: tuple[str, ...]


# A group commit takes at most the mailbox's worth of transactions: what queued up while the
# previous group was committing. 128, the dispatcher's default `max_concurrency`: a burst of
# writes within the concurrency limit commits as one group, with one round of fsyncs, instead of
# two (64 + 36 for a burst of 100 at 64), and no second group is planned beside the first one's
# 64 replies. The median of a burst rises (every answer waits for the whole group); its P95
# falls: docs/decisions.md ("Durable writes") has the figures.
GROUP_MAX = 128


class StorageActor:
    """Args:
        root: the workspace root.
        lock_path: the inter-process lock file (default `<root>/.specactor/workspace.lock`).
        use_log: commit through the write-ahead log beside the lock file (`fs/wal.py`) where
            the kernel names its boot (Linux); else every commit fsyncs its files and directories.
        feed: where committed transactions are published (None: nowhere).
    """

    def __init__(self, root: Path, *, lock_path: Path | None = None, use_log: bool = True,
                 feed: ChangeFeed | None = None) -> None:
        self.root = root
        self.feed = feed
        self.lock_path = lock_path or root / ".specactor" / "workspace.lock"
        # Writers wait for their answer, so the queue holds at most one letter per in-flight
        # request; GROUP_MAX lets a burst queue up without the callers blocking on the send itself.
        self.mailbox: Mailbox[Transact] = Mailbox("storage", GROUP_MAX)
        self.commits = 0  # transactions committed
        self.groups = 0  # group commits (each one round of fsyncs)
        self._swept = False
        self.use_log = use_log
        self._wal: wal.WriteAheadLog | None = None
        self._running = False  # the actor loop runs (and checkpoints when idle)
        self._log_failed = False  # the log could not be opened: commits fsync instead
        self._settled_at = time.monotonic()

    # ------------------------------------------------------------------ client API

    async def transact(self, fn: Callable[[Tx], T], timeout: float = 30.0, *, toolset: str = "",
                       kind: Kind | None = None, defers: bool = False) -> T:
        """Run `fn(tx)` under the workspace lock on a worker thread, then commit its writes
        atomically and publish them on the change feed as `toolset`'s, of `kind` (default: as
        their paths say, `kind_of`). `defers`: `fn` may use `Tx.defer`."""
        result: T = await self.mailbox.call(Transact(fn, toolset, kind, defers), timeout)
        return result

    async def write(self, rel: str, data: bytes, timeout: float = 30.0) -> None:
        await self.transact(lambda tx: tx.write(rel, data), timeout)

    async def read(self, rel: str) -> bytes | None:
        """Reads need no lock (writes are atomic renames) and run concurrently on worker threads."""
        return await trio.to_thread.run_sync(read_confined, self.root, normal_relative(rel))

    # ------------------------------------------------------------------ the actor

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        self._running = True
        try:
            if self._log_exists():  # a crash may have left records to restore: before any write
                await self._checkpoint_in_thread()
            while True:
                idle = self._wal is not None and self._wal.count > 0
                with trio.move_on_after(wal.IDLE_CHECKPOINT_S if idle else math.inf) as waited:
                    try:
                        letter = await self.mailbox.receive()
                    except trio.EndOfChannel:
                        return
                if waited.cancelled_caught:  # quiet for a while: make the logged writes durable
                    await self._checkpoint_in_thread()
                    continue
                await self._serve([letter])
        finally:
            self._running = False
            if self._wal is not None and self._wal.count > 0:
                with trio.CancelScope(shield=True):  # stopping: leave the log empty
                    await self._checkpoint_in_thread()

    async def _serve(self, group: list[Any]) -> None:
        while len(group) < GROUP_MAX:  # and whatever queued up while the last group committed
            try:
                group.append(self.mailbox.receive_nowait())
            except trio.WouldBlock:
                break
        with contextlib.ExitStack() as answered:
            for one in group:
                answered.enter_context(one)
            committed: list[Committed] = []
            try:
                # Never abandoned on cancel: a commit in progress finishes.
                results = await trio.to_thread.run_sync(self._run_group, [one.body for one in group], committed)
            except Exception as exc:  # the workspace lock could not be had: nothing ran
                results = [outcome.Error(exc)] * len(group)
            self._publish(committed)  # before the answers: a caller answered finds its write on the feed
            for one, result in zip(group, results, strict=True):
                one.answer(result)

    def _publish(self, committed: list[Committed]) -> None:
        if self.feed is None:
            return
        workspace = str(self.root)
        for done in committed:
            paths = done.written + done.removed
            self.feed.publish(Change(workspace=workspace, toolset=done.body.toolset,
                                     kind=done.body.kind or kind_of(done.body.toolset, paths),
                                     written=done.written, removed=done.removed))

    async def _checkpoint_in_thread(self) -> None:
        try:
            await trio.to_thread.run_sync(self.checkpoint_blocking)
        except Exception as exc:  # the lock busy, a disk error: the log keeps the records
            log.warning("write-ahead log checkpoint failed", error=repr(exc))

    def transact_blocking(self, fn: Callable[[Tx], T]) -> T:
        """`transact` for code with no event loop (tools, tests): the same lock, the same atomic
        commit, in the calling thread, but published nowhere. Toolsets use `transact`."""
        result: T = self._run_tx(fn)
        return result

    def checkpoint_blocking(self) -> None:
        """Restore what a crash left in the write-ahead log, then make every logged write durable
        and empty the log (a no-op where there is no log)."""
        with self._locked():
            self._prepare()
            self._settle()

    def _run_tx(self, fn: Callable[[Tx], Any]) -> Any:
        return self._run_group([Transact(fn)], [])[0].unwrap()

    def _run_group(self, bodies: list[Transact], committed: list[Committed]) -> list[outcome.Outcome[Any]]:
        """Group commit: run queued transactions one after another under one lock, each reading
        the workspace as the ones before it left it, then commit what they wrote in one go (one
        log record, or one round of fsyncs, for the lot). A transaction that raises is left out
        and fails alone; if the commit fails, every one of them fails and none is acknowledged.
        Appends to `committed`, in commit order, what each transaction that wrote did (a failed
        commit keeps only what they changed outside it, which is on disk all the same)."""
        with self._locked():
            self._prepare()
            group = Tx(self.root)
            results: list[outcome.Outcome[Any]] = []
            batch = _Batch(self._settle, results)
            done: list[tuple[Transact, Tx]] = []
            for body in bodies:
                if not body.defers:
                    batch.flush_quietly()  # it reads the disk as the deferred work leaves it
                with Confined(self.root) as files:
                    tx = Tx(self.root, base=group, settle_hook=self._settle, files=files,
                            batch=batch if body.defers else None)
                    try:
                        value = body.fn(tx)
                    except Exception as exc:
                        results.append(outcome.Error(exc))
                        if tx.outside != ([], []):
                            done.append((body, Tx(self.root, outside=tx.outside)))
                        continue
                group.absorb(tx)
                if tx.deferring:
                    batch.owners.append(len(results))
                results.append(outcome.Value(value))
                done.append((body, tx))
            batch.flush_quietly()
            try:
                self._commit(group)
            except Exception as exc:
                committed += _committed([(body, Tx(self.root, outside=tx.outside)) for body, tx in done])
                return [outcome.Error(exc) if isinstance(r, outcome.Value) else r for r in results]
            self.commits += sum(isinstance(r, outcome.Value) for r in results)
            self.groups += 1
            committed += _committed(done)
            return results

    # ------------------------------------------------------------------ the write-ahead log

    def _log_exists(self) -> bool:
        return current_boot() is not None and (self.lock_path.parent / wal.WAL_NAME).exists()

    def _prepare(self) -> None:
        """Under the lock, before a transaction: sweep what a killed writer left (once), open the
        log (once; also without `use_log` when one exists, to settle what it holds), and
        restore the files of records other writers left that need it."""
        if not self._swept:
            self._swept = True
            stale = sweep_stale_temps(self.root)
            if stale:
                log.warning("removed temp files a killed writer left behind", count=len(stale),
                            first=str(stale[0]))
        if self._wal is None:
            boot = current_boot()
            if boot is None or self._log_failed or not (self.use_log or self._log_exists()):
                return
            opened = wal.WriteAheadLog(self.lock_path.parent, boot)
            try:
                opened.open()
            except OSError as err:  # no room for it, no permission: commit the fsync way
                self._log_failed = True
                log.warning("cannot open the write-ahead log; every commit fsyncs instead",
                            path=str(opened.path), error=str(err))
                return
            self._wal = opened
        found = [f for f in self._wal.catch_up() if f.state != wal.VOID]
        latest: dict[str, tuple[wal.Found, bytes | None]] = {}
        for one in found:  # in log order: the last record naming a path decides it
            for rel, data in one.record.writes:
                latest[rel] = (one, data)
        broken = {rel: pair for rel, pair in latest.items()
                  if pair[0].record.boot != self._wal.boot or not pair[0].applied}
        if broken:
            self._restore(broken)
            self._settle()

    def _restore(self, broken: dict[str, tuple[wal.Found, bytes | None]]) -> None:
        """Redo logged writes whose files a crash may have lost (see `wal.restorable`), each file
        on its own: one that cannot be written (its folder is now a file) is reported, not allowed
        to block every later write."""
        restored = 0
        for rel, (one, data) in broken.items():
            forward = one.record.boot == self._wal_boot() and not one.applied
            try:
                path = resolve_inside(self.root, rel)
                if not wal.restorable(one.record.time_ns, self.root, path, data, rolling_forward=forward):
                    continue
                commit([(path, data)] if data is not None else [], [path] if data is None else [])
                restored += 1
            except (PathEscape, OSError) as err:
                log.warning("could not restore a file from the write-ahead log", path=rel[:200], error=str(err))
        log.warning("restored files from the write-ahead log", paths=len(broken), files=restored)

    def _wal_boot(self) -> str:
        return self._wal.boot if self._wal is not None else ""

    def _settle(self) -> None:
        if self._wal is not None and self._wal.count > 0:
            self._wal.checkpoint(self.root, self._inside, _sync_or_report)
        self._settled_at = time.monotonic()

    def _inside(self, rel: str) -> Path | None:
        try:
            return resolve_inside(self.root, rel)
        except PathEscape:
            return None

    def _commit(self, group: Tx) -> None:
        """Commit the group's writes: through the log when there is one (one fdatasync, files
        installed without fsyncs), else `Tx.commit` (fsyncs). Volatile files are not logged."""
        journal = self._wal if self.use_log else None
        logged = [(rel, data) for rel, data in group.writes.items() if rel not in group.volatile]
        if journal is None or not logged:
            if not self.use_log:
                self._settle()  # a log left by others (or by this server before): its files first
            group.commit()
            return
        size = sum(len(rel.encode()) + len(data or b"") + 16 for rel, data in logged) + 64
        if size > journal.capacity():
            self._settle()  # too big for the log: the fsync way, after the log's records
            group.commit()
            return
        staged: list[tuple[Path, Path]] = []
        try:
            for rel, data in group.writes.items():
                if data is not None:
                    staged.append((stage(group.paths[rel], data, sync=False), group.paths[rel]))
            touched = [tmp for tmp, _ in staged] + [group.paths[rel] for rel, data in logged if data is None]
            try:
                offset = journal.append(logged, touched)
            except wal.LogFull:
                self._settle()
                offset = journal.append(logged, touched)
        except wal.LogFull:  # an estimate too low: the fsync way
            for tmp, _ in staged:
                unlink_quietly(tmp)
            group.commit()
            return
        except BaseException:
            for tmp, _ in staged:
                unlink_quietly(tmp)
            raise
        installed: list[Path] = []
        try:
            while staged:
                install(*staged[0])
                installed.append(staged.pop(0)[1])
            for rel, data in group.writes.items():
                if data is None:
                    unlink_quietly(group.paths[rel])
        except BaseException:
            # What went in stays (as a commit without the log would leave it): made durable here,
            # since a void record is never restored.
            _sync_or_report(installed)
            _sync_or_report(sorted({p.parent for p in installed}))
            journal.void(offset)
            for tmp, _ in staged:
                unlink_quietly(tmp)
            raise
        journal.mark_applied(offset)
        if not self._running and time.monotonic() - self._settled_at >= wal.IDLE_CHECKPOINT_S:
            self._settle()  # no actor loop checkpoints for this one when idle: do it as it goes

    def _locked(self) -> _FileLock:
        return _FileLock(self.lock_path)


def _committed(done: list[tuple[Transact, Tx]]) -> list[Committed]:
    """The feed's view of transactions that ran: those that changed something."""
    out = []
    for body, tx in done:
        written, removed = tx.published()
        if written or removed:
            out.append(Committed(body, written, removed))
    return out


def _sync_or_report(paths: list[Path]) -> None:
    """fsync each path that still exists; one that cannot be synced (EIO, EACCES, a mount point)
    is reported and passed over, so it cannot stop every checkpoint after it."""
    try:
        fsync_present(paths)
    except OSError:
        for path in paths:
            try:
                fsync_present([path])
            except OSError as err:
                log.warning("could not fsync a file the write-ahead log names", path=str(path), error=str(err))


class _FileLock:
    """An exclusive `flock`. Free: taken at once. Held by another process: waited for in the
    kernel, which wakes the waiter the moment the holder lets go, on a helper thread
    (`_LockWaiter`), so that a stuck peer yields LockBusy after LOCK_WAIT instead of a hang.

    Polling with a growing sleep (as before) woke a waiter 10 ms after the release on average
    (15.6 at most) with two HTTP workers archiving 100 changes at once: their groups take turns,
    and each turn paid that lag (docs/decisions.md)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> _FileLock:
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:  # the first write to this workspace: make its .specactor folder
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return self
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(self.fd)
                raise
        if not _LockWaiter(self.fd).wait(LOCK_WAIT):  # the waiter owns the descriptor now
            raise LockBusy(f"the workspace is locked by another process ({self.path})")
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


class _LockWaiter:
    """A blocking `flock` on a daemon thread of its own, waited for with a timeout.

    `wait` returns True once the lock is held on `fd`, and raises what the flock raised (the
    descriptor closed). On a timeout it returns False and the descriptor is the thread's from then
    on: should the lock still come, the thread lets it go at once; either way it closes the
    descriptor. A waiter thus never holds the lock for a caller that has given up, and never
    leaks the descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.mutex = threading.Lock()
        self.settled = threading.Event()
        self.held = False
        self.abandoned = False
        self.error: OSError | None = None

    def wait(self, timeout: float) -> bool:
        try:
            threading.Thread(target=self._block, name="specactor-lock-wait", daemon=True).start()
        except BaseException:  # no thread to be had (RuntimeError): the descriptor is still ours
            os.close(self.fd)
            raise
        self.settled.wait(timeout)
        with self.mutex:
            if self.error is not None:
                os.close(self.fd)
                raise self.error
            self.abandoned = not self.held
            return self.held

    def _block(self) -> None:
        error: OSError | None = None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)  # in the kernel, without the GIL
        except OSError as err:
            error = err
        with self.mutex:
            if not self.abandoned:  # the caller still waits: the outcome, and the descriptor, are its
                self.error, self.held = error, error is None
                self.settled.set()
                return
        if error is None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)  # the caller gave up waiting: let the next one in
        os.close(self.fd)
