"""Reading a change for `show`: its proposal, its deltas, and whether it is really a change.

`parse_change` ports `ChangeParser.parseChangeWithDeltas`: deltas come from the delta spec
files when any carries a delta section (the same reader archive applies), otherwise from the
"What Changes" bullets. `nested_change` ports the 1.13 check for a folder that only wraps
change directories.
"""

from __future__ import annotations

from specactor.domain.openspec.blocks import Block, DeltaPlan
from specactor.domain.openspec.markdown import (
    Section,
    SpecFormatError,
    find_section,
    normalize_content,
    parse_sections,
    section_requirements,
)
from specactor.domain.openspec.model import DeltaOut, RenameOut, RequirementOut, ScenarioOut
from specactor.domain.openspec.source import Source, discover_spec_files, has_any_file_under, join
from specactor.domain.openspec.text import rx, trim

_PROSE_DELTA = rx(r"^\s*-\s*\*\*([^*:]+)(?::\*\*|\*\*:)\s*(.+)$")
_TITLE = rx(r"^#\s+(?:Change:\s+)?(.+)$", "im")
_HEADER_PREFIX = rx(r"^###\s*")
_MARKERS = (".openspec.yaml", "proposal.md", "tasks.md", "design.md")


def extract_title(content: str, change: str) -> str:
    m = _TITLE.search(content)
    title = trim(m.group(1)) if m else ""
    return title if title and title.lower() != "proposal" else change


def _requirements(blocks: list[Block]) -> list[RequirementOut]:
    out = []
    for block in blocks:
        header, *body = block.raw.split("\n")
        title = trim(_HEADER_PREFIX.sub("", header, count=1))
        lines = normalize_content("\n".join([f"### {title}", *body])).split("\n")
        sections = parse_sections(lines)
        if not sections:
            continue
        parent = Section(2, "", "", [sections[0]])
        for req in section_requirements(parent, canonical_only=True):
            out.append(RequirementOut(req.text, [ScenarioOut(s.rawText) for s in req.scenarios]))
    return out


def spec_deltas(spec: str, plan: DeltaPlan) -> list[DeltaOut]:
    """The deltas one delta file contributes, in the CLI's order (`parseSpecDeltas`)."""
    out: list[DeltaOut] = []
    for op, verb, blocks in (("ADDED", "Add", plan.added), ("MODIFIED", "Modify", plan.modified)):
        for req in _requirements(blocks):
            out.append(DeltaOut(spec, op, f"{verb} requirement: {req.text}", req, [req]))  # type: ignore[arg-type]
    pool = list(plan.removed_blocks)
    removed = []
    for name in plan.removed:
        index = next((i for i, b in enumerate(pool) if b.name == name), -1)
        header = f"### Requirement: {name}"
        removed.append(pool.pop(index) if index != -1 else Block(header, name, header))
    for req in _requirements(removed):
        out.append(DeltaOut(spec, "REMOVED", f"Remove requirement: {req.text}", req, [req]))
    for r in plan.renamed:
        out.append(DeltaOut(spec, "RENAMED", f'Rename requirement from "{r.from_}" to "{r.to}"',
                            rename=RenameOut(r.from_, r.to)))
    return out


def prose_deltas(what_changes: str) -> list[DeltaOut]:
    """`parseDeltas`: `- **spec:** description` bullets, the operation guessed from the verb."""
    out = []
    for line in what_changes.split("\n"):
        m = _PROSE_DELTA.match(line)
        if not m:
            continue
        spec, description = trim(m.group(1)), trim(m.group(2))
        lower = description.lower()
        op = "MODIFIED"
        if rx(r"\brename(s|d|ing)?\b").search(lower) or rx(r"\brenamed\s+(to|from)\b").search(lower):
            op = "RENAMED"
        elif (rx(r"\badd(s|ed|ing)?\b").search(lower) or rx(r"\bcreate(s|d|ing)?\b").search(lower)
              or rx(r"\bnew\b").search(lower)):
            op = "ADDED"
        elif rx(r"\bremove(s|d|ing)?\b").search(lower) or rx(r"\bdelete(s|d|ing)?\b").search(lower):
            op = "REMOVED"
        out.append(DeltaOut(spec, op, description))  # type: ignore[arg-type]
    return out


def parse_change(src: Source, change: str, proposal: str, plans: list[tuple[str, DeltaPlan | None]]) -> list[DeltaOut]:
    """The deltas `show <change> --json` reports.

    Raises:
        SpecFormatError: "Change must have a Why section" / "... a What Changes section".
    """
    sections = parse_sections(normalize_content(proposal).split("\n"))
    why = find_section(sections, "Why")
    what = find_section(sections, "What Changes")
    if not (why and why.content):
        raise SpecFormatError("Change must have a Why section")
    if not (what and what.content):
        raise SpecFormatError("Change must have a What Changes section")
    deltas: list[DeltaOut] = []
    has_sections = False
    for spec_id, plan in plans:
        if plan is None:
            continue
        has_sections = has_sections or plan.has_sections
        deltas += spec_deltas(spec_id, plan)
    return deltas if has_sections else prose_deltas(trim(what.content))


# ---------------------------------------------------------------------- nested change folders


def _looks_like_change(src: Source, directory: str) -> bool:
    for entry in src.entries(directory) or []:  # the listing answers for plain files without a stat
        if entry.name in _MARKERS and (entry.is_file or (entry.is_link and src.kind(join(directory, entry.name))
                                                         == "file")):
            return True
    return has_any_file_under(src, join(directory, "specs"))


def nested_change(src: Source, name: str) -> list[str] | None:
    """The change directories a folder under changes/ wraps, when it is only such a wrapper."""
    if name == "archive" or name.startswith("."):
        return None
    directory = join("changes", name)
    if _looks_like_change(src, directory):
        return None
    entries = src.entries(directory) or []
    if any(not e.name.startswith(".") and not e.is_dir for e in entries):
        return None
    found: list[str] = []

    def collect(d: str, prefix: str, depth: int) -> None:
        if depth > 3:
            return
        for e in src.entries(d) or []:
            if not e.is_dir or e.name.startswith("."):
                continue
            child, ident = join(d, e.name), f"{prefix}/{e.name}"
            if _looks_like_change(src, child):
                found.append(ident)
            else:
                collect(child, ident, depth + 1)

    collect(directory, name, 1)
    return sorted(found) or None


def describe_nested(name: str, nested: list[str]) -> str:
    listed = ", ".join(f"openspec/changes/{n}/" for n in nested)
    example = nested[0].replace("/", "-")
    return (f'"{name}" is not a change: it is a folder wrapping {listed}. A change must be a directory directly under '
            "openspec/changes/, so those nested directories are invisible to OpenSpec while the folder around them is "
            "reported as a change. Nested paths are supported under openspec/specs/ only. Rename each nested change "
            f'to a flat name (for example "{example}").')


def delta_files(src: Source, change: str) -> list[tuple[str, str]]:
    return discover_spec_files(src, join("changes", change, "specs"))
