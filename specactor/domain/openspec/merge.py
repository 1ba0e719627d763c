"""Applying a delta spec to a main spec, byte for byte as `openspec archive` does (`specs-apply.js`).

Operations run RENAMED, REMOVED, MODIFIED, ADDED; existing order is kept, new requirements are
appended, already-applied operations are no-ops. Every refusal raises `MergeError` with the
CLI's message. New capabilities start from the CLI's skeleton (a delta `## Purpose` is carried
over when it is safe to).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specactor.domain.openspec.blocks import (
    REQUIREMENT_HEADER,
    Block,
    DeltaPlan,
    RequirementsParts,
    describe_balance,
    diff_scenarios,
    extract_requirements_section,
    fold_name,
    normalize_name,
    parse_delta,
    structure_issues,
)
from specactor.domain.openspec.markdown import SpecFormatError, parse_spec
from specactor.domain.openspec.text import fence_mask, normalize_newlines, rx, trim, trim_end

PURPOSE_PLACEHOLDER_PREFIX = "TBD - created by archiving change "
PURPOSE_PLACEHOLDER_SUFFIX = ". Update Purpose after archive."
MIN_PURPOSE_LENGTH = 50
_PURPOSE_HEADER = rx(r"^##\s+Purpose\s*$", "i")
_TOP_LEVEL = rx(r"^##\s+")
_FOREIGN_HEADING = rx(r"^ {0,3}#{1,3}(?:[ \t]|$)")


class MergeError(ValueError):
    """A delta archive refuses to apply; the message is the CLI's."""


@dataclass(frozen=True)
class Counts:
    added: int = 0
    modified: int = 0
    removed: int = 0
    renamed: int = 0

    @property
    def total(self) -> int:
        return self.added + self.modified + self.removed + self.renamed


@dataclass
class Built:
    rebuilt: str
    counts: Counts
    warnings: list[str] = field(default_factory=list)
    no_requirement_blocks: bool = False
    parts: RequirementsParts | None = None  # the target as it was, for the retirement audit


def build_updated_spec(spec: str, change: str, delta_content: str, target_content: str | None,
                       target_path: str = "", parsed: DeltaPlan | None = None) -> Built:
    """The rebuilt main spec for capability `spec` (`buildUpdatedSpec`).

    `target_content` is None when the main spec does not exist yet; `target_path` is the main
    spec's absolute path, which one warning quotes. `parsed` is `parse_delta(delta_content)` when
    the caller has it already.

    Raises:
        MergeError: with the CLI's message, when archive would refuse this delta.
    """
    plan = parse_delta(delta_content) if parsed is None else parsed
    if plan.unpaired:
        first = plan.unpaired[0]
        missing = "TO" if first.side == "FROM" else "FROM"
        raise MergeError(f"{spec} validation failed - RENAMED entry on line {first.line} has no matching {missing}: "
                         f'for header "### Requirement: {first.name}". '
                         "Write each rename as a FROM: line followed immediately by its TO: line.")
    warnings: list[str] = []
    for orphan in plan.orphans:
        where = f'under "## {orphan.section}"' if orphan.section else 'above the first "## " section'
        warnings.append(f'{spec} - requirement "{orphan.name}" (line {orphan.line}) is {where}, which is not a delta '
                        "section, so it was not applied. Move it under ADDED/MODIFIED/REMOVED/RENAMED Requirements.")
    added = _unique(spec, "ADDED", [b.name for b in plan.added])
    modified = _unique(spec, "MODIFIED", [b.name for b in plan.modified])
    removed = _unique(spec, "REMOVED", plan.removed)
    froms: set[str] = set()
    tos: set[str] = set()
    for r in plan.renamed:
        f, t = normalize_name(r.from_), normalize_name(r.to)
        if f in froms:
            raise MergeError(f"{spec} validation failed - duplicate FROM in RENAMED for header "
                             f'"### Requirement: {r.from_}"')
        if t in tos:
            raise MergeError(f'{spec} validation failed - duplicate TO in RENAMED for header "### Requirement: {r.to}"')
        froms.add(f)
        tos.add(t)
    conflicts: list[tuple[str, str, str]] = []
    for n in modified:
        conflicts += [(n, "MODIFIED", "REMOVED")] if n in removed else []
        conflicts += [(n, "MODIFIED", "ADDED")] if n in added else []
    conflicts += [(n, "ADDED", "REMOVED") for n in added if n in removed]
    for r in plan.renamed:
        f, t = normalize_name(r.from_), normalize_name(r.to)
        fold_match = next((x for x in removed if fold_name(x) == fold_name(f)), None)
        if fold_match is not None:
            spelled = "" if fold_match == f else f' (REMOVED spells it "{fold_match}")'
            raise MergeError(f"{spec} validation failed - requirement present in multiple sections (RENAMED and "
                             f'REMOVED) for header "### Requirement: {r.from_}"{spelled}')
        if f in modified:
            raise MergeError(f"{spec} validation failed - when a rename exists, MODIFIED must reference the NEW "
                             f'header "### Requirement: {r.to}"')
        if t in added:
            raise MergeError(f"{spec} validation failed - RENAMED TO header collides with ADDED for "
                             f'"### Requirement: {r.to}"')
    if conflicts:
        name, a, b = conflicts[0]
        raise MergeError(f"{spec} validation failed - requirement present in multiple sections ({a} and {b}) for "
                         f'header "### Requirement: {name}"')
    if plan.entry_count == 0:
        raise MergeError(f"Delta parsing found no operations for {spec}. "
                         "Provide ADDED/MODIFIED/REMOVED/RENAMED sections in change spec.")
    delta_purpose = extract_purpose(delta_content)
    is_new = target_content is None
    if target_content is not None:
        if delta_purpose:
            existing = extract_purpose(target_content)
            if existing and existing != delta_purpose:
                warnings.append(f"{spec} - delta Purpose ignored; {spec} already has one. "
                                f"Edit {target_path or f'openspec/specs/{spec}/spec.md'} directly to change it.")
    else:
        if plan.modified or plan.renamed:
            raise MergeError(f"{spec}: target spec does not exist; only ADDED requirements are allowed for new specs. "
                             "MODIFIED and RENAMED operations require an existing spec.")
        if plan.removed:
            warnings.append(f"{spec} - {len(plan.removed)} REMOVED requirement(s) ignored for new spec "
                            "(nothing to remove).")
        target_content = skeleton(spec, change, delta_purpose)
        overview = _readable_overview(target_content, spec) if delta_purpose else None
        if delta_purpose and not overview:
            target_content = skeleton(spec, change)
            warnings.append(f"{spec} - delta Purpose ignored (it would leave the new spec unreadable); wrote the "
                            "placeholder Purpose instead.")
        elif overview and len(overview) < MIN_PURPOSE_LENGTH:
            warnings.append(f"{spec} - carried Purpose is under {MIN_PURPOSE_LENGTH} characters; openspec validate "
                            "--strict reports it as too brief.")
    issues = structure_issues(target_content)
    if issues:
        details = "\n".join(f"line {i.line}: {i.message}" for i in issues)
        raise MergeError(f"{spec}: target spec is structurally invalid and cannot be updated until fixed:\n{details}")
    return _apply(spec, plan, target_content, is_new, warnings)


def _unique(spec: str, section: str, names: list[str]) -> list[str]:
    seen: list[str] = []
    for raw in names:
        name = normalize_name(raw)
        if name in seen:
            raise MergeError(f"{spec} validation failed - duplicate requirement in {section} for header "
                             f'"### Requirement: {raw}"')
        seen.append(name)
    return seen


def _apply(spec: str, plan: DeltaPlan, target: str, is_new: bool, warnings: list[str]) -> Built:
    parts = extract_requirements_section(target)
    by_name: dict[str, Block] = {}
    for block in parts.blocks:
        by_name[normalize_name(block.name)] = block
    order = [normalize_name(b.name) for b in parts.blocks]
    renamed = removed = modified = added = 0
    for r in plan.renamed:
        f, t = normalize_name(r.from_), normalize_name(r.to)
        if f not in by_name:
            if t in by_name:
                near = next((k for k in by_name if k != t and fold_name(k) == fold_name(f)), None)
                if near is not None:
                    raise MergeError(f'{spec} RENAMED failed for header "### Requirement: {r.from_}" - source not '
                                     f'found, but "### Requirement: {by_name[near].name}" exists; fix the header to '
                                     "match it exactly")
                continue
            raise MergeError(f'{spec} RENAMED failed for header "### Requirement: {r.from_}" - source not found')
        if t in by_name:
            raise MergeError(f'{spec} RENAMED failed for header "### Requirement: {r.to}" - target already exists')
        near = next((k for k in by_name if k != f and fold_name(k) == fold_name(t)), None)
        if near is not None:
            raise MergeError(f'{spec} RENAMED failed for header "### Requirement: {r.to}" - "### Requirement: '
                             f'{by_name[near].name}" already exists and differs only in case or spacing; choose a '
                             "distinct name")
        block = by_name.pop(f)
        lines = block.raw.split("\n")
        lines[0] = f"### Requirement: {t}"
        by_name[t] = Block(lines[0], t, "\n".join(lines))
        if f in order:
            order[order.index(f)] = t
        renamed += 1
    for name in plan.removed:
        key = normalize_name(name)
        if key not in by_name:
            if not is_new:
                near = next((k for k in by_name if fold_name(k) == fold_name(key)), None)
                if near is not None:
                    raise MergeError(f'{spec} REMOVED failed for header "### Requirement: {name}" - not found, but '
                                     f'"### Requirement: {by_name[near].name}" exists; fix the header to match it '
                                     "exactly")
                warnings.append(f'{spec} - REMOVED requirement "{name}" is not in the current spec; treating it as '
                                "already removed.")
            continue
        del by_name[key]
        removed += 1
    for mod in plan.modified:
        key = normalize_name(mod.name)
        current = by_name.get(key)
        if current is None:
            raise MergeError(f'{spec} MODIFIED failed for header "### Requirement: {mod.name}" - not found')
        m = REQUIREMENT_HEADER.match(mod.raw.split("\n")[0])
        if not m or normalize_name(m.group(1)) != key:
            raise MergeError(f'{spec} MODIFIED failed for header "### Requirement: {mod.name}" - header mismatch in '
                             "content")
        diff = diff_scenarios(current, mod)
        if diff.missing:
            listed = ", ".join(f'"{n}"' for n in diff.missing)
            raise MergeError(f'{spec} MODIFIED failed for header "### Requirement: {mod.name}" - current spec contains '
                             f"scenario(s) not present in the modified block: {listed}. {describe_balance(diff)} "
                             "Refresh the change spec before archiving to avoid dropping scenarios.")
        if _norm_raw(current.raw) != _norm_raw(mod.raw):
            modified += 1
        by_name[key] = mod
    for add in plan.added:
        key = normalize_name(add.name)
        existing = by_name.get(key)
        if existing is not None:
            if _norm_raw(existing.raw) == _norm_raw(add.raw):
                continue
            raise MergeError(f'{spec} ADDED failed for header "### Requirement: {add.name}" - already exists')
        near = next((k for k in by_name if fold_name(k) == fold_name(key)), None)
        if near is not None:
            raise MergeError(f'{spec} ADDED failed for header "### Requirement: {add.name}" - "### Requirement: '
                             f'{by_name[near].name}" already exists and differs only in case or spacing; use MODIFIED '
                             "with that exact header to change it, or choose a distinct name")
        by_name[key] = add
        added += 1
    kept: list[Block] = []
    seen: set[str] = set()
    for index, block in enumerate(parts.blocks):
        key = order[index]
        replacement = by_name.get(key)
        if replacement is not None:
            kept.append(replacement)
            seen.add(key)
        if replacement is not block:
            _warn_foreign_tail(spec, block, replacement, warnings)
    kept += [b for k, b in by_name.items() if k not in seen]
    body_parts = [trim_end(parts.preamble)] if trim(parts.preamble) else []
    body = trim_end("\n\n".join(body_parts + [b.raw for b in kept]))
    pieces = [s for s in (trim_end(parts.before), parts.header_line, body, trim(parts.after)) if s != ""]
    rebuilt = trim_end(collapse_blank_runs("\n\n".join(pieces))) + "\n"
    return Built(rebuilt, Counts(added, modified, removed, renamed), warnings, not kept, parts)


def _warn_foreign_tail(spec: str, block: Block, replacement: Block | None, warnings: list[str]) -> None:
    foreign = first_foreign_tail(block.raw)
    if foreign is None:
        return
    heading, raw = foreign
    tail = _norm_raw(raw)
    if replacement is not None and _count(_norm_raw(replacement.raw), tail) >= _count(_norm_raw(block.raw), tail):
        return
    warnings.append(f'{spec} - "{heading}" sits inside requirement "{block.name}" and goes with it. '
                    "Move it under its own requirement, or above `## Requirements`, to keep it.")


def first_foreign_tail(raw: str) -> tuple[str, str] | None:
    lines = normalize_newlines(raw).split("\n")
    mask = fence_mask(lines)
    for i in range(1, len(lines)):
        if not mask[i] and _FOREIGN_HEADING.match(lines[i]):
            return trim(lines[i]), trim_end("\n".join(lines[i:]))
    return None


def _norm_raw(raw: str) -> str:
    return trim(normalize_newlines(raw))


def _count(haystack: str, needle: str) -> int:
    if not needle:
        return 0
    count = start = 0
    while (start := haystack.find(needle, start)) != -1:
        count += 1
        start += len(needle)
    return count


def collapse_blank_runs(content: str) -> str:
    """Runs of empty lines become one, except inside fenced code."""
    lines = content.split("\n")
    mask = fence_mask(lines)
    kept: list[str] = []
    run = 0
    for i, line in enumerate(lines):
        if mask[i]:
            run = 0
        elif line == "":
            run += 1
            if run > 1:
                continue
        else:
            run = 0
        kept.append(line)
    return "\n".join(kept)


def mask_html_comments(content: str) -> str:
    """Blank out `<!-- ... -->` spans (an unterminated one runs to the end), keeping line breaks."""
    out: list[str] = []
    index = 0
    while True:
        start = content.find("<!--", index)
        if start == -1:
            out.append(content[index:])
            return "".join(out)
        out.append(content[index:start])
        close = -1
        i = start + 4
        while i < len(content):
            if content.startswith("-->", i):
                close = i + 3
                break
            if content.startswith("--!>", i):
                close = i + 4
                break
            i += 1
        end = len(content) if close == -1 else close
        out.append("".join("\n" if c == "\n" else " " for c in content[start:end]))
        if close == -1:
            return "".join(out)
        index = close


def extract_purpose(content: str) -> str | None:
    """The body of `## Purpose`, ignoring fenced and commented-out markdown (None if absent or empty)."""
    normalized = normalize_newlines(content)
    lines = normalized.split("\n")
    masked = mask_html_comments(normalized).split("\n")
    fences = fence_mask(masked)
    start = next((i for i, line in enumerate(masked) if not fences[i] and _PURPOSE_HEADER.match(line)), -1)
    if start == -1:
        return None
    end = next((i for i in range(start + 1, len(masked)) if not fences[i] and _TOP_LEVEL.match(masked[i])), len(masked))
    prose = trim("\n".join(line for off, line in enumerate(masked[start + 1:end]) if not fences[start + 1 + off]))
    if not prose:
        return None
    return trim("\n".join(lines[start + 1:end])) or None


def _readable_overview(skeleton_text: str, spec: str) -> str | None:
    if "<!--" in skeleton_text or structure_issues(skeleton_text):
        return None
    try:
        return trim(parse_spec(spec, skeleton_text).overview) or None
    except SpecFormatError:
        return None


def skeleton(spec: str, change: str, purpose: str | None = None) -> str:
    """A new capability's main spec before its requirements are merged in (`buildSpecSkeleton`)."""
    body = (trim(purpose) if purpose else "") or f"{PURPOSE_PLACEHOLDER_PREFIX}{change}{PURPOSE_PLACEHOLDER_SUFFIX}"
    return f"# {spec} Specification\n\n## Purpose\n{body}\n\n## Requirements\n"


def match_line_ending(content: str, original: str) -> str:
    """Write CRLF back into a spec that used it (`matchLineEnding`)."""
    crlf = original.count("\r\n")
    lf = original.count("\n") - crlf
    if crlf == 0 and lf == 0:
        return content
    if crlf >= lf:
        return content.replace("\r\n", "\n").replace("\n", "\r\n")
    return content.replace("\r\n", "\n")
