"""The port a projection reads a workspace through, and `DictReader`, one over `{path: text}`.

Paths are relative to the workspace root (the folder holding `openspec/` and `.airsspec/`),
`/`-separated; the I/O side (an actor) implements `Reader` over the disk, confined to the root.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class Reader(Protocol):
    def listdir(self, rel: str) -> list[tuple[str, bool]] | None:
        """(name, is_dir) of each entry of folder `rel`, sorted by name; None if missing or not a folder."""

    def text(self, rel: str) -> str | None:
        """The file's text; None if missing or unreadable."""


class DictReader:
    """A `Reader` over `{path: text}`, folders implied by the paths; for tests and the bench."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self._files = dict(files)
        children: dict[str, dict[str, bool]] = {"": {}}
        for path in self._files:
            parts = path.split("/")
            for depth in range(len(parts)):
                parent = "/".join(parts[:depth])
                is_dir = depth < len(parts) - 1
                entries = children.setdefault(parent, {})
                entries[parts[depth]] = entries.get(parts[depth], False) or is_dir
        # listed once, sorted once: a projection lists the same folders again and again
        self._listing = {rel: sorted(entries.items()) for rel, entries in children.items()}

    def listdir(self, rel: str) -> list[tuple[str, bool]] | None:
        found = self._listing.get(rel)
        return None if found is None else list(found)

    def text(self, rel: str) -> str | None:
        return self._files.get(rel)
