"""Reading git's machine output (`-z` listings, `cat-file --batch`, a formatted log), purely.

The actor runs git; these functions only parse what it printed, so they are easy to test.
"""

from __future__ import annotations

from specactor.domain.knowledge.api import HistoryEntry

LOG_FORMAT = "%H%x1f%aI%x1f%an%x1f%s%x1e"


def ls_tree(out: bytes) -> dict[str, str]:
    """`git ls-tree -r -z` → {path: blob id}, blobs only."""
    listing: dict[str, str] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == b"blob":
            listing[path.decode("utf-8", "surrogateescape")] = parts[2].decode()
    return listing


def name_status(out: bytes) -> set[str]:
    """`git diff --name-status -z --no-renames` → the paths that changed in any way."""
    fields = [f for f in out.split(b"\0")]
    paths: set[str] = set()
    i = 0
    while i + 1 < len(fields):
        status, path = fields[i], fields[i + 1]
        if not status:
            break
        paths.add(path.decode("utf-8", "surrogateescape"))
        i += 2
    return paths


def cat_file_batch(out: bytes) -> dict[str, bytes]:
    """`git cat-file --batch` output → {object id: contents}; missing objects are left out."""
    objects: dict[str, bytes] = {}
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) == 2 and header[1] == b"missing":
            continue
        size = int(header[2])
        objects[header[0].decode()] = out[pos:pos + size]
        pos += size + 1  # the contents are followed by a newline
    return objects


def log(out: bytes) -> list[HistoryEntry]:
    """`git log --format=LOG_FORMAT` → history entries, newest first."""
    entries = []
    for record in out.decode("utf-8", "replace").split("\x1e"):
        fields = record.strip("\n").split("\x1f")
        if len(fields) == 4:
            entries.append(HistoryEntry(version=fields[0], timestamp=fields[1], author=fields[2], message=fields[3]))
    return entries
