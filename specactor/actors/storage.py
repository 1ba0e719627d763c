"""The storage actor: it owns every write to the workspace.

Each write is atomic (temp file in the same directory, fsync, rename, fsync of the
directory) and happens under an advisory lock on `<root>/.specactor/workspace.lock`, so two
specactor processes on one workspace serialise their read-modify-write transactions and never
lose an update. Paths are checked first: nothing outside the root is read or written, and a
symlink that leads out of it is refused.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import outcome
import trio

from specactor.actors.mailbox import Mailbox
from specactor.logsetup import get_logger

T = TypeVar("T")
log = get_logger("specactor.storage")

LOCK_WAIT = 10.0  # seconds to wait for another process's transaction before giving up


class PathEscape(ValueError):
    """A path that is absolute, climbs out with `..`, holds a NUL or backslash, or leaves via a symlink."""


class LockBusy(RuntimeError):
    pass


def normal_relative(rel: str) -> str:
    """Check the spelling of a workspace-relative path and normalise it ("./a//b" -> "a/b", "." for
    the root itself); raise PathEscape naming the problem. Plain string work: this runs for every
    file a transaction touches, so it avoids pathlib's parsing."""
    if not rel or "\x00" in rel:
        raise PathEscape(f"invalid path {rel!r}: empty or contains NUL")
    if "\\" in rel:
        raise PathEscape(f"invalid path {rel!r}: backslashes are not allowed")
    if rel[0] == "/":
        raise PathEscape(f"invalid path {rel!r}: must be relative to the workspace")
    parts = [part for part in rel.split("/") if part and part != "."]
    if ".." in parts:
        raise PathEscape(f"invalid path {rel!r}: '..' segments are not allowed")
    return "/".join(parts) or "."


def safe_relative(rel: str) -> PurePosixPath:
    """`normal_relative` as a PurePosixPath."""
    return PurePosixPath(normal_relative(rel))


@functools.lru_cache(maxsize=64)
def _real_root(root: str) -> str:
    """The workspace root with its symlinks resolved, ending in "/". Cached: a root re-pointed
    while we run can only make later paths look outside it (refused), never let one escape."""
    return os.path.join(os.path.realpath(root), "")


def _leads_out(real_root: str, norm: str) -> bool:
    """Whether `norm` under `real_root` (symlinks resolved, ending in "/") reaches outside it
    through a symlink. Walks only the relative part, one lstat per component, and stops at the
    first component that does not exist: nothing below it can be a link."""
    path = real_root[:-1]
    for part in norm.split("/"):
        path = f"{path}/{part}"
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return False
        if stat.S_ISLNK(mode):
            path = os.path.realpath(path)
            if path + "/" != real_root and not path.startswith(real_root):
                return True
    return False


def resolve_inside(root: Path, rel: str) -> Path:
    """`root/rel`, refusing anything that escapes `root`, through symlinks too."""
    norm = normal_relative(rel)
    if norm == ".":
        return root
    if _leads_out(_real_root(os.fspath(root)), norm):
        raise PathEscape(f"invalid path {rel!r}: leads outside the workspace")
    return root / norm


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()  # read once, at import: os.umask cannot be read without setting it


def stage(path: Path, data: bytes, *, sync: bool = True) -> Path:
    """Write `data` to a temp file beside `path` (synced unless `sync` is False), with the mode
    `path` has (or would get)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except FileNotFoundError:  # the directory is new: make it (and its parents) once, not every time
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mode != 0o600:  # mkstemp makes 0600; keep the file's own mode
                os.fchmod(fd, mode)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _unlink(Path(tmp))
        raise
    return Path(tmp)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


# What `stage` names its temp files: ".<target name>.<8 random characters>.tmp" (tempfile.mkstemp).
_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
SWEPT_DIRS = (".airsspec", "openspec", ".specactor")  # where specactor writes inside a workspace
STALE_AFTER_S = 60.0  # far longer than any write takes between staging and its rename


def sweep_stale_temps(root: Path, now: float | None = None) -> list[Path]:
    """Remove temp files a killed writer left behind (`stage`'s names, untouched for a minute) under
    the directories specactor writes in; the files removed. A live writer's temp file is younger."""
    now = time.time() if now is None else now
    removed: list[Path] = []
    for top in SWEPT_DIRS:
        for directory, _, files in os.walk(root / top):
            for name in files:
                if not _TEMP_NAME.match(name):
                    continue
                path = Path(directory, name)
                try:
                    if now - path.lstat().st_mtime > STALE_AFTER_S:
                        path.unlink()
                        removed.append(path)
                except FileNotFoundError:
                    pass
    return removed


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so a reader or a crash sees the old bytes or the new, never half."""
    commit([(path, data)], [])


_sync_pool: ThreadPoolExecutor | None = None
_sync_pool_lock = threading.Lock()


def _fsync_paths(paths: list[Path]) -> None:
    """fsync files or directories by path, all at once: fsyncs that reach ext4 together share one
    journal commit, so two files cost about one (the caller's thread takes the first). Raises the
    first failure after every fsync has ended."""
    global _sync_pool
    if not paths:
        return
    futures = []
    if len(paths) > 1:
        with _sync_pool_lock:
            if _sync_pool is None:
                _sync_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="specactor-fsync")
        futures = [_sync_pool.submit(_fsync_path, p) for p in paths[1:]]
    failure: BaseException | None = None
    try:
        _fsync_path(paths[0])
    except BaseException as err:
        failure = err
    for future in futures:
        failure = failure or future.exception()
    if failure is not None:
        raise failure


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _missing_parents(paths: Iterable[Path]) -> set[Path]:
    """The directories that writing `paths` will create (each path's parents up to the first that exists)."""
    missing: set[Path] = set()
    present: set[Path] = set()
    for path in paths:
        for parent in path.parents:
            if parent in present or parent in missing:
                break
            if parent.exists():
                present.add(parent)
                break
            missing.add(parent)
    return missing


def commit(writes: list[tuple[Path, bytes]], deletes: list[Path], volatile: frozenset[Path] = frozenset()) -> None:
    """Apply a transaction: stage every file first, then rename them all into place.

    A failure while staging (a full disk, a parent that is a file) leaves every target as it
    was; only the renames, each atomic, come after. Every staged file is fsynced (all at once)
    before the first rename, and directories are fsynced after so the renames last. Files in
    `volatile` are renamed atomically but their contents are not fsynced: caches and indexes a
    reader can rebuild, whose loss in a power cut costs a rescan, not data.
    """
    new_dirs = _missing_parents(path for path, _ in writes)
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in writes:
            staged.append((stage(path, data, sync=False), path))
        _fsync_paths([tmp for tmp, path in staged if path not in volatile])
    except BaseException:
        for tmp, _ in staged:
            _unlink(tmp)
        raise
    touched: set[Path] = set()
    for tmp, path in staged:
        os.replace(tmp, path)
        if path not in volatile:  # a volatile file's rename need not outlive a power cut either
            touched.add(path.parent)
    for path in deletes:
        try:
            path.unlink()
            touched.add(path.parent)
        except FileNotFoundError:
            pass
    _fsync_paths([d for d in touched | {d.parent for d in new_dirs} if d.exists()])


@dataclass
class Tx:
    """A transaction's view of the workspace: reads see its own staged writes."""

    root: Path
    writes: dict[str, bytes | None] = field(default_factory=dict)
    volatile: set[str] = field(default_factory=set)
    paths: dict[str, Path] = field(default_factory=dict)  # checked targets of `writes`, resolved once
    base: Tx | None = None  # the earlier transactions of a group commit, not yet on disk

    def read(self, rel: str) -> bytes | None:
        key = normal_relative(rel)  # "./a" and "d//a" are the same files as "a" and "d/a"
        if key in self.writes:
            return self.writes[key]
        if self.base is not None and key in self.base.writes:
            return self.base.writes[key]
        path = resolve_inside(self.root, key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def write(self, rel: str, data: bytes, *, durable: bool = True) -> None:
        """Stage `data` for `rel`. `durable=False` skips the contents' fsync (still atomic): for
        caches and indexes that a reader can rebuild."""
        key = normal_relative(rel)
        self.paths[key] = resolve_inside(self.root, key)
        self.writes.pop(key, None)  # the last operation on a path is the one that counts
        self.writes[key] = data
        if durable:
            self.volatile.discard(key)
        else:
            self.volatile.add(key)

    def delete(self, rel: str) -> None:
        key = normal_relative(rel)
        self.paths[key] = resolve_inside(self.root, key)
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


@dataclass(frozen=True)
class Transact:
    fn: Callable[[Tx], Any]


# A group commit takes at most the mailbox's worth of transactions: what queued up while the
# previous group was committing.
GROUP_MAX = 64


class StorageActor:
    """Args:
        root: the workspace root.
        lock_path: the inter-process lock file (default `<root>/.specactor/workspace.lock`).
    """

    def __init__(self, root: Path, *, lock_path: Path | None = None) -> None:
        self.root = root
        self.lock_path = lock_path or root / ".specactor" / "workspace.lock"
        # Writers wait for their answer, so the queue holds at most one letter per in-flight
        # request; 64 lets a burst queue up without the callers blocking on the send itself.
        self.mailbox: Mailbox[Transact] = Mailbox("storage", 64)
        self.commits = 0  # transactions committed
        self.groups = 0  # group commits (each one round of fsyncs)
        self._swept = False

    # ------------------------------------------------------------------ client API

    async def transact(self, fn: Callable[[Tx], T], timeout: float = 30.0) -> T:
        """Run `fn(tx)` under the workspace lock on a worker thread, then commit its writes atomically."""
        result: T = await self.mailbox.call(Transact(fn), timeout)
        return result

    async def write(self, rel: str, data: bytes, timeout: float = 30.0) -> None:
        await self.transact(lambda tx: tx.write(rel, data), timeout)

    async def read(self, rel: str) -> bytes | None:
        """Reads need no lock (writes are atomic renames) and run concurrently on worker threads."""
        path = resolve_inside(self.root, rel)

        def read() -> bytes | None:
            try:
                return path.read_bytes()
            except FileNotFoundError:
                return None

        return await trio.to_thread.run_sync(read)

    # ------------------------------------------------------------------ the actor

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for letter in self.mailbox:
            group = [letter]  # and whatever queued up while the last group committed
            while len(group) < GROUP_MAX:
                try:
                    group.append(self.mailbox.receive_nowait())
                except trio.WouldBlock:
                    break
            with contextlib.ExitStack() as answered:
                for one in group:
                    answered.enter_context(one)
                try:
                    # Never abandoned on cancel: a commit in progress finishes.
                    results = await trio.to_thread.run_sync(self._run_group, [one.body.fn for one in group])
                except Exception as exc:  # the workspace lock could not be had: nothing ran
                    results = [outcome.Error(exc)] * len(group)
                for one, result in zip(group, results, strict=True):
                    one.answer(result)

    def transact_blocking(self, fn: Callable[[Tx], T]) -> T:
        """`transact` for code already on a worker thread (or a storage rooted elsewhere that no
        actor task serves): the same lock, the same atomic commit, in the calling thread."""
        result: T = self._run_tx(fn)
        return result

    def _run_tx(self, fn: Callable[[Tx], Any]) -> Any:
        return self._run_group([fn])[0].unwrap()

    def _run_group(self, fns: list[Callable[[Tx], Any]]) -> list[outcome.Outcome[Any]]:
        """Group commit: run queued transactions one after another under one lock, each reading
        the workspace as the ones before it left it, then commit what they wrote in one go (one
        round of fsyncs for the lot). A transaction that raises is left out and fails alone; if
        the commit fails, every one of them fails and none is acknowledged."""
        with self._locked():
            if not self._swept:  # once, with the first write: what a killed writer left behind
                self._swept = True
                stale = sweep_stale_temps(self.root)
                if stale:
                    log.warning("removed temp files a killed writer left behind", count=len(stale),
                                first=str(stale[0]))
            group = Tx(self.root)
            results: list[outcome.Outcome[Any]] = []
            for fn in fns:
                tx = Tx(self.root, base=group)
                try:
                    value = fn(tx)
                except Exception as exc:
                    results.append(outcome.Error(exc))
                    continue
                group.absorb(tx)
                results.append(outcome.Value(value))
            try:
                group.commit()
            except Exception as exc:
                return [outcome.Error(exc) if isinstance(r, outcome.Value) else r for r in results]
            self.commits += sum(isinstance(r, outcome.Value) for r in results)
            self.groups += 1
            return results

    def _locked(self) -> _FileLock:
        return _FileLock(self.lock_path)


class _FileLock:
    """An exclusive `flock`, polled so a stuck peer yields LockBusy instead of a hang."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> _FileLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + LOCK_WAIT
        delay = 0.0005
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(self.fd)
                    raise
            if time.monotonic() > deadline:
                os.close(self.fd)
                raise LockBusy(f"the workspace is locked by another process ({self.path})")
            time.sleep(delay)  # on a worker thread, never the event loop
            delay = min(delay * 2, 0.02)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
