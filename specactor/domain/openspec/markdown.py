"""The markdown readers the OpenSpec CLI uses for specs: sections, requirements, scenarios.

A faithful port of `MarkdownParser` and the shared requirement-text helpers of
`@fission-ai/openspec` 1.13.2: header sections nest by level, fenced code is ignored, a
requirement's text is its body before the first header (metadata lines skipped), and a scenario
is any `####` child with a non-empty body. `parse_spec` raises `SpecFormatError` with the CLI's
own messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from specactor.domain.openspec.text import fence_mask, normalize_newlines, rx, strip_bom, trim

_HEADER = rx(r"^(#{1,6})\s+(.+)$")
_HEADER_START = rx(r"^(#{1,6})\s+")
_METADATA_LINE = rx(r"^\*\*[^*]+\*\*:")
_ANY_HEADER = rx(r"^#{1,6}\s")
SCENARIO_HEADER = rx(r"^####\s+")
_SCENARIO_BODY_END = rx(r"^#{1,4}\s")
_SHALL_MUST = rx(r"\b(SHALL|MUST)\b")


class SpecFormatError(ValueError):
    """A document the CLI's parser refuses (a missing Purpose, Requirements, Why, ...)."""


class Scenario(msgspec.Struct, frozen=True):
    rawText: str


class Requirement(msgspec.Struct, frozen=True):
    text: str
    scenarios: list[Scenario]


class SpecMetadata(msgspec.Struct, frozen=True):
    version: str = "1.0.0"
    format: str = "openspec"


@dataclass(frozen=True)
class Spec:
    name: str
    overview: str
    requirements: list[Requirement]


@dataclass
class Section:
    level: int
    title: str
    content: str
    children: list[Section] = field(default_factory=list)


def normalize_content(content: str) -> str:
    return normalize_newlines(strip_bom(content))


def contains_shall_or_must(text: str) -> bool:
    return _SHALL_MUST.search(text) is not None


def has_scenario_body(body: str) -> bool:
    return len(trim(body)) > 0


def parse_sections(lines: list[str], mask: list[bool] | None = None) -> list[Section]:
    """Header sections as a tree (`MarkdownParser.parseSections`)."""
    mask = fence_mask(lines) if mask is None else mask
    headers: list[tuple[int, int, str]] = []
    for i, line in enumerate(lines):
        if mask[i] or not line.startswith("#"):
            continue
        m = _HEADER.match(line)
        if m:
            headers.append((i, len(m.group(1)), trim(m.group(2))))
    roots: list[Section] = []
    stack: list[Section] = []
    for n, (i, level, title) in enumerate(headers):
        end = len(lines)
        for j, next_level, _ in headers[n + 1:]:
            if next_level <= level:
                end = j
                break
        # Content stops at the next header of this level or above; headers the regex of the
        # boundary sees but the section regex does not (`## ` alone) never end a section.
        end = _content_end(lines, mask, i + 1, level, end)
        section = Section(level, title, trim("\n".join(lines[i + 1:end])))
        while stack and stack[-1].level >= level:
            stack.pop()
        (stack[-1].children if stack else roots).append(section)
        stack.append(section)
    return roots


def _content_end(lines: list[str], mask: list[bool], start: int, level: int, limit: int) -> int:
    """`getContentUntilNextHeader`: the boundary regex is looser than the header regex."""
    for i in range(start, limit):
        if mask[i] or not lines[i].startswith("#"):
            continue
        m = _HEADER_START.match(lines[i])
        if m and len(m.group(1)) <= level:
            return i
    return limit


def find_section(sections: list[Section], title: str) -> Section | None:
    wanted = title.lower()
    for section in sections:
        if section.title.lower() == wanted:
            return section
        child = find_section(section.children, title)
        if child is not None:
            return child
    return None


def extract_requirement_body(body_lines: list[str]) -> str:
    """The requirement statement: body lines before the first header, metadata only as a fallback."""
    mask = fence_mask(body_lines)
    captured: list[str] = []
    metadata: list[str] = []
    for i, line in enumerate(body_lines):
        if mask[i]:
            continue
        if line.startswith("#") and _ANY_HEADER.match(line):
            break
        stripped = trim(line)
        if not stripped:
            continue
        if _METADATA_LINE.match(stripped):
            metadata.append(stripped)
            continue
        captured.append(stripped)
    return "\n".join(captured) if captured else "\n".join(metadata)


def extract_requirement_text(header_title: str, body_lines: list[str]) -> str:
    return extract_requirement_body(body_lines) or trim(header_title)


def _scenario_bodies(body_lines: list[str]) -> list[str]:
    mask = fence_mask(body_lines)
    bodies = []
    for i, line in enumerate(body_lines):
        if mask[i] or not SCENARIO_HEADER.match(line):
            continue
        end = i + 1
        while end < len(body_lines) and (mask[end] or not _SCENARIO_BODY_END.match(body_lines[end])):
            end += 1
        bodies.append("\n".join(body_lines[i + 1:end]))
    return bodies


def count_scenarios(body_lines: list[str]) -> int:
    return sum(1 for body in _scenario_bodies(body_lines) if has_scenario_body(body))


def count_empty_scenarios(body_lines: list[str]) -> int:
    return sum(1 for body in _scenario_bodies(body_lines) if not has_scenario_body(body))


def section_requirements(section: Section, *, canonical_only: bool = False) -> list[Requirement]:
    """`parseRequirements`: each child header is a requirement (only `Requirement:` ones for deltas)."""
    out = []
    for child in section.children:
        if canonical_only and not rx(r"^Requirement:\s*\S", "i").match(trim(child.title)):
            continue
        text = extract_requirement_text(child.title, child.content.split("\n"))
        scenarios = [Scenario(s.content) for s in child.children if has_scenario_body(s.content)]
        out.append(Requirement(text, scenarios))
    return out


def parse_spec(name: str, content: str) -> Spec:
    """`MarkdownParser.parseSpec`.

    Raises:
        SpecFormatError: "Spec must have a Purpose section" / "... a Requirements section".
    """
    lines = normalize_content(content).split("\n")
    sections = parse_sections(lines)
    purpose_section = find_section(sections, "Purpose")
    purpose = purpose_section.content if purpose_section else ""
    requirements = find_section(sections, "Requirements")
    if not purpose:
        raise SpecFormatError("Spec must have a Purpose section")
    if requirements is None:
        raise SpecFormatError("Spec must have a Requirements section")
    return Spec(name, trim(purpose), section_requirements(requirements))
