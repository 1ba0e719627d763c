"""Reading workspace files without leaving the workspace: the airsspec and openspec toolsets and
the storage actor read, stat and list through `Confined`. Each path component is opened from the
one before (`openat`, `O_NOFOLLOW`), so a symlink on the way, or one swapped in meanwhile, is
seen: refused (`links=False`), or followed only while it stays inside the confining directory.
A refusal raises `PathEscape` naming the path and the symlink.
"""

from __future__ import annotations

import errno
import functools
import os
import stat as stat_mode
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from specactor.fs.files import PathEscape, _real_root, normal_relative, read_fd

T = TypeVar("T")

MAX_LINKS = 40  # symlinks one lookup may follow, as Linux allows before ELOOP
KEEP_DIRS = 16  # directories kept open between lookups: a spec's or a change's folder and its parents
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_BASE = "\x00"  # in the walk's stack: the confining directory is reached (no path component holds a NUL)


class _Link:
    """What a final lookup answers when it met a symlink: resolve it and walk on."""


_LINK = _Link()


class Confined:
    """The files under `root/base`, reached from `root` without a symlink that leaves `root/base`.

    Args:
        root: a directory the caller trusts (the configured workspace: its own path may hold symlinks).
        base: the directory under `root` to confine to, "" for `root` itself. It may be reached
            through a symlink that stays inside `root` (`openspec` -> `docs/openspec`).
        links: follow symlinks that resolve inside `root/base` (True), or refuse every symlink
            on the way (False). A final symlink is still seen as itself by `stat(follow=False)`.

    The last directories opened (`KEEP_DIRS`) stay open until `close()`: one catalog pass stats
    thousands of files in a few folders. So keep one for one operation (a folder renamed
    meanwhile would still be read), on one thread.
    """

    def __init__(self, root: Path | str, base: str = "", *, links: bool = True) -> None:
        self.root = os.fspath(root)
        self.base = normal_relative(base) if base else "."
        self.links = links
        self._prefixes = _prefixes(self.root)
        self._root_fd = -1
        self._dirs: dict[str, int] = {}  # real directories below the root, by path, least recently used first
        # How `_dirs` spells a folder under the base: a base reached through a symlink is kept under
        # its real path, so a path under it never finds its folder here and takes the walk.
        self._prefix = "" if self.base == "." else self.base + "/"

    def __enter__(self) -> Confined:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        fds, self._dirs = [*self._dirs.values(), self._root_fd], {}
        self._root_fd = -1
        for fd in fds:
            if fd >= 0:
                os.close(fd)

    # ------------------------------------------------------------------ lookups

    def open(self, rel: str, flags: int = os.O_RDONLY) -> int:
        """A new descriptor for `rel`, opened with `flags` (the caller closes it).

        Raises:
            PathEscape: a symlink on the way leads out (with `links=False`: is there at all).
            FileNotFoundError, NotADirectoryError, OSError: as `os.open` would.
        """
        def last(dir_fd: int, name: str) -> int | _Link:
            try:
                return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except OSError as err:  # O_NOFOLLOW meets a symlink: ELOOP, or ENOTDIR with O_DIRECTORY
                if err.errno in (errno.ELOOP, errno.ENOTDIR) and name != ".":
                    return _LINK
                raise

        return self._walk(rel, last)

    def stat(self, rel: str, *, follow: bool = True) -> os.stat_result | None:
        """`rel`'s stat, None when it is missing; `follow=False` stats a final symlink itself.

        Raises:
            PathEscape: as `open`. OSError: other than a missing file.
        """
        def last(dir_fd: int, name: str) -> os.stat_result | _Link:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            return _LINK if follow and stat_mode.S_ISLNK(info.st_mode) else info

        try:
            return self._walk(rel, last)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read(self, rel: str) -> bytes | None:
        """The bytes of the file `rel`, None when it is missing.

        Raises:
            PathEscape: as `open`. OSError: other than a missing file (EISDIR for a directory).
        """
        try:
            fd = self.open(rel)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return read_fd(fd)
        finally:
            os.close(fd)

    def scandir(self, rel: str) -> list[os.DirEntry[str]]:
        """The entries of the directory `rel` (their `is_dir(follow_symlinks=False)` and the like work).

        Raises:
            PathEscape: as `open`. OSError: FileNotFoundError, NotADirectoryError, ...
        """
        fd = self.open(rel, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as entries:
                return list(entries)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ the walk

    def _walk(self, rel: str, last: Callable[[int, str], T | _Link]) -> T:
        """`last(the directory holding the final component, its name)`, that directory reached
        from the root one `openat` at a time, symlinks refused or resolved on the way."""
        norm = normal_relative(rel)
        parent, _, final = norm.rpartition("/")
        key = self._prefix + parent
        fd = self._dirs.pop(key, None) if parent else None
        if fd is not None:  # the folder is open already: it was reached by this walk's rules before
            self._dirs[key] = fd  # (again) the most recently used
            found = last(fd, final)
            if not isinstance(found, _Link):
                return found  # a final symlink: walked from the root below, to resolve it
        if self._root_fd < 0:
            self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        stack = [*reversed(norm.split("/")), _BASE, *reversed(self.base.split("/"))]
        names: list[str] = []  # the real directories walked, from the root
        fds = [self._root_fd]
        base: list[str] = []
        followed, via = 0, ""  # symlinks followed, the last one
        while stack:
            name = stack.pop()
            if name == _BASE:
                base = names.copy()
            elif name == "..":
                if not names:
                    raise PathEscape(f"invalid path {rel!r}: the symlink '{via}' leads outside the workspace")
                names.pop()
                fds.pop()
            elif name not in ("", "."):
                if not stack:  # the final component
                    self._check_base(rel, names, base, via)
                    found = last(fds[-1], name)
                    if not isinstance(found, _Link):
                        return found
                elif self._enter(names, fds, name):
                    continue
                followed += 1
                if followed > MAX_LINKS:
                    raise PathEscape(f"invalid path {rel!r}: more than {MAX_LINKS} symlinks on the way")
                target = self._target(rel, fds[-1], names, name)
                via = "/".join((*names, name))
                if target.startswith("/"):  # inside the root (`_target` checked): walk on from it
                    del names[:], fds[1:]
                    target = next((target + "/")[len(p):] for p in self._prefixes if (target + "/").startswith(p))
                stack.extend(reversed(target.split("/")))
        self._check_base(rel, names, base, via)  # the path names a directory ("", ".", a link to one)
        found = last(fds[-1], ".")
        assert not isinstance(found, _Link)
        return found

    def _enter(self, names: list[str], fds: list[int], name: str) -> bool:
        """Step into the directory `name`; False when it is a symlink (or not a directory: then
        `_target` raises ENOTDIR)."""
        key = "/".join((*names, name))
        fd = self._dirs.pop(key, None)
        if fd is None:
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=fds[-1])
            except OSError as err:  # a symlink: ELOOP, or ENOTDIR with O_DIRECTORY (as a file)
                if err.errno in (errno.ENOTDIR, errno.ELOOP):
                    return False
                raise
            if len(self._dirs) >= KEEP_DIRS:  # close the least recently used one not on this walk's way
                stale = next((k for k in self._dirs if self._dirs[k] not in fds), None)
                if stale is not None:
                    os.close(self._dirs.pop(stale))
        self._dirs[key] = fd  # (again) the most recently used
        names.append(name)
        fds.append(fd)
        return True

    def _target(self, rel: str, dir_fd: int, names: list[str], name: str) -> str:
        """Where the symlink `name` points, when it may be followed (an absolute target: inside the root).

        Raises:
            PathEscape: it may not. NotADirectoryError: `name` is no symlink but a file on the way.
        """
        where = "/".join((*names, name))
        try:
            target = os.readlink(name, dir_fd=dir_fd)
        except OSError as err:
            if err.errno == errno.EINVAL:  # not a symlink, so the file in the middle of a path
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), where) from None
            raise
        if not self.links:
            raise PathEscape(f"invalid path {rel!r}: '{where}' is a symlink, and symlinks are not followed here")
        if target.startswith("/") and not any((target + "/").startswith(p) for p in self._prefixes):
            raise PathEscape(f"invalid path {rel!r}: the symlink '{where}' leads outside the workspace")
        return target

    def _check_base(self, rel: str, names: list[str], base: list[str], via: str) -> None:
        if names[:len(base)] != base:
            raise PathEscape(f"invalid path {rel!r}: the symlink '{via}' leads outside '{self.base}'")


@functools.lru_cache(maxsize=64)
def _prefixes(root: str) -> tuple[str, ...]:
    """How an absolute symlink target inside `root` starts: with the root spelt as given, or with
    its symlinks resolved (cached: a root re-pointed meanwhile can only make targets look outside)."""
    absolute = os.path.join(os.path.abspath(root), "")
    return tuple(dict.fromkeys((absolute, _real_root(root))))


def read_confined(root: Path | str, rel: str, *, base: str = "", links: bool = True) -> bytes | None:
    """One file's bytes through a `Confined` of its own; None when it is missing.

    Raises:
        PathEscape: a symlink on the way leads outside `root/base`. OSError: other than missing.
    """
    with Confined(root, base, links=links) as files:
        return files.read(rel)
