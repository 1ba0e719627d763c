"""Reading what HEAD points at from git's own files (`HEAD`, a loose ref, `packed-refs`), purely.

The actor reads the bytes; these functions decide what they say, or answer None when they cannot
say for sure (a symbolic ref outside `refs/heads/`, a ref naming another ref, anything unusual),
in which case the actor asks `git rev-parse` instead. Only a full object id is ever returned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_OBJECT_ID: Final = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1, or SHA-256
_BRANCH: Final = re.compile(r"refs/heads/[A-Za-z0-9._/+@-]+")


@dataclass(frozen=True)
class HeadTarget:
    """What `HEAD` holds: a commit (detached) or the name of a branch."""

    commit: str | None = None
    branch: str | None = None


def object_id(data: bytes) -> str | None:
    """The object id a loose ref file holds (one id and a newline), or None."""
    text = data.strip()
    return text.decode() if _OBJECT_ID.fullmatch(text) else None


def head_target(data: bytes) -> HeadTarget | None:
    """`HEAD`'s contents: a detached commit, or `ref: refs/heads/<name>`; None for anything else."""
    commit = object_id(data)
    if commit is not None:
        return HeadTarget(commit=commit)
    text = data.strip()
    if not text.startswith(b"ref:"):
        return None
    name = text[4:].strip().decode("utf-8", "replace")
    if not _BRANCH.fullmatch(name) or ".." in name or "/." in name or name.endswith((".lock", "/")):
        return None
    return HeadTarget(branch=name)


def packed_refs(data: bytes) -> dict[str, str]:
    """`packed-refs` → {ref name: object id}; peeled lines (`^…`) and comments are skipped."""
    refs: dict[str, str] = {}
    for line in data.split(b"\n"):
        if not line or line.startswith((b"#", b"^")):
            continue
        oid, _, name = line.partition(b" ")
        commit = object_id(oid)
        if commit is not None and name:
            refs[name.decode("utf-8", "surrogateescape")] = commit
    return refs
