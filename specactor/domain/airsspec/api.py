"""The arguments and answers of the 12 AirsSpec tools, as the seed defines them.

Every rule an argument must obey is in its schema (`pattern`, enum, range), so a schema-valid
call is never refused as INVALID_INPUT. Inputs are keyword-only and refuse unknown fields: their
base is `wire.arguments.ToolInput`, the registry's own.

No `from __future__ import annotations` here: the schemas are derived at start-up, and real
annotations spare msgspec evaluating ~300 strings (about 5 ms before the first reply).
"""

from typing import Annotated, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from specactor.domain.airsspec.dependencies import DependencyReport
from specactor.domain.airsspec.ids import SPEC_ID_PATTERN, SPEC_ID_WORDS
from specactor.domain.airsspec.vocab import (
    Category,
    CategoryIn,
    ComplexityIn,
    DependencyKindIn,
    Lifecycle,
    Phase,
)
from specactor.wire.arguments import ToolInput

NOT_BLANK: Final = r"\S"

# A `pattern` field's description says its rule in words: a refusal quotes it (protocol/schema.py).
SpecId = Annotated[str, Meta(pattern=SPEC_ID_PATTERN, max_length=69, description=SPEC_ID_WORDS)]
Title = Annotated[str, Meta(pattern=NOT_BLANK, description="Concise spec title (what to build), not blank")]
Percent = Annotated[float, Meta(ge=0, le=100)]


class DependencyIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    spec_id: SpecId
    kind: Annotated[DependencyKindIn, Meta(description="hard (blocked_by) must be done before a build; soft "
                                                       "(related_to), child_of and parent_of do not block")] = "hard"


class StepIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    title: Annotated[str, Meta(pattern=NOT_BLANK, description="Step title (one line), not blank")]
    description: Annotated[str, Meta(description="What the step does and when it is done")]
    complexity: Annotated[ComplexityIn, Meta(description="Estimate (medium = moderate)")] | UnsetType = UNSET


# ---------------------------------------------------------------------- inputs


class SpecCreateIn(ToolInput):
    title: Title
    description: Annotated[str, Meta(description="Detailed description including why this is needed")]
    category: Annotated[CategoryIn, Meta(description="Type of change (default: the workspace's "
                                                     "[defaults] category, feature)")] | UnsetType = UNSET
    content: Annotated[str, Meta(description="Optional: Initial markdown content for spec body")] | UnsetType = UNSET
    dependencies: Annotated[list[DependencyIn], Meta(description="Optional: Dependencies on other "
                                                                 "(existing) specs")] | UnsetType = UNSET


class SpecUpdateIn(ToolInput):
    spec_id: SpecId
    title: Annotated[str, Meta(pattern=NOT_BLANK, description="Optional: New title, not blank")] | UnsetType = UNSET
    description: Annotated[str, Meta(description="Optional: New description")] | UnsetType = UNSET
    content: Annotated[str, Meta(description="Optional: New markdown content")] | UnsetType = UNSET
    category: Annotated[CategoryIn, Meta(description="Optional: New category")] | UnsetType = UNSET


class SpecTransitionIn(ToolInput):
    spec_id: SpecId
    to_state: Annotated[Lifecycle, Meta(description="Target state")]
    reason: Annotated[str, Meta(description="Optional: Reason for transition")] | UnsetType = UNSET


class SpecListIn(ToolInput):
    state: Annotated[Lifecycle, Meta(description="Optional: Filter by state")] | UnsetType = UNSET
    category: Annotated[CategoryIn, Meta(description="Optional: Filter by category")] | UnsetType = UNSET


class SpecIdIn(ToolInput):
    spec_id: SpecId


class PlanCreateIn(ToolInput):
    spec_id: SpecId
    approach: Annotated[str, Meta(description="High-level approach/strategy for implementation")]
    steps: Annotated[list[StepIn], Meta(description="Ordered list of implementation steps")]


class PlanUpdateIn(ToolInput):
    spec_id: SpecId
    approach: Annotated[str, Meta(description="Optional: New approach")] | UnsetType = UNSET
    steps: Annotated[list[StepIn], Meta(description="Optional: Replacement steps (replaces all; only "
                                                    "before the build starts)")] | UnsetType = UNSET


class PlanStepCompleteIn(ToolInput):
    spec_id: SpecId
    step_index: Annotated[int, Meta(ge=0, description="0-based step index")]
    notes: Annotated[str, Meta(description="Optional: Implementation notes")] | UnsetType = UNSET


class BuildStartIn(ToolInput):
    spec_id: SpecId
    plan_approved: Annotated[bool, Meta(description="Confirm plan has been reviewed (recorded in the state)")] = False


class BuildUpdateIn(ToolInput):
    spec_id: SpecId
    progress_percentage: Annotated[Percent, Meta(description="Overall progress percentage (never lower "
                                                             "than the current one)")] | UnsetType = UNSET
    current_step: Annotated[str, Meta(description="Current step being worked on")] | UnsetType = UNSET
    notes: Annotated[str, Meta(description="Build notes")] | UnsetType = UNSET


class BuildCompleteIn(ToolInput):
    spec_id: SpecId
    summary: Annotated[str, Meta(description="Summary of what was implemented")]
    deviations: Annotated[str, Meta(description="Optional: How implementation differs from plan")] | UnsetType = UNSET


# ---------------------------------------------------------------------- outputs


class SpecCreateOut(msgspec.Struct):
    spec_id: str
    created: bool
    path: str


class SpecUpdateOut(msgspec.Struct):
    spec_id: str
    updated: bool
    updated_at: str


class SpecTransitionOut(msgspec.Struct):
    spec_id: str
    from_state: Lifecycle
    to_state: Lifecycle
    transitioned: bool


class InvalidSpec(msgspec.Struct):
    """A spec whose files do not parse: listed apart, never hidden."""

    id: str
    file: str
    line: int
    reason: str


class SpecListEntry(msgspec.Struct):
    id: str
    title: str
    state: Lifecycle
    category: Category
    created_at: str


class SpecListOut(msgspec.Struct, omit_defaults=True):
    specs: list[SpecListEntry]
    total: int
    invalid: list[InvalidSpec] = []


class PlanProgress(msgspec.Struct):
    total_steps: int
    completed_steps: int
    percentage: int


class BuildProgressOut(msgspec.Struct):
    percentage: int | float
    current_step: str | None


class DependencyCounts(msgspec.Struct):
    total: int
    satisfied: int
    blocked: int


class SpecStatusOut(msgspec.Struct):
    spec_id: str
    title: str
    lifecycle_state: Lifecycle
    phase: Phase
    plan_progress: PlanProgress
    build_progress: BuildProgressOut
    dependencies: DependencyCounts
    updated_at: str
    completed_at: str | None = None


# The dependency check's domain report is already the tool's answer, field for field.
CheckDependenciesOut = DependencyReport


class PlanCreateOut(msgspec.Struct):
    spec_id: str
    plan_created: bool
    total_steps: int
    path: str


class PlanUpdateOut(msgspec.Struct):
    spec_id: str
    updated: bool
    total_steps: int
    updated_at: str
    path: str


class PlanStepCompleteOut(msgspec.Struct):
    spec_id: str
    step_index: int
    step_title: str
    completed: bool
    plan_progress: PlanProgress


class BuildStartOut(msgspec.Struct):
    spec_id: str
    build_started: bool
    phase: Literal["build"]
    plan_steps: int


class BuildStatus(msgspec.Struct):
    percentage: int | float
    current_step: str | None
    notes: str | None


class BuildUpdateOut(msgspec.Struct):
    spec_id: str
    updated: bool
    build_progress: BuildStatus
    updated_at: str


class BuildCompleteOut(msgspec.Struct):
    spec_id: str
    build_completed: bool
    lifecycle_state: Literal["done"]
    completed_at: str
