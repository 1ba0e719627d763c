"""Main-spec validation, with the levels and messages of `openspec validate` 1.13.2.

`validate_spec_content` is `Validator.validateSpecContent`: the parser's refusals become one
ERROR on `file`; then the schema checks (at least one requirement, each with a scenario), the
structure check, the Purpose rules (placeholder, too brief), long requirements, and the SHALL/MUST
guidance per requirement block.
"""

from __future__ import annotations

import unicodedata

from specactor.domain.openspec.blocks import extract_requirements_section, structure_issues
from specactor.domain.openspec.markdown import (
    SpecFormatError,
    contains_shall_or_must,
    extract_requirement_body,
    parse_spec,
)
from specactor.domain.openspec.merge import PURPOSE_PLACEHOLDER_PREFIX, PURPOSE_PLACEHOLDER_SUFFIX
from specactor.domain.openspec.model import Issue, Level
from specactor.domain.openspec.text import fence_mask, normalize_newlines, rx, trim

MIN_PURPOSE_LENGTH = 50
MAX_REQUIREMENT_TEXT_LENGTH = 500
REQUIREMENT_NO_SCENARIOS = "Requirement must have at least one scenario"
SPEC_NO_REQUIREMENTS = "Spec must have at least one requirement"
PURPOSE_TOO_BRIEF = f"Purpose section is too brief (less than {MIN_PURPOSE_LENGTH} characters)"
PURPOSE_IS_PLACEHOLDER = (
    "Purpose section is still a placeholder rather than a Purpose anyone wrote (the sentence `openspec archive` "
    "writes for a new capability, or a `TBD`/`TODO` marker left in its place). Replace it with what this "
    "capability is for, editing the main spec directly: a `## Purpose` in a delta is read only when the "
    "capability is created, so it cannot replace this one.")
REQUIREMENT_TOO_LONG = (f"Requirement text is very long (>{MAX_REQUIREMENT_TEXT_LENGTH} characters). "
                        "Consider breaking it down.")
GUIDE_SCENARIO_FORMAT = ("Scenarios must use level-4 headers. Convert bullet lists into:\n#### Scenario: Short name\n"
                         "- **WHEN** ...\n- **THEN** ...\n- **AND** ...")
GUIDE_MISSING_SPEC_SECTIONS = (
    'Missing required sections. Expected headers: "## Purpose" and "## Requirements". Example:\n## Purpose\n'
    "[brief purpose]\n\n## Requirements\n### Requirement: Clear requirement statement\nUsers SHALL ...\n\n"
    "#### Scenario: Descriptive name\n- **WHEN** ...\n- **THEN** ...")
_PURPOSE_HEADER = rx(r"^ {0,3}##(?!#)[ \t]+Purpose[ \t]*$", "i")
_TOP_HEADER = rx(r"^ {0,3}#{1,2}(?!#)[ \t]+")
_MARKER_PUNCTUATION = ":-\u2013\u2014.,;()[]{}"


def js_length(text: str) -> int:
    """`String.prototype.length`: UTF-16 code units (an ASCII text's length at once; a scan of the
    code points cost ~15 us a requirement, twice per rebuilt spec's requirement in an archive)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def issue(level: Level, path: str, message: str, line: int | None = None) -> Issue:
    return Issue(level, path, message) if line is None else Issue(level, path, message, line)


def missing_keyword_message(prefix: str, name: str, guidance: bool = False) -> str:
    """`buildMissingShallOrMustMessage`."""
    base = f"{prefix} {'should' if guidance else 'must'} contain SHALL or MUST"
    suffix = " (RFC 2119 best practice for English specs)" if guidance else ""
    if contains_shall_or_must(name):
        return (f"{base} in the requirement body, not only in the header. Move the SHALL/MUST statement to the "
                f'line immediately after the "### Requirement: ..." header.{suffix}')
    return f"{base}{suffix}"


def enrich(message: str) -> str:
    """`enrichTopLevelError`: the parser's refusals, with the CLI's guidance appended."""
    msg = trim(message)
    if "Spec must have a Purpose section" in msg or "Spec must have a Requirements section" in msg:
        return f"{msg}. {GUIDE_MISSING_SPEC_SECTIONS}"
    if "Change must have a Why section" in msg or "Change must have a What Changes section" in msg:
        return (f"{msg}. Missing required sections. Expected headers: \"## Why\" and \"## What Changes\". "
                "Ensure deltas are documented in specs/ using delta headers.")
    return msg


def validate_spec_content(name: str, content: str) -> list[Issue]:
    """Every issue `openspec validate <spec>` reports for this spec text."""
    try:
        spec = parse_spec(name, content)
    except SpecFormatError as err:
        return [issue("ERROR", "file", enrich(str(err)))]
    issues: list[Issue] = []
    if not spec.requirements:
        issues.append(issue("ERROR", "requirements", SPEC_NO_REQUIREMENTS))
    for i, req in enumerate(spec.requirements):
        if not req.text:
            issues.append(issue("ERROR", f"requirements.{i}.text", "Requirement text cannot be empty"))
        if not req.scenarios:
            issues.append(issue("ERROR", f"requirements.{i}.scenarios", REQUIREMENT_NO_SCENARIOS))
    for found in structure_issues(content):
        issues.append(issue("ERROR", "file", found.message, found.line))
    placeholder, line = purpose_placeholder(spec.overview, content)
    if placeholder:
        issues.append(issue("WARNING", "overview", PURPOSE_IS_PLACEHOLDER, line))
    elif js_length(spec.overview) < MIN_PURPOSE_LENGTH:
        issues.append(issue("WARNING", "overview", PURPOSE_TOO_BRIEF))
    for i, req in enumerate(spec.requirements):
        if js_length(req.text) > MAX_REQUIREMENT_TEXT_LENGTH:
            issues.append(issue("INFO", f"requirements[{i}]", REQUIREMENT_TOO_LONG))
        if not req.scenarios:
            issues.append(issue("WARNING", f"requirements[{i}].scenarios",
                                f"{REQUIREMENT_NO_SCENARIOS}. {GUIDE_SCENARIO_FORMAT}"))
    for i, block in enumerate(extract_requirements_section(content).blocks):
        text = extract_requirement_body(block.raw.split("\n")[1:])
        label = f'Requirement "{block.name}"'
        if not text:
            issues.append(issue("ERROR", f"requirements[{i}]", missing_keyword_message(label, block.name)))
        elif not contains_shall_or_must(text):
            issues.append(issue("WARNING", f"requirements[{i}]", missing_keyword_message(label, block.name, True)))
    return issues


def is_valid(issues: list[Issue], strict: bool) -> bool:
    return not any(i.level == "ERROR" or (strict and i.level == "WARNING") for i in issues)


# ---------------------------------------------------------------------- Purpose placeholder


def _word_char(ch: str) -> bool:
    return ch == "_" or unicodedata.category(ch)[0] in "LNM"


def _leading_marker(prose: str) -> bool:
    for marker in ("TBD", "TODO"):
        head = prose[:len(marker)]
        if head.upper() != marker or (len(prose) > len(marker) and _word_char(prose[len(marker)])):
            continue
        if head == marker:
            return True
        rest = prose[len(marker):].lstrip(" \t")
        if not rest or rest[0] == "\n" or rest[0] in _MARKER_PUNCTUATION:
            return True
    return False


def _generated_index(text: str) -> int | None:
    suffix_at = text.find(PURPOSE_PLACEHOLDER_SUFFIX)
    while suffix_at != -1:
        prefix_at = text.rfind(PURPOSE_PLACEHOLDER_PREFIX, 0, suffix_at + len(PURPOSE_PLACEHOLDER_PREFIX))
        if prefix_at != -1:
            return prefix_at
        suffix_at = text.find(PURPOSE_PLACEHOLDER_SUFFIX, suffix_at + 1)
    return None


def purpose_placeholder(overview: str, content: str) -> tuple[bool, int | None]:
    """Whether the Purpose is still a TBD/TODO or the archive placeholder, and on which line."""
    lines = normalize_newlines(overview).split("\n")
    mask = fence_mask(lines)
    prose = trim("\n".join(line for i, line in enumerate(lines) if not mask[i]))
    leading = _leading_marker(prose)
    if not leading and _generated_index(prose) is None:
        return False, None
    return True, _placeholder_line(content, leading)


def _placeholder_line(content: str, leading: bool) -> int | None:
    lines = normalize_newlines(content).split("\n")
    mask = fence_mask(lines)
    header = next((i for i, line in enumerate(lines) if not mask[i] and _PURPOSE_HEADER.match(line)), -1)
    if header == -1:
        return None
    body: list[tuple[int, str]] = []
    for i in range(header + 1, len(lines)):
        if mask[i]:
            continue
        if _TOP_HEADER.match(lines[i]):
            break
        if leading and trim(lines[i]):
            return i + 1
        body.append((i + 1, lines[i]))
    if leading:
        return None
    purpose = "\n".join(text for _, text in body)
    at = _generated_index(purpose)
    if at is None:
        return None
    offset = purpose[:at].count("\n")
    return body[offset][0] if offset < len(body) else None
