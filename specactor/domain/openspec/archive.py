"""Planning `openspec archive <change> --json --yes`: every check, merge and refusal, no writes.

`plan_archive` runs the CLI's sequence: the change must be a real directory (not a symlink, not a
folder of nested changes); its deltas must validate; its tasks must be complete unless forced;
the dated archive name must be free; every delta must merge and every rebuilt spec validate
before anything is written. The result lists the spec files to write (bytes, line endings kept)
and the directory move; the toolset applies it all-or-nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from specactor.domain.openspec import change as changes
from specactor.domain.openspec.blocks import parse_delta
from specactor.domain.openspec.change_rules import Context, delta_plan, validate_change
from specactor.domain.openspec.errors import Blocked
from specactor.domain.openspec.merge import Built, Counts, MergeError, build_updated_spec, match_line_ending
from specactor.domain.openspec.metadata import METADATA_FILE, Marker, read_marker
from specactor.domain.openspec.model import ArchiveRecord, ArchiveTotals, SpecPlan
from specactor.domain.openspec.retire import describe, retirable, unaccounted
from specactor.domain.openspec.source import (
    Source,
    Unreadable,
    discover_spec_files,
    has_any_file_under,
    join,
    unread_delta_files,
)
from specactor.domain.openspec.spec_rules import is_valid, validate_spec_content
from specactor.domain.openspec.text import rx
from specactor.domain.openspec.workspace import task_progress

_DATE_PREFIX = rx(r"^\d{4}-\d{2}-\d{2}-")
_DELTA_HEADER = rx(r"^##\s+(ADDED|MODIFIED|REMOVED|RENAMED)\s+Requirements", "im")


@dataclass
class ArchivePlan:
    """What archiving does: `writes` (path under openspec/ -> bytes), then `move` (from, to)."""

    record: ArchiveRecord
    writes: dict[str, bytes] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)  # retired specs (their emptied directories go too)
    move: tuple[str, str] = ("", "")
    specs: list[SpecPlan] = field(default_factory=list)


def archive_name(change: str, today: str) -> str:
    return change if _DATE_PREFIX.match(change) else f"{today}-{change}"


def _check_change(src: Source, change: str) -> None:
    entry = src.entry(join("changes", change))  # its own entry: no listing of every change
    if entry is not None and entry.is_link:
        raise Blocked("archive_change_symlink", f"Change '{change}' is a symbolic link. Replace it with a real "
                                                "directory before archiving.")
    if entry is None or not entry.is_dir:
        available = sorted(e.name for e in src.entries("changes") or [] if e.is_dir and e.name != "archive")
        raise Blocked("archive_change_not_found",
                      f"Change '{change}' not found. Available changes: {', '.join(available)}" if available
                      else f"Change '{change}' not found. No active changes exist in this root.")
    nested = changes.nested_change(src, change)
    if nested:
        raise Blocked("archive_change_is_namespace_folder", f"Cannot archive '{change}': "
                      f"{changes.describe_nested(change, nested)}",
                      f"Rename openspec/changes/{nested[0]}/ to a flat change directory, then archive it.")


def _needs_validation(src: Source, change: str, ctx: Context) -> bool:
    specs_dir = join("changes", change, "specs")
    if src.kind(join(specs_dir, "spec.md")) == "file":
        return True
    if unread_delta_files(src, specs_dir, lambda text: parse_delta(text).has_sections):
        return True
    try:
        marker = read_marker(src.text(join("changes", change, METADATA_FILE)), "skip_specs", ctx.schemas)
    except Unreadable:
        return True
    if marker.invalid_reason or (marker.declared and has_any_file_under(src, specs_dir)):
        return True
    for _, path in discover_spec_files(src, specs_dir):
        try:
            text = src.text(path)
        except Unreadable:
            continue
        if text is not None and _DELTA_HEADER.search(text):
            return True
    return False


def plan_archive(src: Source, ctx: Context, change: str, *, today: str, force: bool, update_specs: bool) -> ArchivePlan:
    """Everything archiving `change` would do.

    Raises:
        Blocked: with the CLI's code (`archive_change_not_found`, `archive_validation_failed`,
            `archive_tasks_incomplete`, `archive_target_exists`, `archive_spec_update_failed`,
            `archive_spec_validation_failed`, ...), message and fix.
    """
    _check_change(src, change)
    gate = _needs_validation(src, change, ctx)
    if gate and not is_valid(validate_change(src, change, ctx, against_main=False), False):
        raise Blocked("archive_validation_failed", f"Validation failed for change '{change}'.",
                      f"Run openspec validate {change} for details, fix the errors, or rerun with --no-validate.")
    total, done = task_progress(src, change)
    incomplete = max(total - done, 0)
    if incomplete > 0 and not force:
        raise Blocked("archive_tasks_incomplete", f"{incomplete} incomplete task(s) found for change '{change}'.",
                      "Complete the tasks or rerun with --yes.")
    name = archive_name(change, today)
    target = join("changes", "archive", name)
    listed = src.kind(join("changes", "archive")) == "dir" and src.entry(target) is not None  # a dangling link too
    if src.kind(target) is not None or listed:
        raise Blocked("archive_target_exists", f"Archive '{name}' already exists.")
    record = ArchiveRecord(change, name, f"{ctx.root}/{target}", False)
    plan = ArchivePlan(record, move=(join("changes", change), target))
    if not update_specs:
        return plan
    updates = discover_spec_files(src, join("changes", change, "specs"))
    if not updates:
        return plan
    try:
        retire_marker = read_marker(src.text(join("changes", change, METADATA_FILE)), "retire_capabilities",
                                    ctx.schemas)
    except Unreadable as err:
        retire_marker = Marker(False, f"the metadata file cannot be read ({err})")
    built: list[Prepared] = []
    warnings: list[str] = []
    try:
        for spec_id, path in updates:
            delta = src.text(path) or ""
            current = src.text(join("specs", spec_id, "spec.md"))
            result = build_updated_spec(spec_id, change, delta, current, f"{ctx.root}/specs/{spec_id}/spec.md",
                                        delta_plan(src, path) if delta else None)  # as the gate parsed it
            built.append(Prepared(spec_id, result, current, _outcome(spec_id, result, current, retire_marker)))
            warnings += result.warnings
    except (MergeError, Unreadable) as err:
        raise Blocked("archive_spec_update_failed", str(err),
                      "Fix the change delta specs and rerun. No files were changed.") from None
    for p in built:
        if p.outcome == "write" and not is_valid(validate_spec_content(p.spec, p.result.rebuilt), False):
            raise Blocked("archive_spec_validation_failed",
                          f"Rebuilt spec for '{p.spec}' failed validation. No files were changed.",
                          _validation_fix(p, retire_marker))
    totals = Counts()
    for p in built:
        counts = p.result.counts
        action: Literal["create", "update", "unchanged", "retire"] = (
            "retire" if p.outcome == "retire" else "unchanged" if p.outcome == "skip" or not counts.total
            else "create" if p.current is None else "update")
        plan.specs.append(SpecPlan(p.spec, action, _totals(counts)))
        target = join("specs", p.spec, "spec.md")
        if p.outcome == "retire":
            plan.deletes.append(target)
        elif p.outcome == "write" and counts.total:
            text = p.result.rebuilt if p.current is None else match_line_ending(p.result.rebuilt, p.current)
            plan.writes[target] = text.encode("utf-8")
        else:
            continue
        totals = Counts(totals.added + counts.added, totals.modified + counts.modified,
                        totals.removed + counts.removed, totals.renamed + counts.renamed)
    for p in built:
        if p.outcome == "retire":
            warnings.append(_retirement_note(p.spec))
    record.specsUpdated = bool(plan.writes or plan.deletes)
    record.totals = _totals(totals)
    if warnings:
        record.warnings = warnings
    return plan


@dataclass
class Prepared:
    spec: str
    result: Built
    current: str | None
    outcome: str  # "write" | "retire" | "skip"


def _totals(counts: Counts) -> ArchiveTotals:
    return ArchiveTotals(counts.added, counts.modified, counts.removed, counts.renamed)


def _lost_content(result: Built) -> list[str]:
    return unaccounted(result.parts) if result.parts is not None else []


def _outcome(spec: str, result: Built, current: str | None, marker: Marker) -> str:
    """`decideSpecOutcome`: retire only what the change declared and the validator agrees is empty."""
    if not marker.declared:
        return "write"
    if not (result.no_requirement_blocks and not _lost_content(result) and retirable(spec, result.rebuilt)):
        return "write"
    if current is None:
        return "skip"
    return "retire" if result.counts.removed > 0 else "write"


def _quote_for_shell(value: str) -> str | None:
    if rx(r"^[A-Za-z0-9._\/-]+$").match(value):
        return value
    if not any(c in value for c in '"\\$`\r\n%!'):
        return f'"{value}"'
    return None


def _retirement_note(spec: str) -> str:
    deleted = f"openspec/specs/{spec}/spec.md"
    pasteable = _quote_for_shell(f":(top){deleted}")
    recovery = (f"If it was committed, restore it with: git checkout HEAD -- {pasteable}" if pasteable
                else f"It was deleted from {deleted}; if it was committed, restore it from that checkout's history.")
    return (f"{spec} - capability retired; deleted the main spec (all requirements removed, declared by "
            f"retire_capabilities) at {deleted}. Its section(s) went with it: Purpose. {recovery}")


def _validation_fix(p: Prepared, marker: Marker) -> str:
    """The `fix` of a rebuilt spec that fails validation: the retirement hints, else the default."""
    spec, result = p.spec, p.result
    lost = _lost_content(result)
    emptied = p.current is not None and result.counts.removed > 0 and result.no_requirement_blocks and retirable(
        spec, result.rebuilt)
    honour = f" The marker present now cannot be honored ({marker.invalid_reason})." if marker.invalid_reason else ""
    if marker.declared and lost and retirable(spec, result.rebuilt):
        return (f"'{spec}' declares retire_capabilities, but the spec holds content the merge cannot safely account "
                f"for and deleting the file would take with it: {describe(lost)}. Move it into `## Purpose` or a "
                "canonical requirement, or delete the spec by hand.")
    if not marker.declared and emptied and not lost:
        return (f"This change removes the last requirement '{spec}' has. To retire the capability and delete its "
                f"spec, add `retire_capabilities: true` to the change's {METADATA_FILE} (alongside its `schema:`, "
                f"which that file requires), then rerun.{honour}")
    if not marker.declared and emptied:
        return (f"This change removes the last requirement '{spec}' has, so the rebuilt spec has none left and "
                "cannot be written. Retiring the capability is what archive does instead, and it is refused while "
                "the spec holds content the merge cannot safely account for and deleting the file would take with "
                f"it: {describe(lost)}. Move it into `## Purpose` or a canonical requirement, or delete the spec by "
                f"hand, then rerun.{honour}")
    return f"Run openspec validate {spec} after fixing the change deltas."
