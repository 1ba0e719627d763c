"""Units: the pieces a workspace's graph is projected in, named by the files they come from.

`openspec:spec:<cap>` is `openspec/specs/<cap>/spec.md`; `openspec:change:<name>` is
`openspec/changes/<name>/` plus every `openspec/changes/archive/[<YYYY-MM-DD>-]<name>/`;
`airsspec:spec:<id>` is `.airsspec/specs/<id>/`. Dot-named folders are skipped, as the CLIs do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from specactor.domain.airsspec import layout
from specactor.domain.airsspec.ids import is_spec_id
from specactor.domain.graph.reader import Reader

OPENSPEC_SPEC: Final = "openspec:spec:"
OPENSPEC_CHANGE: Final = "openspec:change:"
AIRSSPEC_SPEC: Final = "airsspec:spec:"
SPECS: Final = "openspec/specs"
CHANGES: Final = "openspec/changes"
ARCHIVE: Final = "openspec/changes/archive"
AIRS_SPECS: Final = layout.SPECS
_DATED: Final = re.compile(r"\A([0-9]{4}-[0-9]{2}-[0-9]{2})-(.+)\Z", re.S)


def archived_name(folder: str) -> tuple[str, str | None]:
    """(change name, archive date or None) of a folder under `changes/archive/`."""
    match = _DATED.match(folder)
    return (match.group(2), match.group(1)) if match else (folder, None)


def is_capability(cap: str) -> bool:
    return all(seg and not seg.startswith(".") for seg in cap.split("/"))


def is_active_change(name: str) -> bool:
    """A name an active change folder may have (`archive/` is the archive, dot-names are hidden)."""
    return bool(name) and "/" not in name and name != "archive" and not name.startswith(".")


def parse_unit(unit: str) -> tuple[str, str] | None:
    """(prefix, what it names) of a well-formed unit id, else None."""
    for prefix in (OPENSPEC_SPEC, OPENSPEC_CHANGE, AIRSSPEC_SPEC):
        if unit.startswith(prefix):
            ident = unit[len(prefix):]
            ok = (is_capability(ident) if prefix == OPENSPEC_SPEC
                  else bool(ident) and "/" not in ident if prefix == OPENSPEC_CHANGE
                  else is_spec_id(ident))
            return (prefix, ident) if ok else None
    return None


def _unit_of(parts: list[str]) -> str | None:
    if len(parts) >= 3 and parts[0] == "openspec":
        if parts[1] == "specs":
            rest = parts[2:]
            # a path not ending in spec.md may be a capability's folder (removed whole): name it too
            cap = "/".join(rest[:-1] if rest[-1] == "spec.md" and len(rest) > 1 else rest)
            return OPENSPEC_SPEC + cap if is_capability(cap) else None
        if parts[1] == "changes":
            if parts[2] == "archive":
                if len(parts) >= 4 and not parts[3].startswith("."):
                    return OPENSPEC_CHANGE + archived_name(parts[3])[0]
                return None
            return OPENSPEC_CHANGE + parts[2] if is_active_change(parts[2]) else None
    if len(parts) >= 3 and parts[0] == layout.AIRSSPEC and parts[1] == "specs" and is_spec_id(parts[2]):
        return AIRSSPEC_SPEC + parts[2]
    return None


def units_of(paths: Iterable[str]) -> set[str]:
    """The units a write or removal of these files (or of a unit's own folder) touches.

    Paths outside the mirrored trees (`openspec/project.md`, `.airsspec/config.toml`, …) touch
    none; so do folders above units (`openspec/changes/archive`): the change feed names files.
    """
    found: set[str] = set()
    for path in paths:
        unit = _unit_of([p for p in path.split("/") if p])
        if unit is not None:
            found.add(unit)
    return found


def capabilities(reader: Reader, root: str = SPECS) -> list[str]:
    """Every `spec.md` at depth >= 1 under `root` (main specs, or a change's `specs/`), as capability ids."""
    found: list[str] = []

    def walk(rel: str, segments: tuple[str, ...]) -> None:
        for name, is_dir in reader.listdir(rel) or []:
            if name.startswith("."):
                continue
            if is_dir:
                walk(f"{rel}/{name}", (*segments, name))
            elif name == "spec.md" and segments:
                found.append("/".join(segments))

    walk(root, ())
    return found


def active_changes(reader: Reader) -> list[str]:
    return [name for name, is_dir in reader.listdir(CHANGES) or [] if is_dir and is_active_change(name)]


def archived_folders(reader: Reader) -> dict[str, list[str]]:
    """Change name -> its folders under `changes/archive/`, in name order."""
    out: dict[str, list[str]] = {}
    for folder, is_dir in reader.listdir(ARCHIVE) or []:
        if is_dir and not folder.startswith("."):
            out.setdefault(archived_name(folder)[0], []).append(folder)
    return out


def airsspec_specs(reader: Reader) -> list[str]:
    return [name for name, is_dir in reader.listdir(AIRS_SPECS) or [] if is_dir and is_spec_id(name)]


def discover_units(reader: Reader) -> set[str]:
    """Every unit present in the workspace."""
    units = {OPENSPEC_SPEC + cap for cap in capabilities(reader)}
    units.update(OPENSPEC_CHANGE + name for name in active_changes(reader))
    units.update(OPENSPEC_CHANGE + name for name in archived_folders(reader))
    units.update(AIRSSPEC_SPEC + spec_id for spec_id in airsspec_specs(reader))
    return units
