"""The enum vocabularies, and how the two spellings of each map onto one.

The seed's tool schemas and the AirsSpec code spell some values differently (`docs` and
`documentation`, `hard` and `blocked_by`, `moderate` and `medium`). Arguments accept both;
what is stored and answered is the canonical spelling (the seed's where it has one).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

Lifecycle = Literal["draft", "active", "done", "blocked", "cancelled", "archived"]
Phase = Literal["spec", "plan", "build"]

Category = Literal["feature", "bugfix", "refactor", "docs", "other", "enhancement", "infrastructure"]
CategoryIn = Literal["feature", "bugfix", "refactor", "docs", "other", "enhancement", "documentation",
                     "infrastructure"]

DependencyKind = Literal["hard", "soft", "child_of", "parent_of"]
DependencyKindIn = Literal["hard", "soft", "blocked_by", "related_to", "child_of", "parent_of"]

Complexity = Literal["trivial", "simple", "moderate", "complex"]
ComplexityIn = Literal["trivial", "simple", "moderate", "medium", "complex"]

StepStatus = Literal["pending", "in_progress", "completed", "blocked", "skipped"]

LIFECYCLES: Final[tuple[Lifecycle, ...]] = get_args(Lifecycle)
PHASES: Final[tuple[Phase, ...]] = get_args(Phase)
CATEGORIES: Final[tuple[Category, ...]] = get_args(Category)
DEPENDENCY_KINDS: Final[tuple[DependencyKind, ...]] = get_args(DependencyKind)
COMPLEXITIES: Final[tuple[Complexity, ...]] = get_args(Complexity)
STEP_STATUSES: Final[tuple[StepStatus, ...]] = get_args(StepStatus)

_CATEGORY: Final[dict[str, Category]] = {**{c: c for c in CATEGORIES}, "documentation": "docs"}
_KIND: Final[dict[str, DependencyKind]] = {**{k: k for k in DEPENDENCY_KINDS}, "blocked_by": "hard",
                                           "related_to": "soft"}
_COMPLEXITY: Final[dict[str, Complexity]] = {**{c: c for c in COMPLEXITIES}, "medium": "moderate"}
_STATUS: Final[dict[str, StepStatus]] = {**{s: s for s in STEP_STATUSES}, "inprogress": "in_progress"}

BLOCKING_KINDS: Final = frozenset({"hard"})  # only these must be done before a build starts


def category(value: str) -> Category | None:
    """The canonical category for either spelling, or None when it is neither."""
    return _CATEGORY.get(value)


def dependency_kind(value: str) -> DependencyKind | None:
    return _KIND.get(value)


def complexity(value: str) -> Complexity | None:
    return _COMPLEXITY.get(value)


def step_status(value: str) -> StepStatus | None:
    return _STATUS.get(value)


def lifecycle(value: str) -> Lifecycle | None:
    return value if value in LIFECYCLES else None  # type: ignore[return-value]


def phase(value: str) -> Phase | None:
    return value if value in PHASES else None  # type: ignore[return-value]
