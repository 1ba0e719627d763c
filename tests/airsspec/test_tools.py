"""The 12 AirsSpec tools through the full server: the seed's answers, the rules, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from specactor.domain.airsspec import layout
from specactor.toolsets import airsspec as toolset
from tests.airsspec.support import FIXED_SECONDS, Client, airsspec_server, bundle_on_disk, state_on_disk

AUTH = "1737734400-user-authentication"


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolset, "clock", lambda: FIXED_SECONDS)


async def planned(c: Client, title: str = "User Authentication", **extra: object) -> str:
    spec_id = (await c.ok("spec_create", title=title, description="Login", **extra))["spec_id"]
    await c.ok("plan_create", spec_id=spec_id, approach="JWT", steps=[
        {"title": "Schema", "description": "users table", "complexity": "simple"},
        {"title": "Hashing", "description": "bcrypt", "complexity": "medium"}])
    return str(spec_id)


async def test_spec_create_answers_the_seed_fields_and_creates_the_workspace(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        data = await c.ok("spec_create", title="User Authentication", description="Login", category="documentation",
                          dependencies=[])
    assert data == {"spec_id": AUTH, "created": True, "path": f".airsspec/specs/{AUTH}/"}
    assert (tmp_path / layout.CONFIG).read_text().startswith(f'[project]\nname = "{tmp_path.name}"')
    b = bundle_on_disk(tmp_path, AUTH)
    assert (b.spec.meta.category, b.state.lifecycle, b.state.phase, b.plan) == ("docs", "draft", "spec", None)


async def test_the_default_category_comes_from_the_workspace_config(tmp_path: Path) -> None:
    (tmp_path / ".airsspec").mkdir()
    (tmp_path / layout.CONFIG).write_text('[project]\nname = "p"\n\n[defaults]\ncategory = "refactor"\n')
    async with airsspec_server(tmp_path) as c:
        data = await c.ok("spec_create", title="T", description="")
        listed = await c.ok("spec_list", category="refactor")
    assert [s["id"] for s in listed["specs"]] == [data["spec_id"]]


async def test_two_specs_with_one_title_in_one_second_get_distinct_ids(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        first = await c.ok("spec_create", title="User Authentication", description="")
        second = await c.ok("spec_create", title="User Authentication", description="")
    assert (first["spec_id"], second["spec_id"]) == (AUTH, AUTH + "-2")


async def test_a_dependency_on_a_spec_that_does_not_exist_is_not_found_naming_it(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        error = await c.error("spec_create", title="T", description="", dependencies=[{"spec_id": "1-ghost"}])
    assert error["code"] == "NOT_FOUND" and error["details"]["id"] == "1-ghost"
    assert not (tmp_path / layout.SPECS).exists()


async def test_an_invalid_transition_is_a_conflict_with_from_to_and_the_valid_targets(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = (await c.ok("spec_create", title="T", description=""))["spec_id"]
        error = await c.error("spec_transition", spec_id=spec_id, to_state="done")
        moved = await c.ok("spec_transition", spec_id=spec_id, to_state="active", reason="go")
        same = await c.error("spec_transition", spec_id=spec_id, to_state="active")
    assert error == {"code": "CONFLICT", "message": "Cannot transition from 'draft' to 'done'", "retryable": False,
                     "details": {"error": "invalid_transition", "from": "draft", "to": "done",
                                 "valid_transitions": ["active"], "jsonrpc_code": -32003}}
    assert moved == {"spec_id": spec_id, "from_state": "draft", "to_state": "active", "transitioned": True}
    assert same["details"]["valid_transitions"] == ["done", "blocked", "cancelled"]
    assert state_on_disk(tmp_path, spec_id).history[-1].reason == "go"


async def test_the_whole_workflow_answers_as_the_seed_shows(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = await planned(c)
        started = await c.ok("build_start", spec_id=spec_id, plan_approved=True)
        step = await c.ok("plan_step_complete", spec_id=spec_id, step_index=1, notes="bcrypt cost 12")
        update = await c.ok("build_update", spec_id=spec_id, progress_percentage=60, current_step="JWT")
        status = await c.ok("spec_status", spec_id=spec_id)
        done = await c.ok("build_complete", spec_id=spec_id, summary="Done", deviations="none")
        final = await c.ok("spec_status", spec_id=spec_id)
    now = "2025-01-24T16:00:00Z"
    assert started == {"spec_id": spec_id, "build_started": True, "phase": "build", "plan_steps": 2}
    assert step == {"spec_id": spec_id, "step_index": 1, "step_title": "Hashing", "completed": True,
                    "plan_progress": {"total_steps": 2, "completed_steps": 1, "percentage": 50}}
    assert update == {"spec_id": spec_id, "updated": True, "updated_at": now,
                      "build_progress": {"percentage": 60, "current_step": "JWT", "notes": None}}
    assert status == {"spec_id": spec_id, "title": "User Authentication", "lifecycle_state": "active",
                      "phase": "build", "plan_progress": {"total_steps": 2, "completed_steps": 1, "percentage": 50},
                      "build_progress": {"percentage": 60, "current_step": "JWT"},
                      "dependencies": {"total": 0, "satisfied": 0, "blocked": 0}, "updated_at": now,
                      "completed_at": None}
    assert done == {"spec_id": spec_id, "build_completed": True, "lifecycle_state": "done", "completed_at": now}
    assert final["lifecycle_state"] == "done" and final["build_progress"]["percentage"] == 100
    assert bundle_on_disk(tmp_path, spec_id).spec.meta.state == "done"


async def test_build_start_with_an_unfinished_hard_dependency_names_the_blocker(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        base = (await c.ok("spec_create", title="Database", description=""))["spec_id"]
        spec_id = await planned(c, dependencies=[{"spec_id": base, "kind": "blocked_by"},
                                                 {"spec_id": base, "kind": "related_to"}])
        error = await c.error("build_start", spec_id=spec_id)
        report = await c.ok("spec_check_dependencies", spec_id=spec_id)
        status = await c.ok("spec_status", spec_id=spec_id)
    assert error["code"] == "CONFLICT" and error["details"] == {
        "error": "dependency_not_satisfied", "blocking": [base], "jsonrpc_code": -32004}
    assert "dependency not satisfied" in error["message"] and base in error["message"]
    assert report == {"spec_id": spec_id, "all_satisfied": False, "blocking": [base], "missing": [],
                      "self_dependency": False, "cycle": None,
                      "dependencies": [{"spec_id": base, "kind": "hard", "state": "draft", "satisfied": False}]}
    assert status["dependencies"] == {"total": 1, "satisfied": 0, "blocked": 1}


async def test_a_hand_made_cycle_and_a_missing_dependency_are_found(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        a = (await c.ok("spec_create", title="A", description=""))["spec_id"]
        b = (await c.ok("spec_create", title="B", description="", dependencies=[{"spec_id": a}]))["spec_id"]
        spec = tmp_path / layout.spec_file(a)
        spec.write_text(spec.read_text().replace(
            "dependencies: []", f"dependencies:\n- spec_id: {b}\n  kind: hard\n- spec_id: 1-gone\n  kind: soft"))
        report = await c.ok("spec_check_dependencies", spec_id=a)
    assert report["cycle"] == [a, b, a] and report["missing"] == ["1-gone"]
    assert report["blocking"] == [b] and not report["all_satisfied"]


async def test_plan_rules_need_a_spec_one_plan_and_an_index_inside_it(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        missing = await c.error("plan_create", spec_id="1-nope", approach="a", steps=[])
        spec_id = await planned(c)
        twice = await c.error("plan_create", spec_id=spec_id, approach="a", steps=[])
        replaced = await c.ok("plan_update", spec_id=spec_id, steps=[{"title": "Only", "description": "x"}])
        early = await c.error("plan_step_complete", spec_id=spec_id, step_index=0)
        await c.ok("build_start", spec_id=spec_id)
        outside = await c.error("plan_step_complete", spec_id=spec_id, step_index=1)
        no_plan = (await c.ok("spec_create", title="Bare", description=""))["spec_id"]
        plan_missing = await c.error("plan_update", spec_id=no_plan, approach="x")
    assert missing["code"] == "NOT_FOUND" and missing["details"]["id"] == "1-nope"
    assert twice["details"]["error"] == "plan_exists"
    assert replaced["total_steps"] == 1 and replaced["path"] == layout.plan_file(spec_id)
    assert early["details"]["error"] == "wrong_phase"
    assert outside["code"] == "INVALID_INPUT" and outside["details"] == {
        "field": "step_index", "rule": "range", "min": 0, "max": 0, "actual": 1}
    assert plan_missing["code"] == "NOT_FOUND" and plan_missing["details"]["kind"] == "plan"


@pytest.mark.parametrize("bad", ["../x", "1-a/b", "abc", "1-a\n", "1-A", "1-a\\b", ".."])
async def test_a_spec_id_outside_the_grammar_is_invalid_input(bad: str, tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        error = await c.error("spec_status", spec_id=bad)
        dep = await c.error("spec_create", title="T", description="", dependencies=[{"spec_id": bad}])
    assert error["code"] == "INVALID_INPUT" and error["details"]["rule"] == "pattern"
    assert dep["code"] == "INVALID_INPUT"


async def test_spec_list_filters_and_accepts_both_category_vocabularies(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        a = (await c.ok("spec_create", title="A", description="", category="docs"))["spec_id"]
        b = (await c.ok("spec_create", title="B", description="", category="bugfix"))["spec_id"]
        await c.ok("spec_transition", spec_id=b, to_state="active")
        everything = await c.ok("spec_list")
        docs = await c.ok("spec_list", category="documentation")
        active = await c.ok("spec_list", state="active")
    assert everything == {"total": 2, "specs": [
        {"id": a, "title": "A", "state": "draft", "category": "docs", "created_at": "2025-01-24T16:00:00Z"},
        {"id": b, "title": "B", "state": "active", "category": "bugfix", "created_at": "2025-01-24T16:00:00Z"}]}
    assert [s["id"] for s in docs["specs"]] == [a] and [s["id"] for s in active["specs"]] == [b]


async def test_a_hand_broken_spec_is_a_validation_error_and_never_reset(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = await planned(c)
        good = (await c.ok("spec_create", title="Fine", description=""))["spec_id"]
        state = tmp_path / layout.state_file(spec_id)
        broken = state.read_text().replace("phase: plan", "phase plan")
        state.write_text(broken)
        status = await c.error("spec_status", spec_id=spec_id)
        transition = await c.error("spec_transition", spec_id=spec_id, to_state="active")
        listed = await c.ok("spec_list")
        bundle = await c.read(f"airsspec:///{spec_id}")
        raw = await c.text(f"airsspec:///{spec_id}/state")
        assert (await c.ok("spec_status", spec_id=good))["title"] == "Fine"
    for error in (status, transition):
        assert error["code"] == "CONFLICT" and error["details"]["error"] == "validation_failed"
        assert error["details"]["file"] == layout.state_file(spec_id) and error["details"]["line"] == 3
        assert error["details"]["jsonrpc_code"] == -32005
    assert state.read_text() == broken == raw
    assert [s["id"] for s in listed["specs"]] == [good]
    assert listed["invalid"] == [{"id": spec_id, "file": layout.state_file(spec_id), "line": 3,
                                  "reason": status["details"]["reason"]}]
    assert bundle["error"]["code"] == -32005 and bundle["error"]["data"]["line"] == 3


async def test_a_hand_edit_shows_in_the_next_status_at_once(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = (await c.ok("spec_create", title="Before", description=""))["spec_id"]
        assert (await c.ok("spec_status", spec_id=spec_id))["title"] == "Before"
        spec = tmp_path / layout.spec_file(spec_id)
        spec.write_text(spec.read_text().replace("title: Before", "title: After the edit"))
        assert (await c.ok("spec_status", spec_id=spec_id))["title"] == "After the edit"


async def test_a_workspace_in_a_parent_directory_is_found_and_written_there(tmp_path: Path) -> None:
    (tmp_path / ".airsspec").mkdir()
    (tmp_path / layout.CONFIG).write_text('[project]\nname = "outer"\n')
    inner = tmp_path / "pkg" / "src"
    inner.mkdir(parents=True)
    async with airsspec_server(inner) as c:
        spec_id = (await c.ok("spec_create", title="Up", description=""))["spec_id"]
        await c.ok("spec_transition", spec_id=spec_id, to_state="active")
        config = await c.text("airsspec:///config")
    assert bundle_on_disk(tmp_path, spec_id).state.lifecycle == "active"
    assert not (inner / ".airsspec").exists() and 'name = "outer"' in config


async def test_a_hand_broken_spec_md_is_refused_naming_the_line_and_left_as_it_is(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = (await c.ok("spec_create", title="T", description=""))["spec_id"]
        spec = tmp_path / layout.spec_file(spec_id)
        broken = spec.read_text().replace("category: feature", "category: [feature")
        spec.write_text(broken)
        errors = [await c.error("spec_update", spec_id=spec_id, title="U"),
                  await c.error("plan_create", spec_id=spec_id, approach="a", steps=[]),
                  await c.error("spec_check_dependencies", spec_id=spec_id)]
        raw = await c.text(f"airsspec:///{spec_id}/spec")
        assert (await c.raw.request("ping"))["result"] == {}
    for error in errors:
        assert error["details"]["file"] == layout.spec_file(spec_id) and error["details"]["line"] == 4, error
    assert spec.read_text() == broken == raw and not (tmp_path / layout.plan_file(spec_id)).exists()
