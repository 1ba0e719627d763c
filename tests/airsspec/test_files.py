"""The workspace files: everything written parses back to what was written, and a file broken
by hand is refused with its name and the line of the problem."""

from __future__ import annotations

import pytest
from hypothesis import given

from specactor.domain.airsspec import configfile, journal, planfile, specfile, statefile
from specactor.domain.airsspec.errors import ValidationFailed
from specactor.domain.airsspec.model import PlanDoc, ProjectConfig, SpecDoc, WorkflowState
from tests.airsspec import strategies as s

SPEC = ".airsspec/specs/1737734400-user-authentication/spec.md"
PLAN = ".airsspec/specs/1737734400-user-authentication/plan.md"
STATE = ".airsspec/specs/1737734400-user-authentication/state.toon"


@given(doc=s.specs)
def test_any_spec_document_survives_a_round_trip_through_spec_md(doc: SpecDoc) -> None:
    assert specfile.parse(specfile.render(doc), SPEC) == doc


@given(plan=s.plans)
def test_any_plan_survives_a_round_trip_through_plan_md(plan: PlanDoc) -> None:
    assert planfile.parse(planfile.render(plan), PLAN, s.SPEC_ID) == plan


@given(state=s.states)
def test_any_workflow_state_survives_a_round_trip_through_toon(state: WorkflowState) -> None:
    assert statefile.parse(statefile.render(state), STATE, s.SPEC_ID) == state


@given(config=s.configs)
def test_any_config_survives_a_round_trip_through_toml(config: ProjectConfig) -> None:
    assert configfile.parse(configfile.render(config), ".airsspec/config.toml", "x") == config


def test_the_reference_toon_example_parses_and_is_written_back_byte_for_byte() -> None:
    import toons

    reference = ('spec_id: 1737734400-user-authentication\nlifecycle: active\nphase: build\nbuild_progress:\n'
                 '  total_steps: 5\n  completed_steps: 3\n  current_step: Implement JWT tokens\n  notes: null\n'
                 'updated_at: "2026-01-24T14:30:00Z"')
    assert toons.dumps(toons.loads(reference)) == reference


def test_a_journal_tells_which_specs_changed_since_a_generation_until_it_forgets() -> None:
    j = journal.Journal().advance(["a"]).advance(["b", "c"])
    assert journal.parse(journal.render(j)) == j
    assert j.changed_since(2) == set() and j.changed_since(3) is None
    assert j.changed_since(0) is None  # generation 1 is the oldest kept: it may have been cut
    long = journal.Journal()
    for i in range(journal.KEEP + 5):
        long = long.advance([f"s{i}"])
    assert long.changed_since(long.generation - 3) == {f"s{i}" for i in range(journal.KEEP + 2, journal.KEEP + 5)}
    assert long.changed_since(1) is None
    assert journal.parse(b"\xff") is None and journal.parse(b"generation: x") is None


# ---------------------------------------------------------------------- broken by hand

GOOD_SPEC = """---
title: User Authentication System
description: Implement secure user login/logout
category: feature
state: active
dependencies: []
created_at: 2026-01-24T10:00:00Z
updated_at: 2026-01-24T14:30:00Z
---

# User Authentication System
"""


@pytest.mark.parametrize(("broken", "line", "words"), [
    (GOOD_SPEC.replace("---\ntitle", "title", 1), 1, "must start with a '---'"),
    (GOOD_SPEC.replace("\n---\n\n#", "\n\n#"), 1, "not closed"),
    (GOOD_SPEC.replace("category: feature", "category: [feature"), 4, "invalid YAML"),
    (GOOD_SPEC.replace("category: feature", "category: poetry"), 4, "'category' must be one of"),
    (GOOD_SPEC.replace("state: active", "state: finished"), 5, "'state' must be one of"),
    (GOOD_SPEC.replace("title: User Authentication System\n", ""), 1, "'title' is required"),
    (GOOD_SPEC.replace("created_at: 2026-01-24T10:00:00Z", "created_at: yesterday"), 7, "'created_at' must be"),
    (GOOD_SPEC.replace("dependencies: []", "dependencies: [{spec_id: 1-a, kind: maybe}]"), 6, "dependency kind"),
    (GOOD_SPEC.replace("title: User", "title: \"User"), 2, "invalid YAML"),
])
def test_a_hand_broken_spec_md_names_the_file_and_line(broken: str, line: int, words: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        specfile.parse(broken, SPEC)
    assert (caught.value.file, caught.value.line) == (SPEC, line), caught.value
    assert words in caught.value.reason
    assert str(caught.value).startswith(f"{SPEC}:{line}: ")


def test_a_spec_saved_with_windows_line_endings_still_parses() -> None:
    assert specfile.parse(GOOD_SPEC.replace("\n", "\r\n"), SPEC) == specfile.parse(GOOD_SPEC, SPEC)


def test_the_seed_spec_example_parses_with_both_vocabularies() -> None:
    doc = specfile.parse(GOOD_SPEC.replace("dependencies: []", "dependencies:\n- spec_id: 1737648000-db\n"
                                           "  kind: blocked_by").replace("feature", "documentation"), SPEC)
    assert doc.meta.category == "docs" and doc.meta.dependencies[0].kind == "hard"
    assert doc.meta.created_at == "2026-01-24T10:00:00Z" and doc.content == "# User Authentication System\n"


GOOD_STATE = """spec_id: 1737734400-user-authentication
lifecycle: active
phase: build
updated_at: "2026-01-24T14:30:00Z"
build_progress:
  total_steps: 5
  completed_steps: 3
  percentage: 60
  current_step: Implement JWT tokens
  notes: null
"""


@pytest.mark.parametrize(("broken", "line", "words"), [
    (GOOD_STATE.replace("phase: build", "phase build"), 3, "invalid TOON"),
    (GOOD_STATE.replace("  percentage: 60", "    percentage: 60"), 8, "invalid TOON"),
    (GOOD_STATE.replace("lifecycle: active", "lifecycle: paused"), 2, "'lifecycle': Invalid enum value 'paused'"),
    (GOOD_STATE.replace("  percentage: 60", "  percentage: lots"), 8, "'build_progress.percentage': Expected"),
    (GOOD_STATE.replace("spec_id: 1737734400-user-authentication", "spec_id: 1-other"), 1, "spec_id must be"),
    (GOOD_STATE.replace('updated_at: "2026-01-24T14:30:00Z"', "updated_at: soon"), 4, "timestamp"),
    ('{\n  spec_id: "x"\n}', 1, "invalid TOON"),  # the seed's sample, which is not TOON
])
def test_a_hand_broken_state_toon_names_the_file_and_line(broken: str, line: int, words: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        statefile.parse(broken, STATE, "1737734400-user-authentication")
    assert (caught.value.file, caught.value.line) == (STATE, line), caught.value
    assert words in caught.value.reason


def test_the_seed_plan_example_parses_including_hand_written_status_words() -> None:
    text = """---
spec_id: 1737734400-user-authentication
approach: Use JWT tokens with bcrypt password hashing
created_at: 2026-01-24T11:00:00Z
updated_at: 2026-01-24T14:30:00Z
---

# Implementation Plan

## Approach

Use JWT tokens with bcrypt password hashing...

## Steps

### Step 1: Set up auth database schema
- **Complexity:** simple
- **Status:** completed
- **Notes:** Created users table with email, password_hash columns

### Step 2: Implement password hashing
- **Complexity:** medium
- **Status:** In Progress
Hash with bcrypt.
"""
    plan = planfile.parse(text, PLAN, "1737734400-user-authentication")
    assert [(st.title, st.status, st.complexity) for st in plan.steps] == [
        ("Set up auth database schema", "completed", "simple"), ("Implement password hashing", "in_progress",
                                                                 "moderate")]
    assert plan.steps[0].notes == "Created users table with email, password_hash columns"
    assert plan.steps[1].description == "Hash with bcrypt." and plan.completed_steps == 1


@pytest.mark.parametrize(("old", "new", "line"), [
    ("- **Status:** pending", "- **Status:** someday", 17),
    ("### Step 1: a", "### Step 1:", 16),
    ("spec_id: 1737734400-user-authentication", "spec_id: 1-b", 2),
])
def test_a_hand_broken_plan_md_names_the_file_and_line(old: str, new: str, line: int) -> None:
    from specactor.domain.airsspec.model import PlanStep

    plan = PlanDoc(spec_id=s.SPEC_ID, approach="x", steps=(PlanStep(title="a", description="b"),),
                   created_at="2026-01-24T11:00:00Z", updated_at="2026-01-24T11:00:00Z")
    text = planfile.render(plan)
    assert old in text
    with pytest.raises(ValidationFailed) as caught:
        planfile.parse(text.replace(old, new), PLAN, s.SPEC_ID)
    assert caught.value.line == line, (caught.value, text)
