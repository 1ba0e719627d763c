"""Requirement blocks: the reader archive and validate share (`requirement-blocks.js`).

A main spec's `## Requirements` section splits into raw `### Requirement:` blocks; a delta
spec splits into ADDED/MODIFIED/REMOVED/RENAMED plans (repeated sections merge, fences are
ignored, unpaired renames and orphaned requirements are reported). `structure_issues` is the
1.x main-spec structure check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specactor.domain.openspec.markdown import SCENARIO_HEADER, normalize_content
from specactor.domain.openspec.text import fence_mask, normalize_newlines, rx, trim, trim_end

REQUIREMENT_HEADER = rx(r"^###\s*Requirement:\s*(.+)\s*$", "i")
_REQUIREMENTS_SECTION = rx(r"^##\s+Requirements\s*$", "i")
_TOP_LEVEL = rx(r"^##\s+")
_SECTION = rx(r"^(##)\s+(.+)$")
_H3 = rx(r"^###\s+(.+?)\s*$")
_CLOSING_RUN = rx(r"[ \t]+#+[ \t]*$")
_FOLD_SPACE = rx(r"\s+")
_REMOVED_BULLET = rx(r"^\s*[-*+]\s*`?###\s*Requirement:\s*(.+?)`?\s*$")
_FROM = rx(r"^\s*[-*+]?\s*FROM:\s*`?###\s*Requirement:\s*(.+?)`?\s*$")
_TO = rx(r"^\s*[-*+]?\s*TO:\s*`?###\s*Requirement:\s*(.+?)`?\s*$")
_SCENARIO_PREFIX = rx(r"^Scenario:\s*", "i")
DELTA_TITLES = ("ADDED Requirements", "MODIFIED Requirements", "REMOVED Requirements", "RENAMED Requirements")
_DELTA_FOLDED = frozenset(t.lower() for t in DELTA_TITLES)


def normalize_name(name: str) -> str:
    """A requirement name without a closing `###` run, trimmed (`normalizeRequirementName`)."""
    return trim(_CLOSING_RUN.sub("", name, count=1))


def fold_name(name: str) -> str:
    """Case- and space-insensitive fold, used only to spot near-miss typos."""
    return _FOLD_SPACE.sub(" ", normalize_name(name).lower())


@dataclass(frozen=True)
class Block:
    header_line: str
    name: str
    raw: str


@dataclass
class RequirementsParts:
    before: str
    header_line: str
    preamble: str
    blocks: list[Block]
    after: str


def extract_requirements_section(content: str) -> RequirementsParts:
    """Split a main spec around its `## Requirements` section (`extractRequirementsSection`)."""
    lines = normalize_content(content).split("\n")
    mask = fence_mask(lines)
    # Every pattern here starts with "##": lines that do not are passed over without a regex.
    heads = [i for i, line in enumerate(lines) if line.startswith("##") and not mask[i]]
    start = next((i for i in heads if _REQUIREMENTS_SECTION.match(lines[i])), -1)
    if start == -1:
        before = trim_end(content)
        return RequirementsParts(before + "\n\n" if before else "", "## Requirements", "", [], "\n")
    end = next((i for i in heads if i > start and _TOP_LEVEL.match(lines[i])), len(lines))
    body = lines[start + 1:end]
    # The body holds no top-level header (`end` is the first): each requirement header opens a
    # block that runs to the next one.
    reqs = [i - start - 1 for i in heads if start < i < end and REQUIREMENT_HEADER.match(lines[i])]
    preamble = body[:reqs[0]] if reqs else body
    blocks = []
    for k, first in enumerate(reqs):
        header = body[first]
        m = REQUIREMENT_HEADER.match(header)
        assert m is not None
        stop = reqs[k + 1] if k + 1 < len(reqs) else len(body)
        blocks.append(Block(header, normalize_name(m.group(1)), trim_end("\n".join(body[first:stop]))))
    before = "\n".join(lines[:start])
    after = "\n".join(lines[end:])
    return RequirementsParts(before + "\n" if trim_end(before) else before, lines[start],
                             trim_end("\n".join(preamble)), blocks, after if after.startswith("\n") else "\n" + after)


@dataclass(frozen=True)
class Rename:
    from_: str
    to: str


@dataclass(frozen=True)
class Unpaired:
    side: str  # "FROM" | "TO"
    name: str
    line: int


@dataclass(frozen=True)
class Skipped:
    header: str
    section: str
    line: int


@dataclass(frozen=True)
class Orphan:
    name: str
    section: str | None
    line: int


@dataclass
class DeltaPlan:
    added: list[Block] = field(default_factory=list)
    modified: list[Block] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    removed_blocks: list[Block] = field(default_factory=list)
    renamed: list[Rename] = field(default_factory=list)
    unpaired: list[Unpaired] = field(default_factory=list)
    orphans: list[Orphan] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    presence: dict[str, bool] = field(default_factory=dict)

    @property
    def has_sections(self) -> bool:
        return any(self.presence.values())

    @property
    def entry_count(self) -> int:
        return len(self.added) + len(self.modified) + len(self.removed) + len(self.renamed)


@dataclass
class _Body:
    lines: list[str]
    mask: list[bool]
    start_line: int  # 1-based line number of the body's first line


def parse_delta(content: str) -> DeltaPlan:
    """`parseDeltaSpec`: the operations a delta spec file asks for."""
    lines = normalize_content(content).split("\n")
    mask = fence_mask(lines)
    heads = [(i, trim(m.group(2))) for i, line in enumerate(lines)
             if not mask[i] and line.startswith("##") and (m := _SECTION.match(line))]
    sections = [(title, _Body(lines[i + 1:(heads[n + 1][0] if n + 1 < len(heads) else len(lines))],
                              mask[i + 1:(heads[n + 1][0] if n + 1 < len(heads) else len(lines))], i + 2))
                for n, (i, title) in enumerate(heads)]

    def lookup(desired: str) -> tuple[str, list[_Body], bool]:
        matches = [(t, b) for t, b in sections if t.lower() == desired.lower()]
        return (matches[0][0] if matches else desired), [b for _, b in matches], bool(matches)

    plan = DeltaPlan()
    skipped: list[Skipped] = []
    added_title, added, has_added = lookup("ADDED Requirements")
    modified_title, modified, has_modified = lookup("MODIFIED Requirements")
    _, removed, has_removed = lookup("REMOVED Requirements")
    _, renamed, has_renamed = lookup("RENAMED Requirements")
    plan.added = [b for body in added for b in _blocks(body, added_title, skipped)]
    plan.modified = [b for body in modified for b in _blocks(body, modified_title, skipped)]
    plan.removed = [n for body in removed for n in _removed_names(body)]
    plan.removed_blocks = [b for body in removed for b in _blocks(body, None, None)]
    unpaired: list[Unpaired] = []
    plan.renamed = [r for body in renamed for r in _renames(body, unpaired)]
    plan.unpaired = sorted(unpaired, key=lambda u: u.line)
    plan.skipped = sorted(skipped, key=lambda s: s.line)
    plan.orphans = _orphans(lines, mask)
    plan.presence = {"added": has_added, "modified": has_modified, "removed": has_removed, "renamed": has_renamed}
    return plan


def _blocks(body: _Body, section: str | None, sink: list[Skipped] | None) -> list[Block]:
    lines, mask = body.lines, body.mask

    def is_req(i: int) -> bool:
        return not mask[i] and lines[i].startswith("#") and REQUIREMENT_HEADER.match(lines[i]) is not None

    def record(i: int) -> None:
        if sink is None or section is None or mask[i] or not lines[i].startswith("###"):
            return
        m = _H3.match(lines[i])
        if m and not REQUIREMENT_HEADER.match(lines[i]):
            sink.append(Skipped(trim(m.group(1)), section, body.start_line + i))

    blocks = []
    i = 0
    while i < len(lines):
        while i < len(lines) and not is_req(i):
            record(i)
            i += 1
        if i >= len(lines):
            break
        header = lines[i]
        m = REQUIREMENT_HEADER.match(header)
        assert m is not None
        buf = [header]
        i += 1
        while i < len(lines) and not is_req(i) and (mask[i] or not _TOP_LEVEL.match(lines[i])):
            record(i)
            buf.append(lines[i])
            i += 1
        blocks.append(Block(header, normalize_name(m.group(1)), trim_end("\n".join(buf))))
    return blocks


def _removed_names(body: _Body) -> list[str]:
    names = []
    for i, line in enumerate(body.lines):
        if body.mask[i]:
            continue
        m = REQUIREMENT_HEADER.match(line) or _REMOVED_BULLET.match(line)
        if m:
            names.append(normalize_name(m.group(1)))
    return names


def _renames(body: _Body, unpaired: list[Unpaired]) -> list[Rename]:
    pairs = []
    pending: tuple[str, int] | None = None
    for i, line in enumerate(body.lines):
        if body.mask[i]:
            continue
        m_from = _FROM.match(line)
        if m_from:
            if pending:
                unpaired.append(Unpaired("FROM", *pending))
            pending = (normalize_name(m_from.group(1)), body.start_line + i)
            continue
        m_to = _TO.match(line)
        if m_to:
            to = normalize_name(m_to.group(1))
            if pending is None:
                unpaired.append(Unpaired("TO", to, body.start_line + i))
                continue
            pairs.append(Rename(pending[0], to))
            pending = None
    if pending:
        unpaired.append(Unpaired("FROM", *pending))
    return pairs


def _orphans(lines: list[str], mask: list[bool]) -> list[Orphan]:
    out = []
    section: str | None = None
    for i, line in enumerate(lines):
        if mask[i] or not line.startswith("#"):
            continue
        m = _SECTION.match(line)
        if m:
            section = trim(m.group(2))
            continue
        if section is not None and section.lower() in _DELTA_FOLDED:
            continue
        h = REQUIREMENT_HEADER.match(line)
        if h:
            out.append(Orphan(normalize_name(h.group(1)), section, i + 1))
    return out


# ---------------------------------------------------------------------- scenarios


def _scenario_name(line: str) -> str:
    name = SCENARIO_HEADER.sub("", line, count=1)
    name = _CLOSING_RUN.sub("", name, count=1)
    return trim(_SCENARIO_PREFIX.sub("", name, count=1))


def scenario_names(raw: str) -> list[str]:
    lines = normalize_newlines(raw).split("\n")
    mask = fence_mask(lines)
    return [_scenario_name(line) for i, line in enumerate(lines) if not mask[i] and SCENARIO_HEADER.match(line)]


@dataclass(frozen=True)
class ScenarioDiff:
    missing: list[str]
    added: list[str]
    current_count: int
    incoming_count: int


def diff_scenarios(current: Block, incoming: Block) -> ScenarioDiff:
    """Scenario names one block has and the other lacks, counting duplicates (`diffScenarioNames`)."""
    cur, inc = scenario_names(current.raw), scenario_names(incoming.raw)

    def unmatched(names: list[str], against: list[str]) -> list[str]:
        remaining: dict[str, int] = {}
        for n in against:
            remaining[n] = remaining.get(n, 0) + 1
        out = []
        for n in names:
            if remaining.get(n, 0) > 0:
                remaining[n] -= 1
            else:
                out.append(n)
        return out

    return ScenarioDiff(unmatched(cur, inc), unmatched(inc, cur), len(cur), len(inc))


def describe_balance(diff: ScenarioDiff) -> str:
    def count(n: int) -> str:
        return f"{n} {'scenario' if n == 1 else 'scenarios'}"

    scale = (f"The modified block has {count(diff.incoming_count)}; "
             f"the current spec has {count(diff.current_count)}.")
    if not diff.added:
        return f"{scale} It adds none."
    listed = ", ".join(f'"{n}"' for n in diff.added[:3])
    rest = len(diff.added) - 3
    names = f"{listed} and {rest} more" if rest > 0 else listed
    return f"{scale} It adds {count(len(diff.added))} not in the current spec: {names}."


# ---------------------------------------------------------------------- main spec structure

_DELTA_HEADER = rx(r"^##\s+(ADDED|MODIFIED|REMOVED|RENAMED)\s+Requirements\s*$", "i")
_STRUCT_REQUIREMENT = rx(r"^###\s+Requirement:\s*(.+)\s*$", "i")


@dataclass(frozen=True)
class StructureIssue:
    line: int
    message: str


def structure_issues(content: str) -> list[StructureIssue]:
    """`findMainSpecStructureIssues`: delta headers, stray and duplicate requirement headers."""
    lines = normalize_newlines(content).split("\n")
    mask = fence_mask(lines)
    heads = [i for i, line in enumerate(lines) if line.startswith("##") and not mask[i]]  # all the checks can match
    start = next((i for i in heads if _REQUIREMENTS_SECTION.match(lines[i])), -1)
    end = len(lines)
    if start != -1:
        end = next((i for i in heads if i > start and _TOP_LEVEL.match(lines[i])), len(lines))
    issues = []
    seen: dict[str, int] = {}
    for i in heads:
        line = lines[i]
        stripped = trim(line)
        if _DELTA_HEADER.match(line):
            issues.append(StructureIssue(i + 1, (
                f'Main spec contains delta header "{stripped}". Delta headers are only valid inside '
                "openspec/changes/<name>/specs/<capability-path>/spec.md and truncate the parsed "
                "## Requirements section.")))
            continue
        m = _STRUCT_REQUIREMENT.match(line)
        if not m:
            continue
        if not (start != -1 and start < i < end):
            issues.append(StructureIssue(i + 1, (
                f'Requirement header "{stripped}" appears outside the main ## Requirements section. '
                "Main specs only parse requirements inside that section, so this requirement is "
                "currently invisible to validate, list, and archive.")))
            continue
        name = normalize_name(m.group(1))
        if name in seen:
            issues.append(StructureIssue(i + 1, (
                f'Requirement header "{stripped}" duplicates the requirement declared on line {seen[name]}. '
                "Requirement names must be unique so spec updates cannot discard one block while "
                "updating another.")))
        else:
            seen[name] = i + 1
    return issues
