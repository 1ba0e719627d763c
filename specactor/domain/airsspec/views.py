"""The answers built from bundles and summaries: tool outputs and the JSON resources."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from specactor.domain.airsspec.api import (
    BuildProgressOut,
    DependencyCounts,
    InvalidSpec,
    PlanProgress,
    SpecListEntry,
    SpecListOut,
    SpecStatusOut,
)
from specactor.domain.airsspec.catalog import Entry, Summary
from specactor.domain.airsspec.dependencies import DepState, check
from specactor.domain.airsspec.model import Bundle, PlanDoc
from specactor.domain.airsspec.progress import plan_percentage
from specactor.domain.airsspec.vocab import BLOCKING_KINDS, Category, Lifecycle, Phase


class IndexEntry(msgspec.Struct):
    id: str
    title: str
    state: Lifecycle
    category: Category
    phase: Phase
    created_at: str
    updated_at: str


class IndexOut(msgspec.Struct, omit_defaults=True):
    specs: list[IndexEntry]
    total: int
    invalid: list[InvalidSpec] = []


def plan_progress(plan: PlanDoc | None) -> PlanProgress:
    """No plan: nothing planned, 0 %. A plan with no steps: nothing left, 100 % (AirsSpec's rule)."""
    if plan is None:
        return PlanProgress(total_steps=0, completed_steps=0, percentage=0)
    total, done = len(plan.steps), plan.completed_steps
    return PlanProgress(total_steps=total, completed_steps=done, percentage=plan_percentage(total, done))


def status(b: Bundle, lookup: Callable[[str], DepState | None]) -> SpecStatusOut:
    report = check(b.spec_id, b.spec.meta.dependencies, lookup, cycles=False)
    blocked = sum(1 for d in report.dependencies if d.kind in BLOCKING_KINDS and not d.satisfied)
    progress = b.state.build_progress
    return SpecStatusOut(
        spec_id=b.spec_id, title=b.spec.meta.title, lifecycle_state=b.state.lifecycle, phase=b.state.phase,
        plan_progress=plan_progress(b.plan),
        build_progress=BuildProgressOut(percentage=progress.percentage, current_step=progress.current_step),
        dependencies=DependencyCounts(total=len(report.dependencies), satisfied=report.satisfied_count,
                                      blocked=blocked),
        updated_at=max(b.spec.meta.updated_at, b.state.updated_at), completed_at=b.state.completed_at)


def spec_list(entries: Sequence[Entry], state: Lifecycle | None, category: Category | None) -> SpecListOut:
    specs = [SpecListEntry(id=e.id, title=e.title, state=e.state, category=e.category, created_at=e.created_at)
             for e in entries if isinstance(e, Summary) and (state is None or e.state == state)
             and (category is None or e.category == category)]
    return SpecListOut(specs=specs, total=len(specs), invalid=[e for e in entries if isinstance(e, InvalidSpec)])


def index(entries: Sequence[Entry]) -> IndexOut:
    specs = [IndexEntry(id=e.id, title=e.title, state=e.state, category=e.category, phase=e.phase,
                        created_at=e.created_at, updated_at=e.updated_at) for e in entries if isinstance(e, Summary)]
    return IndexOut(specs=specs, total=len(specs), invalid=[e for e in entries if isinstance(e, InvalidSpec)])


def bundle(b: Bundle) -> dict[str, Any]:
    """The `airsspec:///{spec-id}` bundle: the spec (metadata and content), the plan, the state."""
    plan = None
    if b.plan is not None:
        plan = {"approach": b.plan.approach, "steps": msgspec.to_builtins(b.plan.steps),
                "created_at": b.plan.created_at, "updated_at": b.plan.updated_at}
    return {
        "id": b.spec_id,
        "spec": {"metadata": msgspec.to_builtins(b.spec.meta), "content": b.spec.content},
        "plan": plan,
        "state": msgspec.to_builtins(b.state),
    }
