"""A caching `Source` over an injected file system: repeated reads of a large workspace are cheap.

Two ways to know an answer is still true. Where the file system can watch a directory (inotify),
paths under watched, symlink-free directories are *trusted*: cached until an event names them, so
a warm `list` costs no syscalls at all. Elsewhere every answer is keyed by the file's (inode,
size, mtime, ctime) from one `stat`, and an entry stat'ed within `RACY_NS` of its mtime is never
cached (it may change again within the same timestamp tick). Derived values (parsed specs, delta
plans, issues) are memoised with the file. The syscalls come from the injected `FileSystem`, so
this module does no I/O itself. Call `refresh()` before each operation to apply pending events.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from specactor.domain.openspec.source import Entry, Unreadable

T = TypeVar("T")
RACY_NS = 50_000_000
Key = tuple[int, int, int, int]
TRUSTED: Key = (-1, -1, -1, -1)  # the key of an answer an event, not a stat, will invalidate


@dataclass(frozen=True)
class Stat:
    kind: str  # "file" | "dir" | "link" (lstat only) | "other"
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int


class FileSystem(Protocol):
    """The syscalls, on paths relative to the `openspec/` directory."""

    def stat(self, rel: str) -> Stat | None:
        """Following symlinks; None when missing or when it resolves outside. Raises Unreadable."""

    def lstat(self, rel: str) -> Stat | None:
        """Not following a final symlink (kind "link"); None when missing. Raises Unreadable."""

    def scandir(self, rel: str) -> list[Entry]:
        """A directory's entries (Node Dirent semantics). Raises Unreadable."""

    def read(self, rel: str) -> bytes | None:
        """None when the file vanished. Raises Unreadable."""

    def watch(self, rel: str) -> bool:
        """Watch directory `rel` for changes to its entries; False when that is not possible."""

    def events(self) -> Iterable[str] | None:
        """Paths changed since the last call (a directory event names the directory); None when
        events were lost and nothing watched can be trusted."""

    def now_ns(self) -> int: ...


class CachedSource:
    """`Source` over a `FileSystem`, with the caches described above; safe across worker threads."""

    def __init__(self, fs: FileSystem) -> None:
        self.fs = fs
        # Guards invalidation and every store: a value computed before an invalidation is never
        # stored after it (the generation check and the store happen under it, as one step).
        self._lock = threading.Lock()
        self._generation = 0  # bumped by every invalidation
        self._watched: set[str] = set()
        self._stat: dict[str, Stat | None] = {}  # trusted stats only
        self._dirs: dict[str, tuple[Key, list[Entry]]] = {}
        self._files: dict[str, tuple[Key, str]] = {}
        self._memo: dict[str, dict[str, tuple[Key, Any]]] = {}  # path -> tag -> (key, value)
        self._whole: dict[str, tuple[int, Any]] = {}
        # directory -> the paths directly below it at or under which something above is cached:
        # an event forgets a subtree by walking it, in time proportional to what it forgets,
        # not to the size of the cache (a write then costs the same with 5 or 5,000 files cached).
        self._below: dict[str, set[str]] = {}
        self._local = threading.local()  # per worker thread: did this operation touch an untrusted path?

    @property
    def generation(self) -> int:
        """Bumped by every invalidation: a value derived from the cache may be kept while it is unchanged."""
        return self._generation

    # ------------------------------------------------------------------ invalidation

    def refresh(self) -> None:
        """Apply the events that arrived since the last call."""
        with self._lock:
            changed = self.fs.events()
            if changed is None:
                self._forget_all()
                return
            for path in changed:
                self._forget(path)

    def clear(self) -> None:
        with self._lock:
            self._forget_all()

    def forget(self, paths: Iterable[str]) -> None:
        """Drop what is cached at or under each path (relative to `openspec/`): a write the change
        feed announced, before any watch event for it arrives."""
        with self._lock:
            for path in paths:
                self._forget(path)

    def _forget_all(self) -> None:
        self._generation += 1
        self._watched.clear()
        self._stat.clear()
        self._dirs.clear()
        self._files.clear()
        self._memo.clear()
        self._whole.clear()
        self._below.clear()

    def _forget(self, path: str) -> None:
        """Drop `path` and everything cached under it (with the lock held)."""
        if not path:
            self._forget_all()
            return
        self._generation += 1
        # A directory named by an event may be a different one now: it is watched again when next used.
        stack = [path]
        while stack:
            rel = stack.pop()
            self._stat.pop(rel, None)
            self._dirs.pop(rel, None)
            self._files.pop(rel, None)
            self._memo.pop(rel, None)
            self._watched.discard(rel)
            stack.extend(self._below.pop(rel, ()))
        parent = path.rpartition("/")[0]
        self._dirs.pop(parent, None)
        siblings = self._below.get(parent)
        if siblings is not None:
            siblings.discard(path)
        self._whole.clear()

    def _index(self, rel: str) -> None:
        """Record that something is cached at `rel` (with the lock held)."""
        while rel:
            parent = rel.rpartition("/")[0]
            self._below.setdefault(parent, set()).add(rel)
            rel = parent

    # ------------------------------------------------------------------ stats

    def _trusted(self, rel: str) -> tuple[bool, Stat | None]:
        """(True, stat) when `rel` may be cached until an event names it."""
        if rel in self._stat:
            return True, self._stat[rel]
        if rel:
            parent = rel.rpartition("/")[0]
            ok, info = self._trusted(parent)
            if not ok or info is None or info.kind != "dir" or not self._watch(parent):
                return False, None
        elif not self._watch(""):
            return False, None
        generation = self._generation
        info = self.fs.lstat(rel)
        if info is not None and info.kind == "link":
            return False, None
        with self._lock:
            if generation == self._generation:
                self._stat[rel] = info
                self._index(rel)
        return True, info

    def _watch(self, rel: str) -> bool:
        if rel in self._watched:
            return True
        with self._lock:
            if self.fs.watch(rel):
                self._watched.add(rel)
                self._index(rel)
                return True
        return False

    def _info(self, rel: str) -> tuple[Key | None, Stat | None]:
        """The key to cache `rel`'s answers under (None: do not cache), and its stat (following links)."""
        ok, info = self._trusted(rel)
        if ok:
            return (TRUSTED if info is not None else None), info
        self._local.untrusted = True
        info = self.fs.stat(rel)
        if info is None or self.fs.now_ns() - info.mtime_ns < RACY_NS:
            return None, info
        return (info.ino, info.size, info.mtime_ns, info.ctime_ns), info

    def whole(self, tag: str, fn: Callable[[], T]) -> T:
        """`fn()`, remembered until any event arrives, when everything it read was trusted.
        Calls may nest: an outer one is trusted only when every inner one was."""
        generation = self._generation
        cached = self._whole.get(tag)
        if cached is not None and cached[0] == generation:
            hit: T = cached[1]
            return hit
        outer = getattr(self._local, "untrusted", False)
        self._local.untrusted = False
        try:
            value = fn()
        finally:
            untrusted = self._local.untrusted
            self._local.untrusted = outer or untrusted
        if not untrusted:
            with self._lock:
                if generation == self._generation:
                    self._whole[tag] = (generation, value)
        return value

    # ------------------------------------------------------------------ Source

    def entries(self, rel: str) -> list[Entry] | None:
        key, info = self._info(rel)
        if info is None or info.kind != "dir":
            return None
        cached = self._dirs.get(rel)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        if key is TRUSTED:
            self._watch(rel)
        generation = self._generation
        out = sorted(self.fs.scandir(rel), key=lambda e: e.name)
        if key is not None:
            with self._lock:
                if generation == self._generation:
                    self._dirs[rel] = (key, out)
                    self._index(rel)
        return out

    def entry(self, rel: str) -> Entry | None:
        parent, _, name = rel.rpartition("/")
        if not name or name in (".", "..") or self.kind(parent) != "dir":
            return next((e for e in self.entries(parent) or [] if e.name == name), None)
        ok, info = self._trusted(rel)
        if not ok:
            self._local.untrusted = True
            info = self.fs.lstat(rel)
        if info is None:
            return None
        return Entry(name, info.kind == "dir", info.kind == "file", info.kind == "link")

    def _read(self, rel: str) -> tuple[Key | None, str | None]:
        key, info = self._info(rel)
        if info is None:
            return None, None
        if info.kind == "dir":
            raise Unreadable(rel, "EISDIR", "EISDIR: illegal operation on a directory, read")
        cached = self._files.get(rel)
        if key is not None and cached is not None and cached[0] == key:
            return key, cached[1]
        generation = self._generation
        data = self.fs.read(rel)
        if data is None:
            return None, None
        text = data.decode("utf-8", errors="replace")  # as Node's readFile(…, 'utf-8') does
        if key is not None:
            with self._lock:
                if generation == self._generation:
                    self._files[rel] = (key, text)
                    self._index(rel)
                    return key, text
        return None, text

    def text(self, rel: str) -> str | None:
        return self._read(rel)[1]

    def kind(self, rel: str) -> str | None:
        info = self._info(rel)[1]
        return info.kind if info else None

    def mtime(self, rel: str) -> float | None:
        info = self._info(rel)[1]
        return info.mtime_ns / 1e9 if info else None

    def memo(self, rel: str, tag: str, fn: Callable[[str | None], T]) -> T:
        generation = self._generation
        key, text = self._read(rel)
        tags = self._memo.get(rel)
        cached = tags.get(tag) if tags is not None else None
        if key is not None and cached is not None and cached[0] == key:
            hit: T = cached[1]
            return hit
        value = fn(text)
        if key is not None:
            with self._lock:
                if generation == self._generation:
                    self._memo.setdefault(rel, {})[tag] = (key, value)
                    self._index(rel)
        return value
