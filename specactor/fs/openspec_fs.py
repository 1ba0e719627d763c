"""The OpenSpec toolset's file system: inotify-backed change detection, the OS reads the domain's
cache validates, and the archive journal that makes an archive all or nothing.

Blocking I/O, run on worker threads (reads) or inside a storage actor's transaction (the
archive); the toolset glues it to the pure `domain/openspec`. An archive reports the paths it
wrote and removed (`Archived`), for the change feed.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import stat as st
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from specactor.domain.openspec.cache import Stat
from specactor.domain.openspec.source import Entry, Unreadable
from specactor.fs.confined import Confined, read_confined
from specactor.fs.files import (
    PathEscape,
    atomic_write,
    drop_temps,
    fsync_dir,
    fsync_paths,
    install,
    is_staged_temp,
    missing_parents,
    resolve_inside,
    stage,
    sync_filesystems,
    unlink_quietly,
)
from specactor.fs.inotify import Inotify

JOURNAL = ".specactor/openspec-archive.journal"  # relative to the project root


class OsFileSystem:
    """The syscalls `CachedSource` needs, confined to one `openspec/` directory: each goes through
    `Confined` from the project (the directory holding `openspec/`), so a symlink is followed
    only while it stays inside `openspec/`; one that leads out reads as nothing there."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.prefix = self.root + os.sep
        self.project, self.base = root.parent, root.name
        self.inotify = Inotify()
        self._local = threading.local()  # this thread's operation's `Confined`, if one is open

    def path(self, rel: str) -> str:
        return self.prefix + rel if rel else self.root

    @contextlib.contextmanager
    def operation(self) -> Iterator[None]:
        """The calls of one operation on this thread share one `Confined`, which keeps the folders
        it walked open (a cold `validate --all` stats each change's folder a dozen times). Not
        across operations: a folder may be renamed (archived) between two."""
        if getattr(self._local, "files", None) is not None:
            yield
            return
        self._local.files = Confined(self.project, self.base)
        try:
            yield
        finally:
            self._local.files.close()
            self._local.files = None

    def reopen(self) -> None:
        """Inside an operation: let go of the folders it holds open (a folder was moved meanwhile)."""
        files = getattr(self._local, "files", None)
        if files is not None:
            files.close()
            self._local.files = Confined(self.project, self.base)

    @contextlib.contextmanager
    def _files(self) -> Iterator[Confined]:
        shared = getattr(self._local, "files", None)
        if shared is not None:
            yield shared
            return
        with Confined(self.project, self.base) as files:  # outside an operation: one of its own
            yield files

    def escapes(self, rel: str) -> bool:
        """Whether `rel` exists only through a symlink that leads out of `openspec/`."""
        with self._files() as files:
            try:
                files.stat(rel)
            except PathEscape:
                return True
            except OSError:
                pass
        return False

    def _fail(self, rel: str, err: OSError, op: str) -> Unreadable:
        code = errno.errorcode.get(err.errno or 0, "EIO")
        return Unreadable(rel, code, f"{code}: {err.strerror}, {op} '{self.path(rel)}'")

    def _stat(self, rel: str, follow: bool) -> Stat | None:
        try:
            with self._files() as files:
                info = files.stat(rel or ".", follow=follow)
        except PathEscape:  # a symlink leading out: nothing there, as a dangling one
            return None
        except OSError as err:
            raise self._fail(rel, err, "stat") from None
        if info is None:
            return None
        mode = info.st_mode
        kind = ("dir" if st.S_ISDIR(mode) else "file" if st.S_ISREG(mode) else "link" if st.S_ISLNK(mode)
                else "other")
        return Stat(kind, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)

    def stat(self, rel: str) -> Stat | None:
        return self._stat(rel, True)

    def lstat(self, rel: str) -> Stat | None:
        return self._stat(rel, False)

    def scandir(self, rel: str) -> list[Entry]:
        try:
            with self._files() as files:
                return [Entry(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False),
                              e.is_symlink()) for e in files.scandir(rel or ".") if not is_staged_temp(e.name)]
        except PathEscape as err:
            raise Unreadable(rel, "ELOOP", f"ELOOP: {err}, scandir '{self.path(rel)}'") from None
        except OSError as err:
            raise self._fail(rel, err, "scandir") from None

    def read(self, rel: str) -> bytes | None:
        try:
            with self._files() as files:
                return files.read(rel)
        except PathEscape:  # as `stat`: a symlink leading out is nothing there
            return None
        except OSError as err:
            raise self._fail(rel, err, "open") from None

    def watch(self, rel: str) -> bool:
        return self.inotify.watch(self.path(rel), rel)

    def events(self) -> list[str] | None:
        return self.inotify.drain()

    def now_ns(self) -> int:
        return time.time_ns()


class PendingJournal(Exception):
    """A committed archive journal waits to be redone."""


class Archived(NamedTuple):
    """What an archive did on disk, relative to the project: the specs it merged and the change's
    files at their archived place (written), the change's files where they were and the specs
    it retired (removed)."""

    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


def journal_pending(project: Path) -> bool:
    """Whether an archive a crash interrupted waits to be redone (`recover`)."""
    return os.path.exists(project / JOURNAL)


def ensure_workspace(openspec: Path) -> None:
    """Create an `openspec/` folder that the settings say to create (OPENSPEC_AUTO_PROJECT_ROOT)."""
    openspec.mkdir(parents=True, exist_ok=True)


class Archive(NamedTuple):
    """One archive to apply, relative to the project: the files to write, those to remove (retired
    specs; their emptied directories go too), and the change's move (from, to)."""

    writes: dict[str, bytes]
    deletes: list[str]
    move: tuple[str, str]


def apply_archives(project: Path, archives: list[Archive]) -> list[Archived]:
    """Commit one journal naming every archive (atomically: that is the commit point, for all of
    them), then redo it. Every path is checked first: one that a symlink leads out of the
    workspace refuses the lot (PathEscape) before the commit point, rather than leave a journal
    that can never be redone. The archives must not touch the same paths (the toolset batches
    only those that do not). What each did, in order."""
    verified: set[str] = set()  # folders found real (not symlinks), for every path of the lot
    for one in archives:
        for rel in (*one.writes, *one.deletes, *one.move):
            resolve_inside(project, rel, verified)
    journal = {"archives": [{"writes": {rel: base64.b64encode(data).decode() for rel, data in one.writes.items()},
                             "deletes": one.deletes, "move": list(one.move)} for one in archives]}
    atomic_write(resolve_inside(project, JOURNAL), json.dumps(journal).encode())
    return _redo(project, verified)


def _files_under(directory: Path) -> list[str]:
    """The files (and symlinks) below `directory`, relative to it, `/`-separated; no link followed."""
    found: list[str] = []

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, f"{prefix}{entry.name}/")
                else:
                    found.append(prefix + entry.name)

    walk(os.fspath(directory), "")
    return sorted(found)


def recover(project: Path) -> Archived:
    """Redo a committed journal: write its specs, move its changes, drop the journal. Idempotent,
    so a crash during recovery is recovered the same way. Returns what it did (nothing when no
    journal waits)."""
    done = _redo(project)
    return Archived(written=tuple(p for one in done for p in one.written),
                    removed=tuple(p for one in done for p in one.removed))


def _entries(journal: dict[str, Any]) -> list[dict[str, Any]]:
    """The archives a journal names (one without "archives" is a single archive's, as written before batches)."""
    entries: list[dict[str, Any]] = journal["archives"] if "archives" in journal else [journal]
    return entries


def _redo(project: Path, verified: set[str] | None = None) -> list[Archived]:
    """Redo the journal's archives, in rounds so the fsyncs of all of them overlap: every spec file
    staged and installed; retired specs removed; changes moved; every file and folder touched
    synced at once (one `syncfs` when they are many); then the journal dropped (and that made
    durable)."""
    path = resolve_inside(project, JOURNAL)
    data = read_confined(project, JOURNAL)
    if data is None:
        return []
    entries = _entries(json.loads(data))
    verified = set() if verified is None else verified  # (see `resolve_inside`)
    targets = [(resolve_inside(project, rel, verified), text) for entry in entries
               for rel, text in entry["writes"].items()]
    touched = {d.parent for d in missing_parents(target for target, _ in targets)}  # new folders' entries
    staged: list[tuple[Path, Path]] = []
    try:
        for target, text in targets:
            drop_temps(target)  # a redo killed before installing left its own
            staged.append((stage(target, base64.b64decode(text), sync=False), target))
    except BaseException:
        for tmp, _ in staged:
            unlink_quietly(tmp)
        raise
    # Installed before their bytes are durable: until the journal goes (after the sync below),
    # a crash redoes every write, so a file left empty by one is written again.
    for tmp, target in staged:
        install(tmp, target)
        touched.add(target.parent)
    specs = project / "openspec" / "specs"
    done: list[Archived] = []
    for entry in entries:
        for rel in entry["deletes"]:  # a retired capability: its spec, then the directories it emptied
            target = resolve_inside(project, rel, verified)
            target.unlink(missing_ok=True)
            touched.add(target.parent)
            directory = target.parent
            while (directory != specs and specs in directory.parents and directory.is_dir()
                   and not directory.is_symlink() and not any(directory.iterdir())):
                directory.rmdir()
                touched.discard(directory)
                touched.add(directory.parent)
                directory = directory.parent
        source, target = (resolve_inside(project, p, verified) for p in entry["move"])
        moved: list[str] = []
        if source.is_dir() and not os.path.lexists(target):
            moved = _files_under(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(source, target)
            touched.update((source.parent, target.parent))
        elif not os.path.lexists(source) and target.is_dir() and not target.is_symlink():  # moved before a crash
            moved = _files_under(target)
        old, new = entry["move"]
        done.append(Archived(written=(*entry["writes"], *(f"{new}/{rel}" for rel in moved)),
                             removed=(*entry["deletes"], *(f"{old}/{rel}" for rel in moved))))
    durable = [target for _, target in staged] + sorted(d for d in touched if d.is_dir())
    if not sync_filesystems(durable):
        fsync_paths(durable)  # files and folders at once: all of them before the journal goes
    path.unlink()
    fsync_dir(path.parent)
    return done
