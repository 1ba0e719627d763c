"""A reference model of the AirsSpec workflow, written from the rules (not from the code), for the
state-machine test: what each tool call should answer, and the state it should leave."""

from __future__ import annotations

from dataclasses import dataclass, field

TABLE = {"draft": ["active"], "active": ["done", "blocked", "cancelled"], "blocked": ["active"],
         "done": ["archived"], "cancelled": ["archived"], "archived": []}
PLAN_EDITABLE = {"draft", "active", "blocked"}
BUILDING = {"active", "blocked"}


@dataclass
class ModelSpec:
    title: str
    deps: list[tuple[str, str]]  # (spec id, canonical kind)
    lifecycle: str = "draft"
    phase: str = "spec"
    steps: list[bool] | None = None  # None: no plan; else completed flags
    percentage: float = 0
    completed: bool = False  # reached done at some point

    @property
    def done_enough(self) -> bool:
        return self.lifecycle == "done" or (self.lifecycle == "archived" and self.completed)

    def plan_progress(self) -> tuple[int, int, int]:
        if self.steps is None:
            return 0, 0, 0
        total, done = len(self.steps), sum(self.steps)
        return total, done, 100 if total == 0 else min(100, done * 100 // total)

    def floor(self) -> None:
        """Build progress is never below what the completed steps imply."""
        if self.steps and self.phase == "build":
            self.percentage = max(self.percentage, min(100, sum(self.steps) * 100 // len(self.steps)))


@dataclass
class Expect:
    """What a call should answer: success, or an error code and the details' `error` tag."""

    ok: bool
    code: str | None = None
    tag: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


OK = Expect(True)


def conflict(tag: str, **extra: object) -> Expect:
    return Expect(False, "CONFLICT", tag, extra)


def transition(spec: ModelSpec, to: str) -> Expect:
    if to not in TABLE[spec.lifecycle]:
        return conflict("invalid_transition", valid_transitions=TABLE[spec.lifecycle])
    spec.lifecycle = to
    if to == "done":
        spec.completed = True
    return OK


def update(spec: ModelSpec, title: str) -> Expect:
    if spec.lifecycle == "archived":
        return conflict("read_only")
    spec.title = title
    return OK


def plan_create(spec: ModelSpec, steps: int) -> Expect:
    if spec.lifecycle not in PLAN_EDITABLE:
        return conflict("read_only")
    if spec.steps is not None:
        return conflict("plan_exists")
    spec.steps = [False] * steps
    if spec.phase == "spec":
        spec.phase = "plan"
    return OK


def plan_update(spec: ModelSpec, steps: int | None) -> Expect:
    if spec.lifecycle not in PLAN_EDITABLE:
        return conflict("read_only")
    if spec.steps is None:
        return Expect(False, "NOT_FOUND")
    if steps is not None:
        if spec.phase == "build":
            return conflict("plan_locked")
        spec.steps = [False] * steps
    return OK


def step_complete(spec: ModelSpec, index: int) -> Expect:
    if spec.steps is None:
        return Expect(False, "NOT_FOUND")
    if index >= len(spec.steps):
        return Expect(False, "INVALID_INPUT")
    if spec.phase != "build":
        return conflict("wrong_phase")
    if spec.lifecycle not in BUILDING:
        return conflict("wrong_lifecycle")
    spec.steps[index] = True
    spec.floor()
    return OK


def build_start(spec: ModelSpec, specs: dict[str, ModelSpec]) -> Expect:
    if spec.steps is None:
        return Expect(False, "NOT_FOUND")
    if spec.phase == "build":
        return conflict("build_started")
    if spec.lifecycle not in ("draft", "active"):
        return conflict("wrong_lifecycle")
    blocking = [d for d, kind in spec.deps if kind == "hard" and not specs[d].done_enough]
    if blocking:
        return conflict("dependency_not_satisfied", blocking=blocking)
    spec.lifecycle, spec.phase = "active", "build"
    spec.floor()
    return OK


def build_update(spec: ModelSpec, percentage: float | None) -> Expect:
    if spec.phase != "build":
        return conflict("wrong_phase")
    if spec.lifecycle not in BUILDING:
        return conflict("wrong_lifecycle")
    if percentage is not None:
        if percentage < spec.percentage:
            return conflict("progress_backwards")
        spec.percentage = percentage
    return OK


def build_complete(spec: ModelSpec) -> Expect:
    if spec.phase != "build":
        return conflict("wrong_phase")
    if spec.lifecycle != "active":
        return conflict("invalid_transition", valid_transitions=TABLE[spec.lifecycle])
    spec.lifecycle, spec.completed, spec.percentage = "done", True, 100
    return OK
