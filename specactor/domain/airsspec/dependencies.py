"""Dependency checks: which dependencies are done, which block a build, which are missing,
whether a spec depends on itself, and the first cycle reachable through hard dependencies.

A dependency is satisfied when its spec is done (or archived after being done). Only hard
dependencies block a build; soft, child_of and parent_of ones are informational. Cycles are
looked for along hard edges only: a cycle there means no spec in it can ever be built.
"""

from collections.abc import Callable, Iterable

import msgspec

from specactor.domain.airsspec.model import Dependency
from specactor.domain.airsspec.vocab import BLOCKING_KINDS, DependencyKind, Lifecycle


class DepState(msgspec.Struct, frozen=True, gc=False):
    """What a dependency check needs to know about a spec."""

    lifecycle: Lifecycle
    completed: bool  # reached `done` at some point (so an archived spec still counts)
    hard: tuple[str, ...] = ()  # the ids of its own hard dependencies, for cycle search


class DependencyStatus(msgspec.Struct, frozen=True):
    spec_id: str
    kind: DependencyKind
    state: Lifecycle | None  # None: no such spec
    satisfied: bool


class DependencyReport(msgspec.Struct, frozen=True):
    spec_id: str
    all_satisfied: bool
    dependencies: list[DependencyStatus]
    blocking: list[str]
    missing: list[str]
    self_dependency: bool
    cycle: list[str] | None

    @property
    def satisfied_count(self) -> int:
        return sum(1 for d in self.dependencies if d.satisfied)


def is_satisfied(state: DepState | None) -> bool:
    return state is not None and (state.lifecycle == "done" or (state.lifecycle == "archived" and state.completed))


def check(spec_id: str, dependencies: Iterable[Dependency], lookup: Callable[[str], DepState | None],
          *, cycles: bool = True) -> DependencyReport:
    """The dependency report of `spec_id`; `lookup` answers for any spec id (None: missing)."""
    statuses, blocking, missing = [], [], []
    self_dependency = False
    for dep in dependencies:
        state = lookup(dep.spec_id)
        satisfied = dep.spec_id != spec_id and is_satisfied(state)
        statuses.append(DependencyStatus(dep.spec_id, dep.kind, state.lifecycle if state else None, satisfied))
        if dep.spec_id == spec_id:
            self_dependency = True
        if state is None and dep.spec_id not in missing:
            missing.append(dep.spec_id)
        if dep.kind in BLOCKING_KINDS and not satisfied and dep.spec_id not in blocking:
            blocking.append(dep.spec_id)
    own_hard = tuple(d.spec_id for d in dependencies if d.kind in BLOCKING_KINDS)
    cycle = find_cycle(spec_id, lambda s: own_hard if s == spec_id else _hard(lookup(s))) if cycles else None
    return DependencyReport(spec_id=spec_id, all_satisfied=not blocking and cycle is None and not self_dependency,
                            dependencies=statuses, blocking=blocking, missing=missing,
                            self_dependency=self_dependency, cycle=cycle)


def _hard(state: DepState | None) -> tuple[str, ...]:
    return state.hard if state is not None else ()


def find_cycle(start: str, edges: Callable[[str], Iterable[str]]) -> list[str] | None:
    """The first cycle reachable from `start`, as a path that ends where it begins (`[a, b, a]`)."""
    on_path: dict[str, int] = {}
    path: list[str] = []
    done: set[str] = set()
    stack: list[tuple[str, list[str]]] = [(start, list(edges(start)))]
    on_path[start] = 0
    path.append(start)
    while stack:
        node, todo = stack[-1]
        if not todo:
            stack.pop()
            path.pop()
            del on_path[node]
            done.add(node)
            continue
        nxt = todo.pop(0)
        if nxt in on_path:
            return [*path[on_path[nxt]:], nxt]
        if nxt in done:
            continue
        on_path[nxt] = len(path)
        path.append(nxt)
        stack.append((nxt, list(edges(nxt))))
    return None
