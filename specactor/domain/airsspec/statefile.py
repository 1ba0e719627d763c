"""`state.toon`: the workflow state in TOON (v4, via the `toons` library).

    spec_id: 1737734400-user-authentication
    lifecycle: active
    phase: build
    updated_at: "2026-01-24T14:30:00Z"
    plan_approved: true
    build_progress:
      total_steps: 5
      ...
    history[1]{at,from,to,reason}:
      "2026-01-24T10:00:00Z",draft,active,build started

A file that does not parse, or holds a value of the wrong kind, is a ValidationFailed naming
the line; it is never replaced by a fresh state.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec
import toons

from specactor.domain.airsspec.errors import ValidationFailed
from specactor.domain.airsspec.model import WorkflowState
from specactor.domain.airsspec.text import parse_timestamp

_PATH_PART: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def render(state: WorkflowState) -> str:
    return str(toons.dumps(msgspec.to_builtins(state))) + "\n"


def parse(text: str, file: str, spec_id: str) -> WorkflowState:
    """Raises:
        ValidationFailed: naming `file` and the line of the first problem.
    """
    try:
        data = toons.loads(text)
    except toons.ToonDecodeError as err:
        line = getattr(err, "line", None)
        reason = str(err).split(": ", 1)[-1] if ": " in str(err) else str(err)
        raise ValidationFailed(file, line if isinstance(line, int) and line > 0 else 1,
                               f"invalid TOON: {reason}") from None
    if not isinstance(data, dict):
        raise ValidationFailed(file, 1, "the state must be a TOON object (key: value lines)")
    try:
        state = msgspec.convert(data, WorkflowState)
    except msgspec.ValidationError as err:
        message = str(err)
        path = message.rpartition(" - at `$")[2].rstrip("`") if " - at `$" in message else ""
        reason = message.partition(" - at `$")[0]
        if path:
            reason = f"'{path.lstrip('.')}': {reason}"
        raise ValidationFailed(file, _line_of(text, path), reason) from None
    if state.spec_id != spec_id:
        raise ValidationFailed(file, _line_of(text, ".spec_id"),
                               f"spec_id must be '{spec_id}', the directory the state is in")
    for key in ("updated_at", "started_at", "completed_at"):
        value = getattr(state, key)
        if value is not None and parse_timestamp(value) != value:
            raise ValidationFailed(file, _line_of(text, f".{key}"),
                                   f"{key} must be a timestamp like 2026-01-24T10:00:00Z")
    return state


def _line_of(text: str, path: str) -> int:
    """The 1-based line of the key at msgspec path `path` (`.build_progress.notes`, `.history[2]`)."""
    lines = text.split("\n")
    start, depth = 0, 0
    found = 1
    for key, index in _PATH_PART.findall(path):
        if index:
            # a row of a tabular array, or an item of a list: the index-th line after the header
            row = start + int(index)
            if row < len(lines):
                found = row + 1
            break
        pattern = re.compile(rf"^{' ' * (2 * depth)}{re.escape(key)}(\[\d+\][^:]*)?:")
        for number in range(start, len(lines)):
            if pattern.match(lines[number]):
                found, start = number + 1, number + 1
                break
        else:
            break
        depth += 1
    return found

