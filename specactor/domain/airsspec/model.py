"""The documents of one spec, as frozen Structs: what `spec.md`, `plan.md` and `state.toon` hold.

They hold no reference cycles, so they are not tracked by the garbage collector (`gc=False`):
a catalog of thousands of specs then adds nothing to the collector's pauses.

`state.toon` is the authority on the lifecycle; the `state` in the spec's front matter and the
step counts in the state are mirrors, refreshed on every write (`Bundle.synced`).
"""

from __future__ import annotations

import msgspec

from specactor.domain.airsspec.progress import build_from_steps
from specactor.domain.airsspec.vocab import Category, Complexity, DependencyKind, Lifecycle, Phase, StepStatus


class Dependency(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    spec_id: str
    kind: DependencyKind


class SpecMeta(msgspec.Struct, frozen=True, gc=False):
    """The spec's YAML front matter, in the seed's key order."""

    title: str
    description: str
    category: Category
    state: Lifecycle
    dependencies: tuple[Dependency, ...]
    created_at: str
    updated_at: str


class SpecDoc(msgspec.Struct, frozen=True, gc=False):
    meta: SpecMeta
    content: str


class PlanStep(msgspec.Struct, frozen=True, gc=False):
    title: str
    description: str
    complexity: Complexity | None = None
    status: StepStatus = "pending"
    notes: str | None = None


class PlanDoc(msgspec.Struct, frozen=True, gc=False):
    spec_id: str
    approach: str
    steps: tuple[PlanStep, ...]
    created_at: str
    updated_at: str

    @property
    def completed_steps(self) -> int:
        return sum(1 for step in self.steps if step.status == "completed")


class BuildProgress(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    total_steps: int = 0
    completed_steps: int = 0
    percentage: int | float = 0
    current_step: str | None = None
    notes: str | None = None


class Transition(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One lifecycle move, kept in the state's history (a TOON table)."""

    at: str
    from_state: Lifecycle = msgspec.field(name="from")
    to_state: Lifecycle = msgspec.field(name="to")
    reason: str | None = None


class WorkflowState(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    spec_id: str
    lifecycle: Lifecycle
    phase: Phase
    updated_at: str
    plan_approved: bool = False
    build_progress: BuildProgress = BuildProgress()
    started_at: str | None = None
    completed_at: str | None = None
    summary: str | None = None
    deviations: str | None = None
    history: tuple[Transition, ...] = ()


class ProjectConfig(msgspec.Struct, frozen=True):
    """`.airsspec/config.toml`: `[project] name, description`, `[defaults] category`."""

    name: str
    description: str = ""
    default_category: Category = "feature"


class Bundle(msgspec.Struct, frozen=True, gc=False):
    """Everything about one spec: the spec document, its plan if any, and its workflow state."""

    spec_id: str
    spec: SpecDoc
    state: WorkflowState
    plan: PlanDoc | None = None

    def synced(self) -> Bundle:
        """The mirrors brought in line: front matter state, step counts, build percentage floor."""
        spec, state = self.spec, self.state
        if spec.meta.state != state.lifecycle:
            spec = msgspec.structs.replace(spec, meta=msgspec.structs.replace(spec.meta, state=state.lifecycle))
        if self.plan is not None:
            total, done = len(self.plan.steps), self.plan.completed_steps
            progress = state.build_progress
            floor = build_from_steps(total, done) if state.phase == "build" else 0
            if (progress.total_steps, progress.completed_steps) != (total, done) or progress.percentage < floor:
                progress = msgspec.structs.replace(progress, total_steps=total, completed_steps=done,
                                                   percentage=max(progress.percentage, floor))
                state = msgspec.structs.replace(state, build_progress=progress)
        return msgspec.structs.replace(self, spec=spec, state=state)


def initial_state(spec_id: str, meta: SpecMeta, plan: PlanDoc | None) -> WorkflowState:
    """The state of a spec whose `state.toon` does not exist yet (a hand-made spec, say)."""
    return WorkflowState(spec_id=spec_id, lifecycle=meta.state, phase="plan" if plan is not None else "spec",
                         updated_at=meta.updated_at)
