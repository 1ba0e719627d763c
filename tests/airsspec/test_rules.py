"""The rules, as pure functions: the lifecycle table, progress, dependencies and cycles, and the
phase order of the workflow operations."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specactor.domain.airsspec import workflow
from specactor.domain.airsspec.dependencies import DepState, check, find_cycle
from specactor.domain.airsspec.errors import (
    Conflict,
    DependencyNotSatisfied,
    InvalidTransition,
    NotFoundError,
    StepOutOfRange,
)
from specactor.domain.airsspec.lifecycle import check_transition, valid_transitions
from specactor.domain.airsspec.model import Bundle, Dependency
from specactor.domain.airsspec.progress import build_from_steps, plan_percentage
from specactor.domain.airsspec.vocab import LIFECYCLES, Lifecycle

ALLOWED = {("draft", "active"), ("active", "done"), ("active", "blocked"), ("active", "cancelled"),
           ("blocked", "active"), ("done", "archived"), ("cancelled", "archived")}
NOW = "2026-01-24T10:00:00Z"
LATER = "2026-01-24T11:00:00Z"


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(LIFECYCLES, LIFECYCLES)))
def test_a_transition_is_allowed_exactly_when_the_table_lists_it(src: Lifecycle, dst: Lifecycle) -> None:
    if (src, dst) in ALLOWED:
        check_transition(src, dst)
        return
    with pytest.raises(InvalidTransition) as caught:
        check_transition(src, dst)
    assert caught.value.details == {"error": "invalid_transition", "from": src, "to": dst,
                                    "valid_transitions": valid_transitions(src)}
    assert caught.value.message == f"Cannot transition from '{src}' to '{dst}'"


@given(total=st.integers(0, 1000), done=st.integers(0, 1000))
def test_percentages_follow_the_reference_including_no_steps(total: int, done: int) -> None:
    plan, build = plan_percentage(total, done), build_from_steps(total, done)
    assert 0 <= plan <= 100 and 0 <= build <= 100
    if total == 0:
        assert (plan, build) == (100, 0)
    else:
        assert plan == build == min(100, done * 100 // total)


def state(lifecycle: Lifecycle, *hard: str, completed: bool = False) -> DepState:
    return DepState(lifecycle, completed or lifecycle == "done", hard)


def test_a_dependency_report_names_blockers_missing_specs_self_dependencies_and_the_cycle() -> None:
    specs = {"2-b": state("done"), "3-c": state("active", "4-d"), "4-d": state("draft", "3-c"),
             "5-e": state("archived", completed=True), "6-f": state("archived")}
    deps = [Dependency("2-b", "hard"), Dependency("3-c", "hard"), Dependency("9-gone", "soft"),
            Dependency("5-e", "hard"), Dependency("6-f", "soft"), Dependency("1-a", "soft")]
    report = check("1-a", deps, specs.get)
    assert [(d.spec_id, d.state, d.satisfied) for d in report.dependencies] == [
        ("2-b", "done", True), ("3-c", "active", False), ("9-gone", None, False), ("5-e", "archived", True),
        ("6-f", "archived", False), ("1-a", None, False)]
    assert report.blocking == ["3-c"] and report.missing == ["9-gone", "1-a"]
    assert report.self_dependency and report.cycle == ["3-c", "4-d", "3-c"] and not report.all_satisfied


def test_a_hard_self_dependency_is_a_cycle_of_one() -> None:
    report = check("1-a", [Dependency("1-a", "hard")], {"1-a": state("draft")}.get)
    assert report.cycle == ["1-a", "1-a"] and report.blocking == ["1-a"]


@given(edges=st.dictionaries(st.integers(0, 7), st.lists(st.integers(0, 7), max_size=3), max_size=8),
       start=st.integers(0, 7))
def test_find_cycle_returns_a_real_cycle_exactly_when_one_is_reachable(edges: dict[int, list[int]],
                                                                       start: int) -> None:
    cycle = find_cycle(str(start), lambda n: [str(m) for m in edges.get(int(n), [])])
    reachable, frontier = {start}, [start]
    while frontier:
        for nxt in edges.get(frontier.pop(), []):
            if nxt not in reachable:
                reachable.add(nxt)
                frontier.append(nxt)

    def on_cycle(node: int) -> bool:  # node reaches itself
        seen, todo = set(), list(edges.get(node, []))
        while todo:
            n = todo.pop()
            if n == node:
                return True
            if n not in seen:
                seen.add(n)
                todo.extend(edges.get(n, []))
        return False

    if cycle is None:
        assert not any(on_cycle(n) for n in reachable)
    else:
        assert cycle[0] == cycle[-1] and len(cycle) >= 2
        assert all(int(b) in edges.get(int(a), []) for a, b in itertools.pairwise(cycle))
        assert int(cycle[0]) in reachable


# ---------------------------------------------------------------------- the phases

def new() -> Bundle:
    return workflow.create_spec("1-a", title=" A \n title ", description="d", category="feature", content=None,
                                dependencies=[Dependency("2-b", "soft"), Dependency("2-b", "hard")], now=NOW)


def no_deps() -> object:
    return check("1-a", [], lambda _: None, cycles=False)


def test_a_new_spec_is_a_draft_in_the_spec_phase_with_a_one_line_title_and_merged_dependencies() -> None:
    b = new()
    assert (b.state.lifecycle, b.state.phase, b.spec.meta.title) == ("draft", "spec", "A title")
    assert b.spec.meta.dependencies == (Dependency("2-b", "hard"),)
    assert b.spec.content == "# A title\n\nd\n"


def test_the_build_needs_a_plan_then_moves_a_draft_to_active_and_completes_to_done() -> None:
    b = new()
    with pytest.raises(NotFoundError):
        workflow.start_build(b, False, check("1-a", [], lambda _: None), NOW)
    b = workflow.create_plan(b, "approach", [workflow.NewStep("one", "x"), workflow.NewStep("two", "y")], NOW)
    assert b.state.phase == "plan"
    with pytest.raises(Conflict, match="before its build starts"):
        workflow.complete_step(b, 0, None, NOW)
    b = workflow.start_build(b, True, check("1-a", [], lambda _: None), LATER)
    assert (b.state.lifecycle, b.state.phase, b.state.plan_approved) == ("active", "build", True)
    assert b.spec.meta.state == "active" and b.state.history[-1].reason == "build started"
    with pytest.raises(Conflict, match="steps can no longer be replaced"):
        workflow.update_plan(b, None, [workflow.NewStep("x", "y")], LATER)
    b = workflow.complete_step(b, 1, "  note  \n\n more ", LATER)
    assert b.plan is not None and b.plan.steps[1].notes == "  note\n more"
    assert (b.state.build_progress.completed_steps, b.state.build_progress.percentage) == (1, 50)
    with pytest.raises(StepOutOfRange):
        workflow.complete_step(b, 2, None, LATER)
    with pytest.raises(Conflict, match="cannot go backwards"):
        workflow.update_build(b, 49.5, None, None, LATER)
    b = workflow.complete_build(b, "summary", None, LATER)
    assert (b.state.lifecycle, b.state.completed_at, b.state.build_progress.percentage) == ("done", LATER, 100)


def test_a_build_with_an_unfinished_hard_dependency_is_refused_naming_it() -> None:
    b = workflow.create_plan(new(), "a", [], NOW)
    report = check("1-a", b.spec.meta.dependencies, {"2-b": state("active")}.get)
    with pytest.raises(DependencyNotSatisfied) as caught:
        workflow.start_build(b, False, report, NOW)
    assert caught.value.details["blocking"] == ["2-b"] and caught.value.code == -32004
    assert "'2-b' (active)" in caught.value.message


def test_a_blocked_build_cannot_complete_and_an_archived_spec_cannot_change() -> None:
    b = workflow.start_build(workflow.create_plan(new(), "a", [], NOW), False,
                             check("1-a", [], lambda _: None), NOW)
    b = workflow.transition(b, "blocked", "waiting", NOW)
    with pytest.raises(InvalidTransition):
        workflow.complete_build(b, "s", None, NOW)
    b = workflow.transition(workflow.transition(workflow.transition(b, "active", None, NOW), "done", None, NOW),
                            "archived", None, LATER)
    assert b.state.completed_at == NOW
    with pytest.raises(Conflict, match="archived"):
        workflow.update_spec(b, title="x", description=None, content=None, category=None, now=LATER)
    with pytest.raises(Conflict, match="plan can no longer change"):
        workflow.update_plan(b, "x", None, LATER)
