"""The graph projection's read port over disk (`domain.graph.projection.Reader`), the workspace id's
git remote, and the lock that lets one process at a time drain a workspace's graph outbox.

Paths under `openspec/` are read from the OpenSpec project folder, everything else from the
server root (they are the same folder unless OPENSPEC_ROOT says otherwise). Reads go through
`Confined` without following any symlink, so nothing outside the workspace is ever mirrored into
the graph; a file too big to be a spec, or unreadable, or not UTF-8 text reads as absent.
Blocking: the graph-sync actor calls it on a worker thread.
"""

from __future__ import annotations

import fcntl
import os
import stat as stat_mode
from pathlib import Path

from specactor.fs.confined import Confined
from specactor.fs.files import PathEscape, is_staged_temp

MAX_FILE_BYTES = 4 * 1024 * 1024  # a spec, a proposal or a plan is kilobytes; past this it is not one


class WorkspaceReader:
    """Args:
        root: the server root (`.airsspec/` and everything not OpenSpec).
        openspec_project: the folder holding `openspec/`.
    """

    def __init__(self, root: Path, openspec_project: Path) -> None:
        self._roots = {"": Confined(root, links=False), "openspec": Confined(openspec_project, links=False)}
        self.skipped: list[str] = []  # files read as absent for their size or bytes (logged by the actor)

    def _confined(self, rel: str) -> Confined:
        return self._roots["openspec" if rel == "openspec" or rel.startswith("openspec/") else ""]

    def listdir(self, rel: str) -> list[tuple[str, bool]] | None:
        try:
            entries = self._confined(rel).scandir(rel)
        except (OSError, PathEscape):
            return None
        out = []
        for entry in entries:
            if is_staged_temp(entry.name):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if is_dir or entry.is_file(follow_symlinks=False):
                    out.append((entry.name, is_dir))
            except OSError:
                continue
        return sorted(out)

    def text(self, rel: str) -> str | None:
        files = self._confined(rel)
        try:
            info = files.stat(rel, follow=False)
            if info is None or not stat_mode.S_ISREG(info.st_mode):
                return None
            if info.st_size > MAX_FILE_BYTES:
                self.skipped.append(f"{rel}: {info.st_size} bytes, over {MAX_FILE_BYTES}")
                return None
            data = files.read(rel)
        except (OSError, PathEscape):
            return None
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            self.skipped.append(f"{rel}: not UTF-8 text")
            return None

    def close(self) -> None:
        for files in self._roots.values():
            files.close()


def git_remote(root: Path) -> str | None:
    """The URL of the repository's `origin` remote (else its first remote), read from `.git/config`
    without running git; None when there is none."""
    config = root / ".git" / "config"
    try:
        if not config.is_file() or config.stat().st_size > 1024 * 1024:
            return None
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    section, urls = "", dict[str, str]()
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section.startswith("[remote ") and line.replace(" ", "").startswith("url="):
            name = section[len("[remote "):].strip(' "]')
            urls.setdefault(name, line.split("=", 1)[1].strip())
    return urls.get("origin") or next(iter(urls.values()), None)


def folder_name(root: Path) -> str:
    return os.path.basename(os.path.normpath(root)) or "workspace"


class DrainLock:
    """An exclusive lock between processes (`flock`) on a file beside the outbox: whoever holds it
    drains. The kernel lets go when the holder dies, however it dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_take(self) -> bool:
        """Take the lock if it is free; whether this process holds it now. Blocking (a worker thread)."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None
