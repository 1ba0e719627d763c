"""How the domain sees an `openspec/` directory: a read-only `Source`, and the CLI's discovery rules.

The domain never touches the disk: the toolset passes a `Source` (a cached reader of the real
directory) and the tests a `MemorySource`. Paths are POSIX, relative to the `openspec/`
directory. Listing follows Node's `readdir({withFileTypes})`: a symlink is neither a file nor a
directory, so symlinked change or capability directories are not walked, as in the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")


class Unreadable(Exception):
    """A path that exists but cannot be read (permissions, a directory where a file belongs, ...)."""

    def __init__(self, rel: str, code: str, message: str) -> None:
        super().__init__(message)
        self.rel = rel
        self.code = code


@dataclass(frozen=True)
class Entry:
    name: str
    is_dir: bool
    is_file: bool
    is_link: bool


class Source(Protocol):
    def entries(self, rel: str) -> list[Entry] | None:
        """The entries of directory `rel` in name order; None when it is missing or not a directory."""

    def text(self, rel: str) -> str | None:
        """The file's text (invalid UTF-8 replaced, as Node does); None when missing or a dangling
        or escaping symlink.

        Raises:
            Unreadable: when it exists but cannot be read.
        """

    def kind(self, rel: str) -> str | None:
        """"file", "dir" or "other" after following symlinks that stay inside; None when missing."""

    def mtime(self, rel: str) -> float | None:
        """Modification time in seconds (following symlinks); None when missing."""

    def memo(self, rel: str, tag: str, fn: Callable[[str | None], T]) -> T:
        """`fn(text(rel))`, remembered until the file changes."""

    def entry(self, rel: str) -> Entry | None:
        """`rel`'s own entry in its directory's listing (`entries`), without listing the directory;
        None when the directory does not list it."""


def join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


# ---------------------------------------------------------------------- discovery


def _files(src: Source, directory: str,
           segments: tuple[str, ...] = ()) -> Iterator[tuple[str, tuple[str, ...], Entry]]:
    """Every entry under `directory` that is not a directory, skipping dot-names, as (path, the
    directories below `directory` it sits in, entry)."""
    for entry in src.entries(directory) or []:
        if entry.name.startswith("."):
            continue
        path = join(directory, entry.name)
        if entry.is_dir:
            yield from _files(src, path, (*segments, entry.name))
        else:
            yield path, segments, entry


def _is_file(src: Source, path: str, entry: Entry) -> bool:
    """A regular file, or a symlink to one."""
    return entry.is_file or (entry.is_link and src.kind(path) == "file")


def discover_spec_files(src: Source, root: str) -> list[tuple[str, str]]:
    """Every `spec.md` at depth >= 1 under `root`, as (capability id, path), sorted by id."""
    return sorted(("/".join(segments), path) for path, segments, entry in _files(src, root)
                  if entry.name == "spec.md" and segments and _is_file(src, path, entry))


def unread_delta_files(src: Source, root: str, has_delta_sections: Callable[[str], bool]) -> list[tuple[str, str]]:
    """Markdown files under a change's specs/ with delta sections that archive never reads,
    as (path relative to specs/, the spec.md it should be)."""
    found: list[tuple[str, str]] = []
    for path, segments, entry in _files(src, root):
        if not entry.name.lower().endswith(".md") or entry.name == "spec.md" or not _is_file(src, path, entry):
            continue
        if not src.memo(path, "has-delta", lambda t: t is not None and has_delta_sections(t)):
            continue
        capability = "/".join(segments) if segments else entry.name[:-3]
        found.append(("/".join([*segments, entry.name]), f"{capability}/spec.md"))
    return sorted(found)


def has_any_file_under(src: Source, directory: str) -> bool:
    for entry in src.entries(directory) or []:
        if entry.name.startswith("."):
            continue
        if entry.is_file or entry.is_link:
            return True
        if entry.is_dir and has_any_file_under(src, join(directory, entry.name)):
            return True
    return False


def change_dirs(src: Source, *, hidden: bool) -> list[str]:
    """Directories under changes/ except archive/ (the CLI's `list` keeps hidden ones, the rest skip them)."""
    return [e.name for e in src.entries("changes") or []
            if e.is_dir and e.name != "archive" and (hidden or not e.name.startswith("."))]


def is_spec_id(src: Source, ident: str) -> bool:
    """`ident in spec_ids(src)`, answered by walking only its own path."""
    directory = "specs"
    for segment in ident.split("/"):
        entry = next((e for e in src.entries(directory) or [] if e.name == segment), None)
        if entry is None or not entry.is_dir or segment.startswith("."):
            return False
        directory = join(directory, segment)
    spec = next((e for e in src.entries(directory) or [] if e.name == "spec.md"), None)
    return spec is not None and _is_file(src, join(directory, "spec.md"), spec)


def active_change_ids(src: Source) -> list[str]:
    return sorted(change_dirs(src, hidden=False))


def spec_ids(src: Source) -> list[str]:
    return [ident for ident, _ in discover_spec_files(src, "specs")]


def archived_change_ids(src: Source) -> list[str]:
    return sorted(e.name for e in src.entries("changes/archive") or [] if e.is_dir and not e.name.startswith("."))


def last_modified(src: Source, directory: str) -> float:
    """The newest file mtime under `directory` (symlinked directories not walked), else its own."""
    latest: float | None = None

    def walk(d: str) -> None:
        nonlocal latest
        for entry in src.entries(d) or []:
            path = join(d, entry.name)
            if entry.is_dir:
                walk(path)
            else:
                stamp = src.mtime(path)
                if stamp is not None and (latest is None or stamp > latest):
                    latest = stamp

    walk(directory)
    return latest if latest is not None else src.mtime(directory) or 0.0


# ---------------------------------------------------------------------- in memory


class MemorySource:
    """A `Source` over a dict of path -> text (directories implied), for tests and dry runs."""

    def __init__(self, files: dict[str, str], mtimes: dict[str, float] | None = None) -> None:
        self.files = dict(files)
        self.mtimes = dict(mtimes or {})
        self.dirs: set[str] = {""}
        for path in self.files:
            parts = path.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))

    def entries(self, rel: str) -> list[Entry] | None:
        if rel not in self.dirs:
            return None
        prefix = f"{rel}/" if rel else ""
        names: dict[str, bool] = {}
        for path in [*self.files, *self.dirs]:
            if path and path.startswith(prefix) and "/" not in path[len(prefix):]:
                names[path[len(prefix):]] = path in self.dirs
        return [Entry(n, d, not d, False) for n, d in sorted(names.items())]

    def text(self, rel: str) -> str | None:
        if rel in self.dirs:
            raise Unreadable(rel, "EISDIR", f"EISDIR: illegal operation on a directory, read '{rel}'")
        return self.files.get(rel)

    def kind(self, rel: str) -> str | None:
        return "dir" if rel in self.dirs else "file" if rel in self.files else None

    def mtime(self, rel: str) -> float | None:
        return self.mtimes.get(rel, 0.0) if rel in self.files or rel in self.dirs else None

    def memo(self, rel: str, tag: str, fn: Callable[[str | None], T]) -> T:
        return fn(self.text(rel))

    def entry(self, rel: str) -> Entry | None:
        parent, _, name = rel.rpartition("/")
        return next((e for e in self.entries(parent) or [] if e.name == name), None)


class Staged:
    """A `Source` that also sees writes made but not yet on disk: `staged` maps paths (relative to
    `openspec/`) to their new bytes, or None for a delete. Under a group commit the transactions
    before this one have written only into the group, so what they wrote is read from here."""

    def __init__(self, src: Source, staged: dict[str, bytes | None]) -> None:
        self.src = src
        self.staged = staged

    def _under(self, rel: str) -> list[str]:
        prefix = f"{rel}/" if rel else ""
        return [p for p, data in self.staged.items() if data is not None and p.startswith(prefix)]

    def entries(self, rel: str) -> list[Entry] | None:
        listed = self.src.entries(rel)
        prefix = f"{rel}/" if rel else ""
        changed = [p for p in self.staged if p.startswith(prefix)]
        if not changed:
            return listed
        names = {e.name: e for e in listed or []}
        for path in changed:
            name, _, rest = path[len(prefix):].partition("/")
            if rest:
                if self.staged[path] is not None and name not in names:
                    names[name] = Entry(name, True, False, False)
            elif self.staged[path] is None:
                names.pop(name, None)
            else:
                names[name] = Entry(name, False, True, False)
        if listed is None and not names:
            return None
        return [names[n] for n in sorted(names)]

    def text(self, rel: str) -> str | None:
        if rel in self.staged:
            data = self.staged[rel]
            return None if data is None else data.decode("utf-8", errors="replace")
        return self.src.text(rel)

    def kind(self, rel: str) -> str | None:
        if rel in self.staged:
            return "file" if self.staged[rel] is not None else None
        found = self.src.kind(rel)
        return "dir" if found is None and self._under(rel) else found

    def mtime(self, rel: str) -> float | None:
        if rel in self.staged and self.staged[rel] is None:
            return None
        found = self.src.mtime(rel)
        return 0.0 if found is None and self.kind(rel) is not None else found

    def memo(self, rel: str, tag: str, fn: Callable[[str | None], T]) -> T:
        if rel in self.staged:
            return fn(self.text(rel))
        return self.src.memo(rel, tag, fn)

    def entry(self, rel: str) -> Entry | None:
        name = rel.rpartition("/")[2]
        if rel in self.staged:
            return None if self.staged[rel] is None else Entry(name, False, True, False)
        found = self.src.entry(rel)
        return Entry(name, True, False, False) if found is None and self._under(rel) else found
