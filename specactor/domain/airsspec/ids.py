"""Spec ids: `{unix seconds}-{slug}`, and the slug rules of AirsSpec (ADR-003).

`SPEC_ID_PATTERN` is the grammar every tool argument, URI and directory name must match: it
cannot hold a separator or `..`, so an id is always one safe path segment.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

SLUG_MAX: Final = 50
SPEC_ID_PATTERN: Final = r"^[0-9]{1,18}-[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$"
# The pattern in words: the schema's description, and what a refusal says (never the raw regex).
SPEC_ID_WORDS: Final = ("a spec id is {unix seconds}-{slug}, e.g. 1737734400-user-authentication: digits, a hyphen, "
                        "then up to 50 lowercase letters, digits and inner hyphens; '/' and '..' are not allowed")
# `$` also matches before a final newline in Python; ids must match exactly.
_SPEC_ID: Final = re.compile(SPEC_ID_PATTERN.removesuffix("$") + r"\Z")
_DASHES: Final = re.compile(r"-{2,}")


def slugify(title: str) -> str:
    """Lowercase ASCII letters and digits joined by single `-`, at most 50 long; `untitled` if empty.

    Whitespace, `-` and `_` become `-`; every other character (non-ASCII letters too) is dropped.
    """
    out = []
    for ch in title.lower():
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        elif ch.isspace() or ch in "-_":
            out.append("-")
    slug = _DASHES.sub("-", "".join(out)).strip("-")
    slug = slug[:SLUG_MAX].rstrip("-")
    return slug or "untitled"


def is_spec_id(value: str) -> bool:
    return _SPEC_ID.match(value) is not None


def invalid_spec_id(value: str, name: str = "spec_id") -> str:
    """The sentence that refuses `value` as a spec id."""
    return f"'{name}' is invalid ({value[:60]!r}): {SPEC_ID_WORDS}"


def new_spec_id(title: str, unix_seconds: int, taken: Callable[[str], bool]) -> str:
    """The id for a spec created at `unix_seconds`; a taken id gets a `-2`, `-3`, … suffix."""
    slug = slugify(title)
    candidate = f"{unix_seconds}-{slug}"
    n = 1
    while taken(candidate):
        n += 1
        suffix = f"-{n}"
        candidate = f"{unix_seconds}-{slug[:SLUG_MAX - len(suffix)].rstrip('-')}{suffix}"
    return candidate
