"""Object keys and workspace ids: `<workspace id>/<kind>:<name>/<kind>:<name>/…`, at most 128 bytes.

Keys are injective: a workspace id holds only `[A-Za-z0-9._/-]` (never `:`), names are
percent-escaped so they never hold `/ : # ~ % |`, duplicates get `#2`, `#3`, and a key over 128
UTF-8 bytes becomes its first bytes + `~` + 20 hex of its sha256 (no unshortened key holds `~`).
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

MAX_KEY: Final = 128  # Emergent's limit on an object key; counted in UTF-8 bytes to be safe either way
MAX_WORKSPACE_ID: Final = 64
_HASH: Final = 20
_WORKSPACE_ID: Final = re.compile(r"\A[A-Za-z0-9._/-]{1,64}\Z")
_UNSAFE: Final = re.compile(r"[%/:#~|\x00-\x1f\x7f]")
_BAD_SEGMENT_CHAR: Final = re.compile(r"[^A-Za-z0-9._-]+")
# `scheme://[user@]host[:port]/path` and scp-like `[user@]host:path`
_URL: Final = re.compile(r"\A(?:https?|ssh|git|git\+ssh|ssh\+git)://(?:[^@/]*@)?[^/]+/(?P<path>.*)\Z", re.I)
_SCP: Final = re.compile(r"\A(?:[^@/:]+@)?[^/:]{2,}:(?P<path>(?!//).+)\Z")  # `C:/repo` is a local path


def escape(name: str) -> str:
    """A name as one key segment: the characters keys are built from, percent-escaped."""
    if _UNSAFE.search(name) is None:
        return name
    return _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", name)


def check_workspace_id(workspace_id: str) -> None:
    """Raises:
        ValueError: the id is not 1-64 characters of `[A-Za-z0-9._/-]` (what `workspace_id_from` makes).
    """
    if _WORKSPACE_ID.match(workspace_id) is None:
        raise ValueError(f"workspace id {workspace_id!r} must be 1-64 characters of A-Z a-z 0-9 . _ / -")


def shorten(key: str) -> str:
    """`key` itself when it fits in 128 UTF-8 bytes, else a stable prefix + `~` + a hash of all of it."""
    raw = key.encode()
    if len(raw) <= MAX_KEY:
        return key
    digest = hashlib.sha256(raw).hexdigest()[:_HASH]
    prefix = raw[:MAX_KEY - 1 - _HASH].decode(errors="ignore")  # never cuts a character in half
    return f"{prefix}~{digest}"


class Siblings:
    """Hands out key segments under one parent: the second `x` of a kind is `x#2`, the third `x#3`."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def segment(self, kind: str, name: str) -> str:
        base = f"{kind}:{escape(name)}"
        count = self._seen.get(base, 0) + 1
        self._seen[base] = count
        return base if count == 1 else f"{base}#{count}"


# ---------------------------------------------------------------------- workspace ids


def sanitize_workspace_id(text: str) -> str:
    """`text` as a workspace id: segments of `[A-Za-z0-9._-]` (anything else becomes `-`) joined by
    `/`, without empty, `.` or `..` segments, at most 64 characters; "" when nothing is left."""
    segments = []
    for part in text.split("/"):
        cleaned = _BAD_SEGMENT_CHAR.sub("-", part)
        if cleaned not in ("", ".", ".."):
            segments.append(cleaned)
    return "/".join(segments)[:MAX_WORKSPACE_ID].strip("/")


def _remote_path(remote_url: str) -> str | None:
    url = remote_url.strip()
    match = _URL.match(url) or _SCP.match(url)
    if match is None:
        return None  # a local path or file:// names no project by itself
    path = match.group("path").split("?", 1)[0].split("#", 1)[0].strip("/")
    if path.lower().endswith(".git"):
        path = path[:-4]
    return path.strip("/")


def workspace_id_from(remote_url: str | None, folder_name: str) -> str:
    """The default workspace id: the project path of a git remote (`git@github.com:acme/auth-svc.git`,
    `https://github.com/acme/auth-svc`, `ssh://git@host:22/acme/auth-svc.git` -> `acme/auth-svc`),
    else the folder name; sanitized to `[A-Za-z0-9._/-]`, at most 64 characters, never empty."""
    if remote_url:
        path = _remote_path(remote_url)
        if path:
            found = sanitize_workspace_id(path)
            if found:
                return found
    return sanitize_workspace_id(folder_name) or "workspace"
