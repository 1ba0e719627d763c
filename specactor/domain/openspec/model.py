"""The JSON the tools answer with: the shapes of the CLI's `--json` output (1.13.2), as Structs.

Field names are the CLI's (camelCase); optional CLI fields are UNSET and omitted, so an encoded
Struct equals the CLI's object. Fields specactor adds (`taskStatus` on a shown change, the
archive `dryRun` plan) are additive and named in their docstrings.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

Level = Literal["ERROR", "WARNING", "INFO"]


class _Out(msgspec.Struct, omit_defaults=True):
    pass


class Root(_Out):
    """`root`: the project directory holding `openspec/`."""

    path: str
    source: str


class Issue(msgspec.Struct, omit_defaults=True, frozen=True):
    level: Level
    path: str
    message: str
    line: int | UnsetType = UNSET


class Diagnostic(_Out):
    """One entry of the CLI's `status` array on a failure."""

    severity: str
    code: str
    message: str
    fix: str | UnsetType = UNSET


# ---------------------------------------------------------------------- list


class ChangeEntry(_Out):
    name: str
    completedTasks: int
    totalTasks: int
    lastModified: str
    status: Literal["no-tasks", "complete", "in-progress"]
    nested: list[str] | UnsetType = UNSET


class NestedWarning(_Out):
    code: str
    name: str
    nested: list[str]
    message: str


class ListChanges(_Out):
    changes: list[ChangeEntry]
    root: Root
    warnings: list[NestedWarning] | UnsetType = UNSET


class SpecEntry(_Out):
    id: str
    requirementCount: int


class ListSpecs(_Out):
    specs: list[SpecEntry]
    root: Root


class ListOut(_Out):
    """`list` answers one of the two CLI shapes: `{changes, root}` or `{specs, root}`."""

    root: Root
    changes: list[ChangeEntry] | UnsetType = UNSET
    specs: list[SpecEntry] | UnsetType = UNSET
    warnings: list[NestedWarning] | UnsetType = UNSET


# ---------------------------------------------------------------------- show


class ScenarioOut(_Out):
    rawText: str


class RequirementOut(_Out):
    text: str
    scenarios: list[ScenarioOut]


class Metadata(_Out):
    version: str
    format: str


class RenameOut(_Out):
    from_: str = msgspec.field(name="from")
    to: str


class DeltaOut(_Out):
    spec: str
    operation: Literal["ADDED", "MODIFIED", "REMOVED", "RENAMED"]
    description: str
    requirement: RequirementOut | UnsetType = UNSET
    requirements: list[RequirementOut] | UnsetType = UNSET
    rename: RenameOut | UnsetType = UNSET


class TaskStatus(_Out):
    total: int
    completed: int


class ShowOut(_Out):
    """`show --json` for a spec (`overview`, `requirements`, `metadata`) or a change (`deltas`).

    For a change specactor adds `taskStatus` (the CLI's `change list --json` field).
    """

    id: str
    title: str
    root: Root
    overview: str | UnsetType = UNSET
    requirementCount: int | UnsetType = UNSET
    requirements: list[RequirementOut] | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET
    deltaCount: int | UnsetType = UNSET
    deltas: list[DeltaOut] | UnsetType = UNSET
    taskStatus: TaskStatus | UnsetType = UNSET


# ---------------------------------------------------------------------- validate


class ValidateItem(_Out):
    id: str
    type: Literal["change", "spec"]
    valid: bool
    issues: list[Issue]
    durationMs: int


class Totals(_Out):
    items: int
    passed: int
    failed: int


class Summary(_Out):
    totals: Totals
    byType: dict[str, Totals]


class ValidateOut(_Out):
    items: list[ValidateItem]
    summary: Summary
    version: str
    root: Root


# ---------------------------------------------------------------------- archive


class ArchiveTotals(_Out):
    added: int
    modified: int
    removed: int
    renamed: int


class ArchiveRecord(_Out):
    change: str
    archivedAs: str
    path: str
    specsUpdated: bool
    totals: ArchiveTotals | UnsetType = UNSET
    warnings: list[str] | UnsetType = UNSET


class SpecPlan(_Out):
    """One main spec a (dry-run) archive would create or update, with its operation counts."""

    id: str
    action: Literal["create", "update", "unchanged", "retire"]
    totals: ArchiveTotals


class ArchiveOut(_Out):
    """`archive --json --yes`; with `dryRun` specactor adds the per-spec plan and writes nothing."""

    archive: ArchiveRecord
    root: Root
    dryRun: bool | UnsetType = UNSET
    specs: list[SpecPlan] | UnsetType = UNSET


# ---------------------------------------------------------------------- specactor-only tools


class InitOut(_Out):
    path: str
    created: list[str]
    nextSteps: list[str]
    root: Root


class ProjectContextOut(_Out):
    file: str
    mode: Literal["replace", "append", "section"]
    bytes: int
    section: str | UnsetType = UNSET


class TickedTask(_Out):
    line: int
    description: str
    id: str | UnsetType = UNSET


class TaskCompleteOut(_Out):
    changeId: str
    task: TickedTask
    alreadyDone: bool
    completedTasks: int
    totalTasks: int
