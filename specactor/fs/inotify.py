"""Linux inotify through libc (ctypes): watch folders, drain what changed without blocking.

Shared by the OpenSpec cache (which drains lazily, on each answer) and the workspace watcher
(which waits for the descriptor to become readable). No new dependency: three libc calls.
"""

from __future__ import annotations

import os
import struct
import weakref
from typing import Any


class Inotify:
    """Linux inotify through libc: `watch` directories, `drain` what changed (non-blocking).

    `available` is False elsewhere (or when libc lacks inotify); the cache then validates every
    answer with a stat instead.
    """

    MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800 | 0x1000000 | 0x2000000
    OVERFLOW, IGNORED, ISDIR = 0x4000, 0x8000, 0x40000000
    CREATED_DIR = 0x100 | 0x80  # IN_CREATE | IN_MOVED_TO, with ISDIR: a folder to watch too

    def __init__(self) -> None:
        self.fd = -1
        self.paths: dict[int, str] = {}
        self.available = True  # until the first watch finds out
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def _open(self) -> bool:
        import ctypes

        try:
            self.libc = ctypes.CDLL(None, use_errno=True)
            self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            self.fd = -1
        self.available = self.fd >= 0
        if self.available:  # the toolset has no shutdown hook: the descriptor goes with this object
            self._finalizer = weakref.finalize(self, os.close, self.fd)
        return self.available

    def close(self) -> None:
        """Give back the descriptor and every watch on it (they count against a per-user limit)."""
        if self._finalizer is not None:
            self._finalizer()  # closes the descriptor once; the collector will not close it again
            self._finalizer = None
        self.fd = -1
        self.paths.clear()
        self.available = False

    def watch(self, path: str, rel: str) -> bool:
        if not self.available or (self.fd < 0 and not self._open()):
            return False
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), self.MASK)
        if wd < 0:
            return False  # ENOSPC (watch limit), a vanished directory, ...: fall back to stat keys
        self.paths[wd] = rel
        return True

    def drain(self) -> list[str] | None:
        """The relative paths named by pending events; None when the kernel dropped some."""
        events = self.drain_events()
        return None if events is None else [path for path, _ in events]

    def drain_events(self) -> list[tuple[str, int]] | None:
        """The pending events as (relative path, mask); None when the kernel dropped some."""
        changed: list[tuple[str, int]] = []
        while self.fd >= 0:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            offset = 0
            while offset + 16 <= len(data):
                wd, mask, _, size = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16:offset + 16 + size].rstrip(b"\0").decode("utf-8", "surrogateescape")
                offset += 16 + size
                if mask & self.OVERFLOW:
                    return None
                base = self.paths.pop(wd, None) if mask & self.IGNORED else self.paths.get(wd)
                if base is not None:
                    changed.append((f"{base}/{name}" if base and name else base or name, mask))
        return changed
