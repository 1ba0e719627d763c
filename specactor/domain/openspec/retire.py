"""Retiring a capability: when a change declared `retire_capabilities: true` and its REMOVED
entries take a spec's last requirement, archive deletes the spec instead of refusing it.

`unaccounted` ports `contentTheMergeCannotName`: the lines a deletion would take that are not the
title, Purpose, `## Requirements` header or a requirement's own statement and scenario bullets;
any such line vetoes the retirement.
"""

from __future__ import annotations

from specactor.domain.openspec.blocks import RequirementsParts
from specactor.domain.openspec.merge import first_foreign_tail
from specactor.domain.openspec.spec_rules import SPEC_NO_REQUIREMENTS, is_valid, validate_spec_content
from specactor.domain.openspec.text import columns, fence_mask, normalize_newlines, rx, trim

_SECTION = rx(r"^ {0,3}##\s+(.+?)\s*$")
_PURPOSE = rx(r"^purpose$", "i")
_SETEXT = rx(r"^ {0,3}(=+|-+)\s*$")
_HTML_HEADING = rx(r"^ {0,3}<h[1-6]\b", "i")
_TITLE = rx(r"^ {0,3}#\s+.+$")
_INTERRUPTS = rx(r"^ {0,3}(?:>|(?:[-*_][ \t]*){3,}$|(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)|[<|])")
_LIST_ITEM = rx(r"^(\s*(?:[-*+]|\d{1,9}[.)])\s+)")
_HEADING = rx(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_HTML_ANY = rx(r"^\s*<h[1-6]\b", "i")
_SCENARIO = rx(r"^ {0,3}####\s+Scenario:", "i")
_TABLE_OR_HTML = rx(r"^\s*[|<]")
_INDENT = rx(r"^[ \t]*")


def retirable(spec: str, rebuilt: str) -> bool:
    """The rebuilt spec fails validation for no reason but "no requirements" (`isRetirableSpec`)."""
    issues = validate_spec_content(spec, rebuilt)
    errors = [i for i in issues if i.level == "ERROR"]
    return not is_valid(issues, False) and bool(errors) and all(i.message == SPEC_NO_REQUIREMENTS for i in errors)


def _drop_indent(line: str, width: int) -> str:
    column = index = 0
    while index < len(line) and column < width:
        ch = line[index]
        if ch == " ":
            column += 1
        elif ch == "\t":
            column += 4 - column % 4
        else:
            break
        index += 1
    return line[index:]


def _heading(line: str) -> bool:
    return bool(_HEADING.match(line) or _HTML_ANY.match(line))


def _before(parts: RequirementsParts, out: list[str]) -> None:
    lines = normalize_newlines(parts.before.removeprefix("\ufeff")).split("\n")
    mask = fence_mask(lines)
    in_purpose = title_seen = False
    previous = ""
    for i, line in enumerate(lines):
        if not trim(line):
            previous = ""
            continue
        if not mask[i]:
            section = _SECTION.match(line)
            if section:
                in_purpose = bool(_PURPOSE.match(trim(section.group(1))))
                if not in_purpose:
                    out.append(trim(line))
                previous = line
                continue
            setext = in_purpose and trim(previous) and _SETEXT.match(line)
            if setext or _HTML_HEADING.match(line):
                out.append(trim(previous if setext else line))
                in_purpose = False
                previous = line
                continue
            if _TITLE.match(line):
                if not title_seen and not in_purpose:
                    title_seen = True
                else:
                    out.append(trim(line))
                    in_purpose = False
                previous = line
                continue
        previous = line
        if not in_purpose:
            out.append(trim(line))


def _block(raw: str, out: list[str]) -> None:
    tail = first_foreign_tail(raw)
    if tail:
        out.append(tail[0])
    lines = normalize_newlines(raw).split("\n")
    mask = fence_mask(lines)
    seen_scenario = in_bullets = bullets_seen = paragraph = False
    content_indent: int | None = None
    for i, line in enumerate(lines):
        if not trim(line):
            if bullets_seen:
                in_bullets = False
            content_indent, paragraph = None, False
            continue
        if i == 0:
            continue
        indent = columns(_INDENT.match(line).group(0))  # type: ignore[union-attr]
        inside = content_indent is not None and indent >= content_indent
        within = _drop_indent(line, content_indent) if inside and content_indent is not None else line
        lazy = paragraph and in_bullets and not _INTERRUPTS.match(within)
        continues = (inside or lazy) and not _heading(within)
        if mask[i]:
            if not inside:
                content_indent = None
            paragraph = False
            continue
        if i > 1 and _SETEXT.match(within) and trim(lines[i - 1]):
            out.append(trim(lines[i - 1]))
            content_indent, paragraph = None, False
            continue
        if continues:
            paragraph = not _INTERRUPTS.match(within)
            continue
        bullet = _LIST_ITEM.match(line)
        content_indent = columns(bullet.group(1)) if bullet else None
        paragraph = bullet is not None
        if _SCENARIO.match(line):
            seen_scenario = in_bullets = True
            bullets_seen = False
            continue
        if bullet:
            if in_bullets:
                bullets_seen = True
                continue
            if not seen_scenario:
                continue
            out.append(trim(line))
            continue
        if not seen_scenario and not _TABLE_OR_HTML.match(line):
            continue
        out.append(trim(line))


def unaccounted(parts: RequirementsParts) -> list[str]:
    """The lines deleting this spec would take that a retirement cannot name (deduplicated, in order)."""
    out: list[str] = []
    _before(parts, out)
    for piece in (parts.preamble, parts.after):
        out += [trim(line) for line in piece.split("\n") if trim(line)]
    for block in parts.blocks:
        _block(block.raw, out)
    return list(dict.fromkeys(out))


def describe(lines: list[str]) -> str:
    """The first three lines, quoted and clipped (`describeUnaccountedContent`)."""
    def clip(line: str) -> str:
        safe = "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in line)
        return f'"{safe[:200]}\u2026"' if len(safe) > 200 else f'"{safe}"'

    shown = ", ".join(clip(line) for line in lines[:3])
    rest = f", and {len(lines) - 3} more line(s)" if len(lines) > 3 else ""
    return f"{shown}{rest}"
