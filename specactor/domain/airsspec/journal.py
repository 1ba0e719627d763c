"""The change journal: a generation number and the spec ids the last writes touched.

Every write transaction (in any process) advances it under the workspace lock, so a reader that
remembers the generation it last saw learns which specs to re-read from one small file instead
of statting every spec. A reader too far behind (or a journal that is missing or unreadable)
falls back to a full scan.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec
import toons

KEEP: Final = 256  # changes remembered; a reader more than this many writes behind rescans


class Change(msgspec.Struct, frozen=True):
    generation: int
    spec_id: str


class Journal(msgspec.Struct, frozen=True):
    generation: int = 0
    changes: tuple[Change, ...] = ()

    def advance(self, spec_ids: Iterable[str]) -> Journal:
        generation = self.generation + 1
        changes = (*self.changes, *(Change(generation, s) for s in dict.fromkeys(spec_ids)))
        return Journal(generation, changes[-KEEP:])

    def changed_since(self, seen: int) -> set[str] | None:
        """The ids written after generation `seen`, or None when the journal cannot tell."""
        if seen > self.generation:
            return None
        if seen == self.generation:
            return set()
        # the oldest generation kept may have lost some of its ids to the cut: trust only later ones
        if not self.changes or self.changes[0].generation > seen:
            return None
        return {c.spec_id for c in self.changes if c.generation > seen}


# The last journal rendered or parsed, by its bytes: every write reads the journal the previous
# write rendered, and TOON parsing is the larger part of advancing it (0.15 ms at KEEP entries).
_last: tuple[bytes, Journal] | None = None


# A spec id's cell in the journal's table, as TOON writes it (quoted when it must be), asked of
# `toons` once per id: the table is then joined from cached cells, 0.05 ms where rendering it all
# again on every write took 0.1 ms at KEEP rows. Bounded: cleared past a few journals' worth.
_cells: dict[str, str] = {}
_TABLE = "changes[{n}]{{generation,spec_id}}:"


def _cell(spec_id: str) -> str:
    cell = _cells.get(spec_id)
    if cell is None:
        row = str(toons.dumps({"c": [{"g": 0, "s": spec_id}]})).split("\n", 1)[1]  # '  0,<cell>'
        cell = row[len("  0,"):]
        if len(_cells) >= 4 * KEEP:
            _cells.clear()
        _cells[spec_id] = cell
    return cell


def render(journal: Journal) -> bytes:
    """The journal as TOON: `toons.dumps` of it, byte for byte (the table joined from cached cells)."""
    global _last
    if journal.changes:
        lines = [f"generation: {journal.generation}", _TABLE.format(n=len(journal.changes)),
                 *[f"  {c.generation},{_cell(c.spec_id)}" for c in journal.changes]]
        data = ("\n".join(lines) + "\n").encode()
    else:
        data = (str(toons.dumps(msgspec.to_builtins(journal))) + "\n").encode()
    _last = (data, journal)
    return data


def parse(data: bytes | None) -> Journal | None:
    """The journal in `data`, or None when it is missing or unreadable (the reader then rescans)."""
    global _last
    if data is None:
        return None
    last = _last
    if last is not None and last[0] == data:
        return last[1]  # Journal is frozen: sharing it is safe
    try:
        parsed = msgspec.convert(toons.loads(data.decode()), Journal)
    except (UnicodeDecodeError, toons.ToonDecodeError, msgspec.ValidationError):
        return None
    _last = (data, parsed)
    return parsed
