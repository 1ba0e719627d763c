"""The read-only commands over a workspace: `list`, `show` and `validate`, shaped like the CLI's JSON.

Each takes a `Source` (the `openspec/` directory) and the `Root` to report, and returns the model
Struct the CLI would print; a refusal raises `Blocked` carrying the CLI's diagnostic
(`unknown_item`, `ambiguous_item`, `show_error`, ...).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from specactor.domain.openspec import change as changes
from specactor.domain.openspec.change_rules import Context, delta_plan, validate_change
from specactor.domain.openspec.errors import Blocked
from specactor.domain.openspec.markdown import SpecFormatError, parse_spec
from specactor.domain.openspec.model import (
    ChangeEntry,
    Issue,
    ListOut,
    Metadata,
    NestedWarning,
    RequirementOut,
    Root,
    ScenarioOut,
    ShowOut,
    SpecEntry,
    Summary,
    TaskStatus,
    Totals,
    ValidateItem,
    ValidateOut,
)
from specactor.domain.openspec.source import (
    Source,
    Unreadable,
    active_change_ids,
    change_dirs,
    discover_spec_files,
    is_spec_id,
    join,
    last_modified,
    spec_ids,
)
from specactor.domain.openspec.spec_rules import is_valid, validate_spec_content
from specactor.domain.openspec.tasks import count_tasks
from specactor.domain.openspec.text import collation_key, nearest_matches

Kind = Literal["change", "spec"]


def task_progress(src: Source, change: str, base: str = "changes") -> tuple[int, int]:
    """(total, completed) checkboxes in the change's tasks.md; an unreadable file counts as none."""
    try:
        return src.memo(join(base, change, "tasks.md"), "tasks", lambda t: count_tasks(t) if t is not None else (0, 0))
    except Unreadable:
        return 0, 0


def iso_millis(seconds: float) -> str:
    """`Date.prototype.toISOString` of an mtime."""
    ms = math.floor(seconds * 1000)
    return datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


# ---------------------------------------------------------------------- list


def list_changes(src: Source, root: Root) -> ListOut:
    names = sorted(change_dirs(src, hidden=True))
    entries = []
    warnings = []
    for name in names:
        total, done = task_progress(src, name)
        nested = changes.nested_change(src, name)
        status: Literal["no-tasks", "complete", "in-progress"] = (
            "no-tasks" if total == 0 else "complete" if done == total else "in-progress")
        stamp = last_modified(src, join("changes", name))
        entry = ChangeEntry(name, done, total, iso_millis(stamp), status)
        if nested:
            entry.nested = nested
            message = changes.describe_nested(name, nested)
            warnings.append(NestedWarning("nested_change_directory", name, nested, message))
        entries.append((math.floor(stamp * 1000), entry))
    entries.sort(key=lambda pair: -pair[0])
    out = ListOut(root, changes=[e for _, e in entries])
    if warnings:
        out.warnings = warnings
    return out


def list_specs(src: Source, root: Root) -> ListOut:
    specs = []
    for ident, path in discover_spec_files(src, "specs"):
        specs.append(SpecEntry(ident, _requirement_count(src, ident, path)))
    specs.sort(key=lambda s: collation_key(s.id))
    return ListOut(root, specs=specs)


def _requirement_count(src: Source, ident: str, path: str) -> int:
    def count(text: str | None) -> int:
        try:
            return len(parse_spec(ident, text).requirements) if text is not None else 0
        except SpecFormatError:
            return 0

    try:
        return src.memo(path, "requirement-count", count)
    except Unreadable:
        return 0


# ---------------------------------------------------------------------- show


def _resolve(src: Source, item: str, kind: Kind | None) -> Kind:
    if kind is not None:
        return kind
    is_change, is_spec = item in change_dirs(src, hidden=False), is_spec_id(src, item)
    if not is_change and not is_spec:
        hints = nearest_matches(item, active_change_ids(src) + spec_ids(src))
        guess = f" Did you mean: {', '.join(hints)}?" if hints else ""
        raise Blocked("unknown_item", f"Unknown item '{item}'.{guess}")
    if is_change and is_spec:
        raise Blocked("ambiguous_item", f"Ambiguous item '{item}' matches both a change and a spec.",
                      "Pass --type change|spec.")
    return "change" if is_change else "spec"


def show(src: Source, root: Root, item: str, kind: Kind | None, abs_root: str) -> ShowOut:
    """`openspec show <item> --json` (plus `taskStatus` for a change)."""
    if _resolve(src, item, kind) == "spec":
        path = join("specs", item, "spec.md")
        try:
            text = src.text(path)
            if text is None:
                raise Blocked("show_error", f"Spec '{item}' not found at {abs_root}/{path}")
            spec = src.memo(path, "spec", lambda t: parse_spec(item, t or ""))
        except (SpecFormatError, Unreadable) as err:
            raise Blocked("show_error", str(err)) from None
        reqs = [RequirementOut(r.text, [ScenarioOut(s.rawText) for s in r.scenarios]) for r in spec.requirements]
        return ShowOut(item, item, root, overview=spec.overview, requirementCount=len(reqs), requirements=reqs,
                       metadata=Metadata("1.0.0", "openspec"))
    proposal_path = join("changes", item, "proposal.md")
    try:
        proposal = src.text(proposal_path)
    except Unreadable as err:
        raise Blocked("show_error", str(err)) from None
    if proposal is None:
        if src.kind(join("changes", item)) == "dir":
            nested = changes.nested_change(src, item)
            if nested:
                raise Blocked("show_error", changes.describe_nested(item, nested))
            raise Blocked("show_error", f'Change "{item}" has no proposal.md yet. Run "openspec status --change '
                                        f'{item}" to see which artifact comes next.')
        raise Blocked("show_error", f'Change "{item}" not found at {abs_root}/{proposal_path}')
    try:
        plans = []
        for spec_id, path in changes.delta_files(src, item):
            try:
                plans.append((spec_id, delta_plan(src, path)))
            except Unreadable:
                continue
        deltas = changes.parse_change(src, item, proposal, plans)
    except (SpecFormatError, Unreadable) as err:
        raise Blocked("show_error", str(err)) from None
    total, done = task_progress(src, item)
    return ShowOut(item, changes.extract_title(proposal, item), root, deltaCount=len(deltas), deltas=deltas,
                   taskStatus=TaskStatus(total, done))


# ---------------------------------------------------------------------- validate


def folder_name_problem(value: str, label: str) -> str | None:
    """`folderStyleNameProblem`."""
    if not value:
        return f"{label} must not be empty"
    if value in (".", ".."):
        return f"{label} must not be '{value}'"
    if "/" in value or "\\" in value:
        return f"{label} must not contain path separators"
    return None


def _spec_issues(src: Source, ident: str, abs_root: str) -> list[Issue]:
    path = join("specs", ident, "spec.md")
    try:
        text = src.text(path)
    except Unreadable as err:
        return [Issue("ERROR", "file", str(err))]
    if text is None:
        return [Issue("ERROR", "file", f"ENOENT: no such file or directory, open '{abs_root}/{path}'")]
    return src.memo(path, "spec-issues", lambda t: validate_spec_content(ident, t or ""))


def _change_issues(src: Source, ident: str, ctx: Context) -> list[Issue]:
    nested = changes.nested_change(src, ident)
    if nested:
        return [Issue("ERROR", "file", changes.describe_nested(ident, nested))]
    try:
        return validate_change(src, ident, ctx, against_main=True)
    except Unreadable as err:
        return [Issue("ERROR", "file", str(err))]


def _item(src: Source, kind: Kind, ident: str, ctx: Context, strict: bool, clock: Callable[[], float]) -> ValidateItem:
    start = clock()
    issues = _change_issues(src, ident, ctx) if kind == "change" else _spec_issues(src, ident, ctx.root)
    return ValidateItem(ident, kind, is_valid(issues, strict), issues, int((clock() - start) * 1000))


def _totals(items: list[ValidateItem]) -> Totals:
    passed = sum(1 for i in items if i.valid)
    return Totals(len(items), passed, len(items) - passed)


def validate(src: Source, root: Root, ctx: Context, *, item: str | None, kind: Kind | None, include_changes: bool,
             include_specs: bool, strict: bool, clock: Callable[[], float] = time.monotonic) -> ValidateOut:
    """`openspec validate [item] --json`: one item, or every change and/or spec (sorted like the CLI)."""
    if item is None:
        kinds = (["change"] if include_changes else []) + (["spec"] if include_specs else [])
        queue: list[tuple[Kind, str]] = [("change", c) for c in active_change_ids(src) if include_changes]
        queue += [("spec", s) for s in spec_ids(src) if include_specs]
        items = [_item(src, k, ident, ctx, strict, clock) for k, ident in queue]
        items.sort(key=lambda i: collation_key(i.id))
        by_type = {k: _totals([i for i in items if i.type == k]) for k in kinds}
        return ValidateOut(items, Summary(_totals(items), by_type), "1.0", root)
    resolved = _resolve(src, item, kind)
    label = "Change name" if resolved == "change" else "Spec id"
    for segment in [item] if resolved == "change" else item.split("/"):
        problem = folder_name_problem(segment, label)
        if problem:
            raise Blocked("invalid_item", problem)
    one = _item(src, resolved, item, ctx, strict, clock)
    return ValidateOut([one], Summary(_totals([one]), {resolved: _totals([one])}), "1.0", root)
