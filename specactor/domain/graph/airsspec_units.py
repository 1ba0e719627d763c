"""AirsSpec units as graphs: a spec is a unit of proposed work with a lifecycle, so it maps to a
Change (its lifecycle as the object status), with its `spec.md` as the Proposal, its `plan.md`
as the Design and each plan step as a Task. Files are read with the AirsSpec parsers.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final, TypeVar

from specactor.domain.airsspec import layout, planfile, specfile, statefile
from specactor.domain.airsspec.ids import is_spec_id
from specactor.domain.airsspec.model import PlanDoc, PlanStep, SpecDoc, WorkflowState
from specactor.domain.graph.builder import UnitBuilder, guarded, put, read
from specactor.domain.graph.model import Graph
from specactor.domain.graph.reader import Reader
from specactor.domain.graph.units import AIRSSPEC_SPEC

T = TypeVar("T")
# Lifecycles whose work is over: the Change is archived (its own status keeps the exact lifecycle).
_OVER: Final = frozenset({"done", "archived", "cancelled"})
# A skipped step is settled (nothing is left to do); its tag says it was skipped, not done.
_STATUS: Final = {"pending": "pending", "in_progress": "in_progress", "completed": "completed",
                  "blocked": "blocked", "skipped": "completed"}
# The pack counts effort in points; AirsSpec grades complexity in words.
_POINTS: Final = {"trivial": 1, "simple": 2, "moderate": 3, "complex": 5}


def _parse_spec(spec_id: str, text: str) -> SpecDoc:
    return specfile.parse(text, layout.spec_file(spec_id))


def _parse_plan(spec_id: str, text: str) -> PlanDoc:
    return planfile.parse(text, layout.plan_file(spec_id), spec_id)


def _parse_state(spec_id: str, text: str) -> WorkflowState:
    return statefile.parse(text, layout.state_file(spec_id), spec_id)


def _parsed(reader: Reader, spec_id: str, files: set[str], name: str, parse: Callable[[str, str], T]) -> T | None:
    text = read(reader, f"{layout.SPECS}/{spec_id}/{name}") if name in files else None
    return guarded(partial(parse, spec_id, text)) if text is not None else None


def _task(step: PlanStep) -> dict[str, Any]:
    description = f"{step.title}\n\n{step.description}" if step.description else step.title
    props: dict[str, Any] = {"number": "", "description": description, "status": _STATUS[step.status],
                             "tags": ["skipped"] if step.status == "skipped" else []}
    put(props, "complexity_points", _POINTS.get(step.complexity or ""))
    return props


def project_airsspec(workspace_id: str, spec_id: str, reader: Reader) -> Graph:
    """The unit `airsspec:spec:<id>`: empty when `.airsspec/specs/<id>/` is not there.

    A file that does not parse keeps its node (Proposal, Design) with no content and no children;
    the lifecycle comes from `state.toon`, else from the spec's front matter.
    """
    b = UnitBuilder(workspace_id, AIRSSPEC_SPEC + spec_id, "airsspec")
    listing = reader.listdir(layout.spec_dir(spec_id).rstrip("/")) if is_spec_id(spec_id) else None
    if listing is None:
        return b.graph
    files = {name for name, is_dir in listing if not is_dir}

    spec = _parsed(reader, spec_id, files, "spec.md", _parse_spec)
    plan = _parsed(reader, spec_id, files, "plan.md", _parse_plan)
    state = _parsed(reader, spec_id, files, "state.toon", _parse_state)
    lifecycle = state.lifecycle if state else spec.meta.state if spec else None
    status = "archived" if lifecycle in _OVER else "active"
    props: dict[str, Any] = {"name": spec.meta.title if spec else spec_id, "status": status,
                             "tags": [spec.meta.category] if spec else []}
    change = b.node(b.root(f"airsspec:{spec_id}"), "Change", props, status=lifecycle)
    if "spec.md" in files:
        proposal: dict[str, Any] = {"intent": spec.meta.description if spec else "", "tags": []}
        put(proposal, "scope", spec.content.strip() if spec else "")
        b.node(change.child("proposal"), "Proposal", proposal, parent=change, relation="has_proposal")
    if "plan.md" in files:
        design: dict[str, Any] = {"tags": []}
        put(design, "approach", plan.approach.strip() if plan else "")
        b.node(change.child("design"), "Design", design, parent=change, relation="has_design")
    for number, step in enumerate(plan.steps if plan else (), start=1):
        task = {**_task(step), "number": str(number)}
        b.node(change.child(f"task:{number}"), "Task", task, status=task["status"], parent=change,
               relation="has_task")
    return b.graph
