"""The AirsSpec toolset's disk: where `.airsspec/` is, the catalog's `Files` port over it, and the
read model (the catalog) that worker threads share under one lock.

Blocking I/O: the toolset runs `AirsSpecDisk.read` and `find_root` on a worker thread
(`Services.runtime`); writes go through a storage actor, never through here. No symlink is
followed at any level (`Confined(links=False)`).
"""

from __future__ import annotations

import os
import stat as stat_mode
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from specactor.domain.airsspec import layout
from specactor.domain.airsspec.catalog import Catalog, StatKey
from specactor.domain.airsspec.documents import Documents
from specactor.domain.changes import Change
from specactor.fs.confined import Confined
from specactor.fs.files import read_fd

T = TypeVar("T")


class OsFiles:
    """The catalog's `Files` port over one workspace directory, through `Confined`: a symlink is
    never followed. One at a final component reads as no file; one on the way (`.airsspec`,
    `specs`, a spec's folder) raises PathEscape naming it. Close it after the operation."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = Confined(root, links=False)

    def close(self) -> None:
        self.files.close()

    def stat(self, rel: str) -> StatKey | None:
        st = self.files.stat(rel, follow=False)
        if st is None or not stat_mode.S_ISREG(st.st_mode):
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns

    def read(self, rel: str) -> bytes | None:
        try:
            fd = self.files.open(rel, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put there must not hang us
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        try:
            return read_fd(fd) if stat_mode.S_ISREG(os.fstat(fd).st_mode) else None
        finally:
            os.close(fd)

    def spec_dirs(self) -> list[str]:
        try:
            return [e.name for e in self.files.scandir(layout.SPECS) if e.is_dir(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def is_dir(self, rel: str) -> bool:
        st = self.files.stat(rel, follow=False)
        return st is not None and stat_mode.S_ISDIR(st.st_mode)

    def monotonic(self) -> float:
        return time.monotonic()


def find_root(server_root: Path) -> Path | None:
    """The nearest directory from `server_root` upwards holding `.airsspec/config.toml` (reached
    without following `.airsspec` as a symlink), or None."""
    for directory in (server_root, *server_root.parents):
        if os.path.islink(directory / layout.AIRSSPEC):
            continue  # never follow `.airsspec` out of where it appears to be
        if (directory / layout.CONFIG).is_file():
            return directory
    return None


class AirsSpecDisk:
    """Where `.airsspec/` is and the read model of what it holds, for one server root.

    The workspace is the nearest directory upwards with `.airsspec/config.toml`; with none, the
    server root (where the first write creates it). Once found it is remembered. The catalog is
    shared by worker threads: `read` holds its lock around each operation.
    """

    def __init__(self, server_root: Path, documents: Documents) -> None:
        self.server_root = server_root
        self.documents = documents  # parse memo, shared by reads and transactions
        self.catalog = Catalog(documents)
        self.found: Path | None = None
        self._lock = threading.Lock()
        self._catalog_root: Path | None = None
        self._cache: dict[str, tuple[int, Any]] = {}  # derived views, keyed by catalog version

    def root(self) -> Path:
        """The workspace root. Blocking: call on a worker thread (or use `found` once known)."""
        if self.found is None:
            self.found = find_root(self.server_root)
        return self.found if self.found is not None else self.server_root

    def read(self, fn: Callable[[Catalog, OsFiles], T]) -> T:
        """`fn(catalog, files)` under the catalog's lock. Blocking: call on a worker thread."""
        root = self.root()
        with self._lock:
            if root != self._catalog_root:  # the workspace appeared (or moved): start afresh
                self.catalog, self._catalog_root = Catalog(self.documents), root
                self._cache.clear()
            files = OsFiles(root)
            try:
                return fn(self.catalog, files)
            finally:
                files.close()

    def changed(self, change: Change) -> None:
        """A change on the feed: the specs it touched are read afresh next time (a rescan: all of
        them). Blocking (the catalog's lock): call on a worker thread."""
        if Path(change.workspace) != self.root():
            return
        ids = None if change.kind == "rescan" else {
            parts[2] for parts in (p.split("/") for p in change.paths) if parts[:2] == [".airsspec", "specs"]
            and len(parts) > 2}
        if ids == set():
            return
        with self._lock:
            self.catalog.mark_stale(ids)

    def cached(self, name: str, build: Callable[[], T]) -> T:
        """`build()`'s value, remembered until the catalog's index changes (call inside `read`)."""
        seen = self._cache.get(name)
        if seen is not None and seen[0] == self.catalog.version:
            return seen[1]  # type: ignore[no-any-return]
        value = build()
        self._cache[name] = (self.catalog.version, value)
        return value
