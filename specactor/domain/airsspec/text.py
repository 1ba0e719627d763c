"""Normalising free text so it survives a markdown round trip.

Titles become one line (a heading cannot hold more). Step descriptions and notes live in the
markdown body of `plan.md`, where editors strip trailing blanks: they are normalised the same
way before they are stored, so what is read back equals what was written.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

_TIMESTAMP: Final = re.compile(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")


def one_line(text: str) -> str:
    """Whitespace runs (newlines too) become one space; no leading or trailing space."""
    return " ".join(text.split())


def block(text: str) -> str:
    """Line endings become `\\n`, trailing blanks of each line go, and so do blank lines at either end."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def note(text: str) -> str:
    """A note is a block without blank lines (it is rendered as one bullet)."""
    return "\n".join(line for line in block(text).split("\n") if line)


def timestamp(now: dt.datetime) -> str:
    """RFC 3339 UTC with seconds, as the seed writes them: `2026-01-24T14:30:00Z`."""
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(value: object) -> str | None:
    """The canonical spelling of a timestamp read from a file, or None when it is not one."""
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return timestamp(moment)
    if not isinstance(value, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if _TIMESTAMP.match(value):
        return value
    if moment.tzinfo is None:
        return None
    return timestamp(moment)
