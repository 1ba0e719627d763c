"""The operations of the workflow, as pure functions: a bundle and a clock reading in, a new
bundle out (or a refusal). Phases run spec → plan → build.

- A spec may be edited until it is archived; its plan until it is done, cancelled or archived.
- Steps are replaced only before the build starts (after that, `deviations` records changes),
  so completed steps are never lost and plan progress never goes backwards.
- `build_start` needs a plan and every hard dependency done, and moves a draft to active.
- Steps are completed and progress reported during the build (active or blocked).
- `build_complete` moves the spec to done (active → done), stamps completed_at, sets 100 %.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from specactor.domain.airsspec.dependencies import DependencyReport
from specactor.domain.airsspec.errors import Conflict, DependencyNotSatisfied, NotFoundError, StepOutOfRange
from specactor.domain.airsspec.lifecycle import check_transition
from specactor.domain.airsspec.model import (
    Bundle,
    Dependency,
    PlanDoc,
    PlanStep,
    SpecDoc,
    SpecMeta,
    Transition,
    WorkflowState,
)
from specactor.domain.airsspec.progress import number
from specactor.domain.airsspec.specfile import default_body
from specactor.domain.airsspec.text import block, note, one_line
from specactor.domain.airsspec.vocab import Category, Complexity, Lifecycle

replace = msgspec.structs.replace

PLAN_EDITABLE: frozenset[Lifecycle] = frozenset({"draft", "active", "blocked"})
BUILDING: frozenset[Lifecycle] = frozenset({"active", "blocked"})


class NewStep(msgspec.Struct, frozen=True):
    """A step as a caller gives it (already in canonical vocabulary)."""

    title: str
    description: str
    complexity: Complexity | None = None


def create_spec(spec_id: str, *, title: str, description: str, category: Category, content: str | None,
                dependencies: Sequence[Dependency], now: str) -> Bundle:
    """A new draft spec in the spec phase. A dependency listed twice is kept once (hard if any is)."""
    title = one_line(title)
    merged: dict[str, Dependency] = {}
    for dep in dependencies:
        if dep.spec_id not in merged or dep.kind == "hard":
            merged[dep.spec_id] = dep if dep.spec_id not in merged else replace(merged[dep.spec_id], kind="hard")
    meta = SpecMeta(title=title, description=description, category=category, state="draft",
                    dependencies=tuple(merged.values()), created_at=now, updated_at=now)
    body = content if content is not None else default_body(title, description)
    state = WorkflowState(spec_id=spec_id, lifecycle="draft", phase="spec", updated_at=now)
    return Bundle(spec_id=spec_id, spec=SpecDoc(meta=meta, content=body), state=state)


def update_spec(b: Bundle, *, title: str | None, description: str | None, content: str | None,
                category: Category | None, now: str) -> Bundle:
    if b.state.lifecycle == "archived":
        raise Conflict("read_only", f"spec '{b.spec_id}' is archived and can no longer change",
                       lifecycle="archived")
    meta = b.spec.meta
    meta = replace(meta, title=one_line(title) if title is not None else meta.title,
                   description=description if description is not None else meta.description,
                   category=category if category is not None else meta.category, updated_at=now)
    spec = SpecDoc(meta=meta, content=content if content is not None else b.spec.content)
    return replace(b, spec=spec, state=replace(b.state, updated_at=now)).synced()


def transition(b: Bundle, to_state: Lifecycle, reason: str | None, now: str) -> Bundle:
    """Raises:
        InvalidTransition: when the table does not allow the move.
    """
    check_transition(b.state.lifecycle, to_state)
    state = _moved(b.state, to_state, reason, now)
    if to_state == "done":
        state = replace(state, completed_at=now)
    return _touch_spec(replace(b, state=state), now).synced()


def create_plan(b: Bundle, approach: str, steps: Sequence[NewStep], now: str) -> Bundle:
    _plan_editable(b)
    if b.plan is not None:
        raise Conflict("plan_exists", f"spec '{b.spec_id}' already has a plan; change it with plan_update")
    plan = PlanDoc(spec_id=b.spec_id, approach=approach, steps=_steps(steps), created_at=now, updated_at=now)
    phase = "plan" if b.state.phase == "spec" else b.state.phase
    return replace(b, plan=plan, state=replace(b.state, phase=phase, updated_at=now)).synced()


def update_plan(b: Bundle, approach: str | None, steps: Sequence[NewStep] | None, now: str) -> Bundle:
    _plan_editable(b)
    if b.plan is None:
        raise NotFoundError("plan", b.spec_id)
    plan = b.plan
    if steps is not None:
        if b.state.phase == "build":
            raise Conflict("plan_locked", f"the build of spec '{b.spec_id}' has started, so its steps can no longer "
                           "be replaced; record the changes as deviations in build_complete", phase="build")
        plan = replace(plan, steps=_steps(steps))
    plan = replace(plan, approach=approach if approach is not None else plan.approach, updated_at=now)
    return replace(b, plan=plan, state=replace(b.state, updated_at=now)).synced()


def complete_step(b: Bundle, index: int, notes: str | None, now: str) -> Bundle:
    """Mark step `index` completed (again: idempotent; new notes replace the old)."""
    plan = _plan(b)
    if index >= len(plan.steps):
        raise StepOutOfRange(index, len(plan.steps))
    _building(b, "complete a step")
    step = plan.steps[index]
    cleaned = note(notes) if notes is not None else ""
    step = replace(step, status="completed", notes=cleaned or step.notes)
    steps = (*plan.steps[:index], step, *plan.steps[index + 1:])
    plan = replace(plan, steps=steps, updated_at=now)
    return replace(b, plan=plan, state=replace(b.state, updated_at=now)).synced()


def start_build(b: Bundle, plan_approved: bool, deps: DependencyReport, now: str) -> Bundle:
    """Raises:
        NotFoundError: no plan. Conflict: wrong phase or lifecycle. DependencyNotSatisfied.
    """
    _plan(b)
    if b.state.phase == "build":
        raise Conflict("build_started", f"the build of spec '{b.spec_id}' has already started", phase="build")
    if b.state.lifecycle not in ("draft", "active"):
        raise Conflict("wrong_lifecycle", f"spec '{b.spec_id}' is {b.state.lifecycle}; a build starts from draft "
                       "or active", lifecycle=b.state.lifecycle, allowed=["draft", "active"])
    if deps.blocking:
        states = {d.spec_id: d.state for d in deps.dependencies}
        raise DependencyNotSatisfied(b.spec_id, deps.blocking, states)
    state = b.state
    if state.lifecycle == "draft":
        state = _moved(state, "active", "build started", now)
    state = replace(state, phase="build", plan_approved=plan_approved, started_at=now, updated_at=now)
    return _touch_spec(replace(b, state=state), now).synced()


def update_build(b: Bundle, percentage: float | None, current_step: str | None, notes: str | None,
                 now: str) -> Bundle:
    _building(b, "report build progress")
    progress = b.state.build_progress
    if percentage is not None:
        if percentage < progress.percentage:
            raise Conflict("progress_backwards", f"build progress cannot go backwards: it is {progress.percentage} "
                           f"%, and {number(percentage)} % was reported", current=progress.percentage,
                           requested=number(percentage))
        progress = replace(progress, percentage=number(percentage))
    if current_step is not None:
        progress = replace(progress, current_step=current_step)
    if notes is not None:
        progress = replace(progress, notes=notes)
    return replace(b, state=replace(b.state, build_progress=progress, updated_at=now)).synced()


def complete_build(b: Bundle, summary: str, deviations: str | None, now: str) -> Bundle:
    if b.state.phase != "build":
        raise Conflict("wrong_phase", f"the build of spec '{b.spec_id}' has not started; call build_start first",
                       phase=b.state.phase, required="build")
    check_transition(b.state.lifecycle, "done")
    state = _moved(b.state, "done", "build completed", now)
    progress = replace(state.build_progress, percentage=100)
    state = replace(state, build_progress=progress, completed_at=now, summary=summary, deviations=deviations)
    return _touch_spec(replace(b, state=state), now).synced()


# ---------------------------------------------------------------------- helpers


def _moved(state: WorkflowState, to_state: Lifecycle, reason: str | None, now: str) -> WorkflowState:
    record = Transition(at=now, from_state=state.lifecycle, to_state=to_state, reason=reason)
    return replace(state, lifecycle=to_state, history=(*state.history, record), updated_at=now)


def _touch_spec(b: Bundle, now: str) -> Bundle:
    """The front matter mirrors the lifecycle, so a lifecycle change is also a spec change."""
    return replace(b, spec=replace(b.spec, meta=replace(b.spec.meta, updated_at=now)))


def _steps(steps: Sequence[NewStep]) -> tuple[PlanStep, ...]:
    return tuple(PlanStep(title=one_line(s.title), description=block(s.description), complexity=s.complexity)
                 for s in steps)


def _plan(b: Bundle) -> PlanDoc:
    if b.plan is None:
        raise NotFoundError("plan", b.spec_id)
    return b.plan


def _plan_editable(b: Bundle) -> None:
    if b.state.lifecycle not in PLAN_EDITABLE:
        raise Conflict("read_only", f"spec '{b.spec_id}' is {b.state.lifecycle}; its plan can no longer change",
                       lifecycle=b.state.lifecycle, allowed=sorted(PLAN_EDITABLE))


def _building(b: Bundle, what: str) -> None:
    if b.state.phase != "build":
        raise Conflict("wrong_phase", f"cannot {what} of spec '{b.spec_id}' before its build starts; call "
                       "build_start first", phase=b.state.phase, required="build")
    if b.state.lifecycle not in BUILDING:
        raise Conflict("wrong_lifecycle", f"cannot {what} of spec '{b.spec_id}': it is {b.state.lifecycle}",
                       lifecycle=b.state.lifecycle, allowed=sorted(BUILDING))
