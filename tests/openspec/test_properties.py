"""Hypothesis properties of the pure OpenSpec core: parsing round-trips what rendering writes, the
archive merge keeps every requirement no delta touches, and no input crashes a reader."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from specactor.domain.openspec.blocks import extract_requirements_section, parse_delta
from specactor.domain.openspec.change_rules import Context, validate_change
from specactor.domain.openspec.markdown import parse_spec
from specactor.domain.openspec.merge import MergeError, build_updated_spec
from specactor.domain.openspec.model import Root
from specactor.domain.openspec.render import DeltaDoc, RequirementDoc, ScenarioDoc, render_delta, render_spec
from specactor.domain.openspec.source import MemorySource
from specactor.domain.openspec.spec_rules import validate_spec_content
from specactor.domain.openspec.tasks import count_tasks, parse_tasks, tick
from specactor.domain.openspec.workspace import Blocked, list_changes, list_specs, show, validate

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=8)
PHRASE = st.lists(WORD, min_size=1, max_size=6).map(" ".join)
NAME = st.lists(WORD, min_size=1, max_size=4).map(" ".join)
STEP = PHRASE.map(lambda p: f"- **WHEN** {p}")


@st.composite
def requirement(draw: st.DrawFn, name: str) -> RequirementDoc:
    statement = draw(st.lists(PHRASE, min_size=1, max_size=3))
    scenarios = [ScenarioDoc(n, draw(st.lists(STEP, min_size=1, max_size=3)))
                 for n in draw(st.lists(NAME, min_size=1, max_size=3))]
    return RequirementDoc(name, [f"The system SHALL {statement[0]}", *statement[1:]], scenarios)


@st.composite
def requirements(draw: st.DrawFn, min_size: int = 0, max_size: int = 6) -> list[RequirementDoc]:
    names = draw(st.lists(NAME, min_size=min_size, max_size=max_size, unique_by=str.lower))
    return [draw(requirement(n)) for n in names]


@given(purpose=PHRASE, reqs=requirements(min_size=1))
def test_parsing_a_rendered_spec_gives_back_its_parts(purpose: str, reqs: list[RequirementDoc]) -> None:
    text = render_spec("cap", purpose, reqs)
    spec = parse_spec("cap", text)
    assert spec.overview == purpose
    assert [r.text for r in spec.requirements] == ["\n".join(r.statement) for r in reqs]
    assert [[s.rawText for s in r.scenarios] for r in spec.requirements] == [
        ["\n".join(s.steps) for s in r.scenarios] for r in reqs]
    assert [b.name for b in extract_requirements_section(text).blocks] == [r.name for r in reqs]


@given(added=requirements(), modified=requirements(), removed=st.lists(NAME, max_size=3),
       renamed=st.lists(st.tuples(NAME, NAME), max_size=3))
def test_parsing_a_rendered_delta_gives_back_its_operations(added: list[RequirementDoc], modified: list[RequirementDoc],
                                                            removed: list[str], renamed: list[tuple[str, str]]) -> None:
    plan = parse_delta(render_delta(DeltaDoc(added, modified, removed, renamed)))
    assert [b.name for b in plan.added] == [r.name for r in added]
    assert [b.name for b in plan.modified] == [r.name for r in modified]
    assert plan.removed == removed
    assert [(r.from_, r.to) for r in plan.renamed] == renamed
    assert not plan.unpaired and not plan.orphans


@st.composite
def merge_case(draw: st.DrawFn) -> tuple[list[RequirementDoc], DeltaDoc]:
    base = draw(requirements(min_size=1, max_size=8))
    roles = [draw(st.sampled_from(["keep", "keep", "modify", "remove", "rename"])) for _ in base]
    taken = {r.name.lower() for r in base}
    fresh = [n for n in draw(st.lists(NAME, max_size=6, unique_by=str.lower)) if n.lower() not in taken]
    added = [draw(requirement(n)) for n in fresh[:2]]
    renames = [(r.name, f"{n} renamed") for r, n in zip([r for r, role in zip(base, roles, strict=True)
                                                          if role == "rename"], fresh[2:], strict=False)]
    modified = [RequirementDoc(r.name, ["The system MUST change"], [*r.scenarios, ScenarioDoc("Extra", ["- ok"])])
                for r, role in zip(base, roles, strict=True) if role == "modify"]
    removed = [r.name for r, role in zip(base, roles, strict=True) if role == "remove"]
    return base, DeltaDoc(added, modified, removed, renames)


@given(case=merge_case())
def test_the_archive_merge_keeps_every_requirement_no_delta_touches(
        case: tuple[list[RequirementDoc], DeltaDoc]) -> None:
    base, delta = case
    assume(delta.added or delta.modified or delta.removed or delta.renamed)
    current = render_spec("cap", "A purpose long enough to be a real purpose for this capability here.", base)
    built = build_updated_spec("cap", "change", render_delta(delta), current)
    before = {b.name: b.raw for b in extract_requirements_section(current).blocks}
    after = extract_requirements_section(built.rebuilt).blocks
    touched = ({r.name for r in delta.modified} | set(delta.removed) | {a for a, _ in delta.renamed})
    untouched = [name for name in before if name not in touched]
    names_after = [b.name for b in after]
    assert [n for n in names_after if n in untouched] == untouched  # kept, in their order
    for block in after:
        if block.name in untouched:
            assert block.raw == before[block.name]
    assert set(names_after) == (set(before) - set(delta.removed) - {a for a, _ in delta.renamed}) | {
        b for _, b in delta.renamed} | {r.name for r in delta.added}
    assert built.counts.added == len(delta.added) and built.counts.removed == len(delta.removed)
    assert built.rebuilt.endswith("\n") and "\n\n\n" not in built.rebuilt


FRAGMENTS = st.sampled_from([
    "## ADDED Requirements", "## MODIFIED Requirements", "## REMOVED Requirements", "## RENAMED Requirements",
    "## Purpose", "## Requirements", "### Requirement: A", "### Requirement: B ###", "### Requirement:", "### Notes",
    "#### Scenario: s", "####", "- **WHEN** x", "The system SHALL x", "**ID**: 1", "```", "~~~~", "",
    "- FROM: `### Requirement: A`", "- TO: `### Requirement: C`", "- `### Requirement: B`", "# Title", "TBD",
    "- [ ] 1.1 task", "- [x] 2.1 done", "## 1. Group", "\ufeff", "<!-- c", "-->", "   ", "\t#### Scenario: t",
])
DOC = st.lists(st.one_of(FRAGMENTS, st.text(max_size=12)), max_size=30).flatmap(
    lambda parts: st.sampled_from(["\n", "\r\n", "\r"]).map(lambda sep: sep.join(parts)))


@given(spec=DOC, delta=DOC, tasks=DOC, meta=st.one_of(st.none(), DOC, st.just("schema: spec-driven\nskip_specs: true")))
def test_no_document_crashes_validate_show_list_or_merge(spec: str, delta: str, tasks: str, meta: str | None) -> None:
    files = {"specs/a/spec.md": spec, "changes/c/proposal.md": f"## Why\n{delta}\n## What Changes\n{spec}",
             "changes/c/specs/a/spec.md": delta, "changes/c/specs/b/spec.md": spec, "changes/c/tasks.md": tasks,
             "changes/c/specs/note.md": delta}
    if meta is not None:
        files["changes/c/.openspec.yaml"] = meta
    src = MemorySource(files)
    root = Root("/p", "nearest")
    ctx = Context("/p/openspec")
    validate_spec_content("a", spec)
    validate_change(src, "c", ctx, against_main=True)
    validate(src, root, ctx, item=None, kind=None, include_changes=True, include_specs=True, strict=True)
    list_changes(src, root)
    list_specs(src, root)
    for item, kind in (("a", "spec"), ("c", "change")):
        try:
            show(src, root, item, kind, "/p/openspec")  # type: ignore[arg-type]
        except Blocked:
            pass
    for target in (spec, None):
        try:
            build_updated_spec("a", "c", delta, target)
        except MergeError:
            pass


@given(tasks=DOC, which=st.integers(min_value=1, max_value=12))
def test_ticking_a_task_changes_exactly_that_one_line(tasks: str, which: int) -> None:
    found = parse_tasks(tasks)
    if which > len(found):
        return
    text, task, already = tick(tasks, str(which))
    total, done = count_tasks(text)
    before_total, before_done = count_tasks(tasks)
    assert total == before_total and done == before_done + (0 if already else 1)
    changed = [i for i, (a, b) in enumerate(zip(tasks.split("\n"), text.split("\n"), strict=True)) if a != b]
    assert changed == ([] if already else [task.line - 1])


@given(st.text())
def test_js_length_counts_utf16_code_units_as_javascript_does(text: str) -> None:
    from specactor.domain.openspec.spec_rules import js_length

    # One unit per code point, two above the Basic Multilingual Plane (a lone surrogate is one).
    assert js_length(text) == sum(2 if ord(c) > 0xFFFF else 1 for c in text)


_FOLDER = st.lists(st.sampled_from(["changes", "archive", "a", "a-b", "ab"]), min_size=1, max_size=3).map("/".join)


@given(st.lists(st.tuples(_FOLDER, _FOLDER), max_size=6), st.tuples(_FOLDER, _FOLDER))
def test_an_archive_touches_the_waiting_ones_exactly_when_a_folder_it_moves_is_in_or_above_one_they_move(
        waiting: list[tuple[str, str]], move: tuple[str, str]) -> None:
    # The set lookups of `_Archives.touches` answer as the pairwise prefix test they replaced.
    from types import SimpleNamespace
    from typing import Any, cast

    from specactor.toolsets.openspec import _Archives

    def plan(folders: tuple[str, str]) -> Any:
        return cast(Any, SimpleNamespace(specs=[], writes={}, deletes=[], move=folders))

    archives = _Archives(cast(Any, None))
    for one in waiting:
        archives.add(cast(Any, None), plan(one))
    theirs = [f"{folder}/" for one in waiting for folder in one]
    pairwise = any(a.startswith(b) or b.startswith(a) for a in (f"{m}/" for m in move) for b in theirs)
    assert archives.touches(plan(move)) == pairwise
