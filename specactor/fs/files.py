"""Atomic file operations inside a workspace: the storage actor's primitives.

Paths are checked first (nothing outside the root, no symlink leading out of it; reads walk them
with `fs/confined.py`); a file is
replaced by staging a temp file beside it and installing that in one step, so a reader sees the
old bytes or the new, never half. `commit` applies a transaction's files with fsyncs; the storage
actor (`actors/storage.py`) runs it, or logs the files (`fs/wal.py`) and installs them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import itertools
import os
import re
import stat
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any


class PathEscape(ValueError):
    """A path that is absolute, climbs out with `..`, holds a NUL or backslash, or leaves via a symlink."""


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


def _leads_out(real_root: str, norm: str, verified: set[str] | None = None) -> str | None:
    """The symlink (relative to the root) through which `norm` under `real_root` (symlinks
    resolved, ending in "/") reaches outside it; None when it stays inside. Walks only the
    relative part, one lstat per component, and stops at the first component that does not
    exist: nothing below it can be a link. Directories found to be real ones are added to
    `verified`, and not looked at again when it is passed back (one transaction reads and writes
    several files of one directory)."""
    path = real_root[:-1]
    parts = norm.split("/")
    for i, part in enumerate(parts):
        path = f"{path}/{part}"
        if verified is not None and path in verified:
            continue
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(mode):
            path = os.path.realpath(path)
            if path + "/" != real_root and not path.startswith(real_root):
                return "/".join(parts[:i + 1])
        elif verified is not None and stat.S_ISDIR(mode):
            verified.add(path)
    return None


def resolve_inside(root: Path, rel: str, verified: set[str] | None = None) -> Path:
    """`root/rel`, refusing anything that escapes `root`, through symlinks too (`verified`: see
    `_leads_out`)."""
    norm = normal_relative(rel)
    if norm == ".":
        return root
    link = _leads_out(_real_root(os.fspath(root)), norm, verified)
    if link is not None:
        raise PathEscape(f"invalid path {rel!r}: the symlink '{link}' leads outside the workspace")
    return root / norm


def read_file(path: Path) -> bytes | None:
    """The bytes of the file at `path`, None when there is none. Four system calls where
    `Path.read_bytes` makes nine (buffering, a tty check, two seeks)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


def read_fd(fd: int) -> bytes:
    """Everything left to read from the open file `fd` (sized by one fstat)."""
    size = os.fstat(fd).st_size
    chunks = [os.read(fd, size + 1)]
    while chunks[-1] and (len(chunks) > 1 or len(chunks[0]) > size):  # grew meanwhile: read on
        chunks.append(os.read(fd, 1 << 20))
    return b"".join(chunks)


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


_TEMP_TAG = os.urandom(2).hex()  # this process's part of its temp files' names (not `secrets`: 5 ms of imports)
_temp_serial = itertools.count()
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_temp(path: Path, mode: int) -> tuple[int, str]:
    """A new file beside `path` named ".<name>.<8 characters>.tmp" (what `sweep_stale_temps`
    looks for), created with `mode` less the umask. Cheaper than `tempfile.mkstemp`: a process
    tag and a counter, no random name per file."""
    for _ in range(1000):
        tmp = f"{path.parent}/.{path.name}.{_TEMP_TAG}{next(_temp_serial) & 0xFFFF:04x}.tmp"
        try:
            return os.open(tmp, _TEMP_FLAGS, mode), tmp
        except FileExistsError:  # another process drew the same tag, or one left this behind
            continue
    raise FileExistsError(f"no free temp file name beside {path}")


def stage(path: Path, data: bytes, *, sync: bool = True) -> Path:
    """Write `data` to a temp file beside `path` (synced unless `sync` is False), with the mode
    `path` has (or would get)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    try:
        fd, tmp = _open_temp(path, mode)
    except FileNotFoundError:  # the directory is new: make it (and its parents) once, not every time
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _open_temp(path, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mode & _UMASK:  # bits the umask took off at creation: keep the file's own mode
                os.fchmod(fd, mode)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        unlink_quietly(Path(tmp))
        raise
    return Path(tmp)


def unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _renameat2() -> Any:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # not Linux, or a libc without it
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_exchange = _renameat2()
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def install(tmp: Path, path: Path) -> None:
    """Move the staged `tmp` to `path` atomically: a reader sees the old file or the new one.

    Over an existing regular file the two are swapped (`renameat2(RENAME_EXCHANGE)`) and the
    old one, now under the temp name, unlinked. A plain rename over a file makes ext4 flush the
    new file's data first (`auto_da_alloc`, ~0.15 ms a file), which the commit's fsync or log
    already makes unnecessary. Elsewhere (no such call, a file system without it, no file yet)
    it is `os.replace`."""
    global _exchange
    if _exchange is not None:
        try:
            is_file = stat.S_ISREG(os.lstat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            is_file = False
        if is_file:
            if _exchange(_AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(path), _RENAME_EXCHANGE) == 0:
                with contextlib.suppress(OSError):  # else swept later: it has a temp file's name
                    os.unlink(tmp)
                return
            err = ctypes.get_errno()
            if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                _exchange = None  # this file system cannot swap: rename from now on
            elif err not in (errno.ENOENT, errno.ENOTDIR):  # gone meanwhile: rename below
                raise OSError(err, os.strerror(err), str(path))
    os.replace(tmp, path)


# What `stage` names its temp files: ".<target name>.<8 random characters>.tmp" (tempfile.mkstemp).
_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")


def is_staged_temp(name: str) -> bool:
    """Whether a file name is an atomic write's temp file (`stage` gives `.<name>.<8 characters>.tmp`):
    a write in progress, or the old bytes `install` swapped out and is about to unlink, never a
    document. The watcher publishes no change for one, and listings of the workspace leave them
    out: a listing cached while one existed would name a file soon gone. Looser than `_TEMP_NAME`,
    the sweep's test: the sweep deletes, so it must be sure; hiding a stray `.x.tmp` costs nothing."""
    return name.startswith(".") and name.endswith(".tmp")


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


def drop_temps(path: Path) -> None:
    """Remove the temp files `stage` left beside `path` (a writer killed before installing them).
    Only under the workspace lock, where no other writer is staging."""
    prefix = f".{path.name}."
    try:
        names = os.listdir(path.parent)
    except OSError:  # no folder yet: no temp file either
        return
    for name in names:
        if name.startswith(prefix) and name.endswith(".tmp") and len(name) == len(prefix) + 12:
            unlink_quietly(path.parent / name)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so a reader or a crash sees the old bytes or the new, never half."""
    commit([(path, data)], [])


_sync_pool: ThreadPoolExecutor | None = None
_sync_pool_lock = threading.Lock()


def fsync_paths(paths: list[Path]) -> None:
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


def _syncfs() -> Any:
    """libc's syncfs(2), where the kernel reports its write-back errors (Linux 5.8 and later:
    before, a failed write-back went unreported); None elsewhere."""
    try:
        major, minor = (int(part) for part in re.findall(r"\d+", os.uname().release)[:2])
        if (major, minor) < (5, 8):
            return None
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError, ValueError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_syncfs_call = _syncfs()
SYNCFS_FROM = 64  # paths at which one syncfs per file system beats an fsync each (~5x at 400 here)


def sync_filesystems(paths: list[Path]) -> bool:
    """Make `paths` durable with one `syncfs` per file system holding them, in place of an fsync
    each: everything written on those file systems reaches the disk, these files, their folders'
    entries and all. False (nothing done that counts) for fewer than `SYNCFS_FROM` paths (an
    fsync each is cheaper), where there is no such call, or when it fails: the caller then fsyncs
    each path. Paths that are gone are passed over."""
    if _syncfs_call is None or len(paths) < SYNCFS_FROM:
        return False
    handles: dict[int, Path] = {}  # a path on each file system
    for path in paths:
        try:
            handles.setdefault(os.stat(path).st_dev, path)
        except OSError:  # gone meanwhile: nothing to make durable
            continue
    for path in handles.values():
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if _syncfs_call(fd) != 0:
                return False
        finally:
            os.close(fd)
    return True


def fsync_present(paths: list[Path]) -> None:
    """`fsync_paths`, passing over paths that were removed meanwhile."""
    fsync_paths([p for p in paths if os.path.exists(p)])


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def missing_parents(paths: Iterable[Path]) -> set[Path]:
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
    new_dirs = missing_parents(path for path, _ in writes)
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in writes:
            staged.append((stage(path, data, sync=False), path))
        fsync_paths([tmp for tmp, path in staged if path not in volatile])
    except BaseException:
        for tmp, _ in staged:
            unlink_quietly(tmp)
        raise
    touched: set[Path] = set()
    for tmp, path in staged:
        install(tmp, path)
        if path not in volatile:  # a volatile file's rename need not outlive a power cut either
            touched.add(path.parent)
    for path in deletes:
        try:
            path.unlink()
            touched.add(path.parent)
        except FileNotFoundError:
            pass
    fsync_paths([d for d in touched | {d.parent for d in new_dirs} if d.exists()])


def ignore_in_git(folder: Path, names: Iterable[str]) -> OSError | None:
    """Add the `names` missing from `folder/.gitignore` (a lost race only repeats a line); the error
    when the file cannot be read or written (the caller logs it: runtime state stays usable)."""
    path = folder / ".gitignore"
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        missing = [name for name in names if name not in text.splitlines()]
        if missing:
            with open(path, "a", encoding="utf-8") as out:
                out.write(("\n" if text and not text.endswith("\n") else "") + "\n".join(missing) + "\n")
    except OSError as err:
        return err
    return None
