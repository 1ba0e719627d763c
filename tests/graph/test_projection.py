"""The graph projection: its properties over generated workspaces (determinism, unit additivity,
locality, well-formed graphs, no crash on junk), then its mapping, told as sentences."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specactor.domain.airsspec import planfile, specfile, statefile
from specactor.domain.airsspec.model import PlanDoc, PlanStep, SpecDoc, SpecMeta, WorkflowState
from specactor.domain.airsspec.vocab import Lifecycle
from specactor.domain.graph.model import Graph, Node
from specactor.domain.graph.projection import (
    DictReader,
    discover_units,
    project,
    project_unit,
    units_of,
    workspace_id_from,
)
from specactor.domain.openspec.render import DeltaDoc, RequirementDoc, ScenarioDoc, render_delta, render_spec
from tests.graph.strategies import STAMP, Edit, Files, edits, junk, workspaces

WS = "acme/auth-svc"
LABELS = ("source:openspec", "specactor", "workspace:acme/auth-svc")
workspace_ids = st.from_regex(r"\A[A-Za-z0-9._/-]{1,64}\Z")


def graph_of(files: Files, ws: str = WS) -> Graph:
    return project(ws, DictReader(files))


# ---------------------------------------------------------------------- properties


@given(workspaces(), st.randoms(use_true_random=False))
def test_the_same_files_give_the_same_graph_whatever_their_order(files: Files, rng: random.Random) -> None:
    shuffled = list(files.items())
    rng.shuffle(shuffled)
    first, second = graph_of(files), graph_of(dict(shuffled))
    assert first == second
    assert first.digests() == second.digests() == graph_of(dict(files)).digests()


@given(workspaces())
def test_the_graph_is_the_union_of_its_units_and_units_share_no_key(files: Files) -> None:
    reader = DictReader(files)
    union = Graph()
    for unit in sorted(discover_units(reader)):
        part = project_unit(WS, unit, reader)
        assert {n.unit for n in part.nodes.values()} | {e.unit for e in part.edges.values()} <= {unit}
        assert not part.nodes.keys() & union.nodes.keys()
        assert not part.edges.keys() & union.edges.keys()
        union.update(part)
    assert union == project(WS, reader)


@given(workspaces().flatmap(lambda files: st.tuples(st.just(files), edits(files))))
def test_an_edit_changes_only_the_units_its_paths_name(case: tuple[Files, Edit]) -> None:
    files, edit = case
    after_files = edit.apply(files)
    touched = units_of(edit.paths)
    before, after = graph_of(files), graph_of(after_files)
    for one, other in ((before, after), (after, before)):
        for key, node in one.nodes.items():
            if node.unit not in touched:
                assert other.nodes.get(key) == node, key
        for key, edge in one.edges.items():
            if edge.unit not in touched:
                assert other.edges.get(key) == edge, key
    reader = DictReader(after_files)
    for unit in touched:  # and a touched unit re-projected alone is what the whole projection holds of it
        assert project_unit(WS, unit, reader) == after.select({unit})


@given(workspaces(), workspace_ids, workspace_ids)
def test_graphs_are_well_formed_and_workspaces_never_share_a_key(files: Files, ws: str, other: str) -> None:
    graph = graph_of(files, ws)
    for key, node in graph.nodes.items():
        assert key == node.key and len(key.encode()) <= 128
        assert list(node.labels) == sorted(set(node.labels))
        assert {f"workspace:{ws}", "specactor"} <= set(node.labels)
        assert ("source:openspec" in node.labels) != ("source:airsspec" in node.labels)
        assert isinstance(node.properties.get("tags"), list)
        msgspec.json.encode(node.properties)  # JSON values only
    for key, edge in graph.edges.items():
        assert key == edge.key
        assert edge.src in graph.nodes and edge.dst in graph.nodes
        assert graph.nodes[edge.src].unit == graph.nodes[edge.dst].unit == edge.unit
    if other != ws:
        second = graph_of(files, other)
        assert not graph.nodes.keys() & second.nodes.keys()
        assert not graph.edges.keys() & second.edges.keys()


paths = st.sampled_from(["openspec/specs/a/spec.md", "openspec/specs/a/b/spec.md", "openspec/changes/c/proposal.md",
                         "openspec/changes/c/design.md", "openspec/changes/c/tasks.md",
                         "openspec/changes/c/specs/a/spec.md", "openspec/changes/archive/2026-11-25-c/tasks.md",
                         "openspec/changes/archive/c/specs/a/spec.md", ".airsspec/specs/1-a/spec.md",
                         ".airsspec/specs/1-a/plan.md", ".airsspec/specs/1-a/state.toon"])


@given(st.dictionaries(paths, junk(), max_size=8))
def test_junk_in_every_file_never_raises_and_still_gives_a_well_formed_graph(files: Files) -> None:
    graph = graph_of(files)
    for node in graph.nodes.values():
        node.digest()
        assert "\x00" not in msgspec.json.encode(node.properties).decode()
    assert all(e.src in graph.nodes and e.dst in graph.nodes for e in graph.edges.values())


# ---------------------------------------------------------------------- the mapping, OpenSpec

PROPOSAL = ("# Change: Add 2FA\n\n## Why\nAccounts get taken over.\n\n## What Changes\n- A second factor\n\n"
            "## Impact\n- user-auth\n")
TASKS = ("## 1. Work\n- [x] 1.1 Add the table\n- [X] 1.2 Send codes\n- [~] 1.3 Verify codes\n- [-] 1.4 Docs\n"
         "- [/] 1.5 Metrics\n- [!] 1.6 Rollout\n- [ ] 1.7 BLOCKED: waits on legal\n- [ ] 1.8 Audit (Blocked)\n"
         "- [ ] Cleanup\n")
DELTA = render_delta(DeltaDoc(
    added=[RequirementDoc("Second Factor", ["The system MUST ask for a code and SHALL not log it."], [
        ScenarioDoc("Code asked", ["- **GIVEN** a user with 2FA", "- **WHEN** they log in",
                                   "- **THEN** a code is asked", "- **AND** no session starts yet"])])],
    removed=["Remember Me"], renamed=[("Login Audit", "Authentication Audit")]))


def change_files(folder: str = "openspec/changes/add-2fa") -> Files:
    return {f"{folder}/proposal.md": PROPOSAL, f"{folder}/design.md": "# Design\n\nTOTP codes, 30 s steps.\n",
            f"{folder}/tasks.md": TASKS, f"{folder}/specs/user-auth/spec.md": DELTA}


def test_a_change_projects_its_proposal_design_delta_specs_and_tasks_with_their_relationships() -> None:
    graph = graph_of(change_files())
    c = f"{WS}/change:add-2fa"
    spec = f"{c}/spec:user-auth"
    req = f"{spec}/req:Second Factor"
    assert graph.nodes[c] == Node(key=c, type="Change", unit="openspec:change:add-2fa", labels=LABELS,
                                  properties={"name": "add-2fa", "status": "active", "tags": []}, status="active")
    assert graph.nodes[f"{c}/proposal"].properties == {"intent": "Accounts get taken over.",
                                                       "scope": "- A second factor", "impact": "- user-auth",
                                                       "tags": []}
    assert graph.nodes[f"{c}/design"].properties == {"approach": "# Design\n\nTOTP codes, 30 s steps.", "tags": []}
    assert graph.nodes[spec].properties == {"name": "user-auth", "delta_type": "modified", "tags": []}
    assert graph.nodes[req].properties == {
        "name": "Second Factor", "description": "The system MUST ask for a code and SHALL not log it.",
        "strength": "MUST", "delta_type": "added", "tags": []}
    assert graph.nodes[f"{spec}/req:Remember Me"].properties["delta_type"] == "removed"
    renamed = graph.nodes[f"{spec}/req:Authentication Audit"].properties
    assert (renamed["delta_type"], renamed["description"]) == (
        "modified", 'Rename requirement from "Login Audit" to "Authentication Audit"')
    assert graph.nodes[f"{req}/scenario:Code asked"].properties == {
        "name": "Code asked", "title": "Code asked", "given": "a user with 2FA", "when": "they log in",
        "then": "a code is asked", "and_also": ["no session starts yet"], "tags": []}
    edges = {(e.type, e.src, e.dst) for e in graph.edges.values()}
    assert {("has_proposal", c, f"{c}/proposal"), ("has_design", c, f"{c}/design"), ("has_spec", c, spec),
            ("has_requirement", spec, req), ("has_scenario", req, f"{req}/scenario:Code asked"),
            ("has_task", c, f"{c}/task:1.1")} <= edges
    assert len(graph.nodes) == 1 + 2 + 1 + 3 + 1 + 9 and len(graph.edges) == len(graph.nodes) - 1


def test_task_status_follows_the_checkbox_and_blocked_words() -> None:
    graph = graph_of(change_files())
    tasks = {n.properties["number"]: (n.properties["status"], n.status, n.properties["description"])
             for n in graph.nodes.values() if n.type == "Task"}
    assert {number: status for number, (status, _, _) in tasks.items()} == {
        "1.1": "completed", "1.2": "completed", "1.3": "in_progress", "1.4": "in_progress", "1.5": "in_progress",
        "1.6": "blocked", "1.7": "blocked", "1.8": "blocked", "9": "pending"}
    assert all(status == own for status, own, _ in tasks.values())
    assert tasks["1.1"][2] == "Add the table" and tasks["9"][2] == "Cleanup"


@pytest.mark.parametrize(("statement", "strength"), [
    ("The system SHALL log in users.", "SHALL"), ("Users MAY and MUST do it.", "MAY"),
    ("Tokens SHOULD expire.", "SHOULD"), ("Users may log in; nothing is required.", None),
    ("The MUSTARD test SHALL pass.", "SHALL")])
def test_requirement_strength_is_the_first_upper_case_rfc_2119_word(statement: str, strength: str | None) -> None:
    spec = render_spec("auth", "Authenticate users.", [RequirementDoc("Login", [statement], [])])
    node = graph_of({"openspec/specs/auth/spec.md": spec}).nodes[f"{WS}/spec:auth/req:Login"]
    assert node.properties.get("strength") == strength
    assert node.properties["description"] == statement and "delta_type" not in node.properties


def test_a_main_spec_projects_spec_requirements_and_scenarios_with_a_nested_capability_as_domain() -> None:
    spec = render_spec("billing/invoices", "Bill customers monthly.", [
        RequirementDoc("Issue", ["The system SHALL issue invoices."], [ScenarioDoc("Month end", [
            "- **WHEN** a month ends", "- **THEN** an invoice is issued"])])])
    graph = graph_of({"openspec/specs/billing/invoices/spec.md": spec})
    root = f"{WS}/spec:billing%2Finvoices"
    assert graph.nodes[root].properties == {"name": "billing/invoices", "domain": "billing",
                                            "purpose": "Bill customers monthly.", "tags": []}
    assert graph.nodes[root].unit == "openspec:spec:billing/invoices"
    assert graph.nodes[f"{root}/req:Issue/scenario:Month end"].properties["then"] == "an invoice is issued"


def test_archiving_a_change_keeps_its_key_and_marks_it_archived() -> None:
    main = "openspec/specs/user-auth/spec.md"
    before = {**change_files(), main: render_spec("user-auth", "Log users in.", [])}
    archived = {p.replace("openspec/changes/add-2fa/", "openspec/changes/archive/2026-11-25-add-2fa/"): t
                for p, t in change_files().items()}
    after = {**archived, main: render_spec("user-auth", "Log users in.", [
        RequirementDoc("Second Factor", ["The system MUST ask for a code."], [])])}
    old, new = graph_of(before), graph_of(after)
    key = f"{WS}/change:add-2fa"
    assert new.nodes[key].properties == {"name": "add-2fa", "status": "archived", "tags": ["archived:2026-11-25"]}
    assert new.nodes[key].status == "archived"
    assert {k for k in old.nodes if k.startswith(key)} == {k for k in new.nodes if k.startswith(key)}
    assert f"{WS}/spec:user-auth/req:Second Factor" in new.nodes
    moved = [p for p in before if p not in after] + [p for p in after if p not in before] + [main]
    assert units_of(moved) == {"openspec:change:add-2fa", "openspec:spec:user-auth"}


def test_an_active_change_owns_the_key_and_each_archived_copy_is_keyed_by_its_folder() -> None:
    files = {**change_files(), **change_files("openspec/changes/archive/2025-01-01-add-2fa"),
             **change_files("openspec/changes/archive/add-2fa")}
    graph = graph_of(files)
    changes = {k: n.properties["status"] for k, n in graph.nodes.items() if n.type == "Change"}
    assert changes == {f"{WS}/change:add-2fa": "active", f"{WS}/archive:2025-01-01-add-2fa": "archived",
                       f"{WS}/archive:add-2fa": "archived"}
    assert {n.unit for n in graph.nodes.values()} == {"openspec:change:add-2fa"}


def test_without_an_active_folder_the_newest_archived_copy_owns_the_key() -> None:
    files = {**change_files("openspec/changes/archive/2025-01-01-add-2fa"),
             **change_files("openspec/changes/archive/2026-11-25-add-2fa")}
    graph = graph_of(files)
    assert graph.nodes[f"{WS}/change:add-2fa"].properties["tags"] == ["archived:2026-11-25"]
    assert f"{WS}/archive:2025-01-01-add-2fa/proposal" in graph.nodes


def test_duplicate_names_get_numbered_keys_and_long_ones_a_short_stable_key() -> None:
    long = "A requirement whose name goes on " * 5
    spec = render_spec("auth", "Authenticate.", [RequirementDoc("Login", ["It SHALL."], []),
                                                 RequirementDoc("Login", ["It MUST."], []),
                                                 RequirementDoc(long.strip(), ["It MAY."], [])])
    graph = graph_of({"openspec/specs/auth/spec.md": spec})
    assert graph.nodes[f"{WS}/spec:auth/req:Login"].properties["strength"] == "SHALL"
    assert graph.nodes[f"{WS}/spec:auth/req:Login#2"].properties["strength"] == "MUST"
    (short,) = [k for k in graph.nodes if "~" in k]
    assert len(short.encode()) == 128 and short.startswith(f"{WS}/spec:auth/req:A requirement")
    assert short in graph_of({"openspec/specs/auth/spec.md": spec}).nodes


def test_a_malformed_document_keeps_its_node_and_loses_only_its_contents() -> None:
    files = {"openspec/changes/c/proposal.md": "\x00\ud800\x89PNG", "openspec/changes/c/specs/a/spec.md": "",
             "openspec/specs/a/spec.md": "no headings at all", ".airsspec/specs/1-a/plan.md": "---\nnot: [closed\n"}
    graph = graph_of(files)
    assert graph.nodes[f"{WS}/change:c/proposal"].properties == {"intent": "\ufffd\ufffd\x89PNG", "tags": []}
    assert graph.nodes[f"{WS}/change:c/spec:a"].properties == {"name": "a", "delta_type": "modified", "tags": []}
    assert graph.nodes[f"{WS}/spec:a"].properties == {"name": "a", "tags": []}
    assert graph.nodes[f"{WS}/airsspec:1-a"].properties == {"name": "1-a", "status": "active", "tags": []}
    assert graph.nodes[f"{WS}/airsspec:1-a/design"].properties == {"tags": []}


# ---------------------------------------------------------------------- the mapping, AirsSpec


def airsspec_files(lifecycle: Lifecycle = "active") -> Files:
    meta = SpecMeta(title="User authentication", description="Log users in.", category="feature", state="draft",
                    dependencies=(), created_at=STAMP, updated_at=STAMP)
    steps = (PlanStep(title="Schema", description="Users table.", complexity="simple", status="completed"),
             PlanStep(title="Endpoints", description="", status="skipped"),
             PlanStep(title="UI", description="", complexity="complex", status="in_progress"))
    folder = ".airsspec/specs/1737734400-user-auth"
    return {f"{folder}/spec.md": specfile.render(SpecDoc(meta=meta, content="# User authentication\n\nBody.\n")),
            f"{folder}/plan.md": planfile.render(PlanDoc(spec_id="1737734400-user-auth", approach="JWT sessions.",
                                                         steps=steps, created_at=STAMP, updated_at=STAMP)),
            f"{folder}/state.toon": statefile.render(WorkflowState(spec_id="1737734400-user-auth",
                                                                   lifecycle=lifecycle, phase="build",
                                                                   updated_at=STAMP))}


def test_an_airsspec_spec_is_a_change_with_its_proposal_design_and_steps_as_tasks() -> None:
    graph = graph_of(airsspec_files())
    c = f"{WS}/airsspec:1737734400-user-auth"
    assert graph.nodes[c].properties == {"name": "User authentication", "status": "active", "tags": ["feature"]}
    assert graph.nodes[c].status == "active" and "source:airsspec" in graph.nodes[c].labels
    assert graph.nodes[f"{c}/proposal"].properties == {"intent": "Log users in.",
                                                       "scope": "# User authentication\n\nBody.", "tags": []}
    assert graph.nodes[f"{c}/design"].properties == {"approach": "JWT sessions.", "tags": []}
    assert graph.nodes[f"{c}/task:1"].properties == {"number": "1", "description": "Schema\n\nUsers table.",
                                                     "status": "completed", "complexity_points": 2, "tags": []}
    assert graph.nodes[f"{c}/task:2"].properties["tags"] == ["skipped"]
    assert graph.nodes[f"{c}/task:3"].status == "in_progress"
    assert sorted(e.type for e in graph.edges.values()) == ["has_design", "has_proposal"] + ["has_task"] * 3


@pytest.mark.parametrize(("lifecycle", "status"), [("done", "archived"), ("cancelled", "archived"),
                                                   ("archived", "archived"), ("blocked", "active"),
                                                   ("draft", "active")])
def test_an_airsspec_change_is_archived_once_its_lifecycle_is_over(lifecycle: Lifecycle, status: str) -> None:
    node = graph_of(airsspec_files(lifecycle)).nodes[f"{WS}/airsspec:1737734400-user-auth"]
    assert (node.properties["status"], node.status) == (status, lifecycle)


# ---------------------------------------------------------------------- units and ids


@pytest.mark.parametrize(("path", "unit"), [
    ("openspec/specs/auth/spec.md", "openspec:spec:auth"), ("openspec/specs/a/b/spec.md", "openspec:spec:a/b"),
    ("openspec/changes/add-2fa/specs/auth/spec.md", "openspec:change:add-2fa"),
    ("openspec/changes/archive/2026-11-25-add-2fa/tasks.md", "openspec:change:add-2fa"),
    ("openspec/changes/archive/undated/proposal.md", "openspec:change:undated"),
    (".airsspec/specs/1737734400-user-auth/plan.md", "airsspec:spec:1737734400-user-auth"),
    ("openspec/project.md", None), ("openspec/config.yaml", None), ("AGENTS.md", None), (".specactor/x", None),
    (".airsspec/config.toml", None), (".airsspec/specs/not-an-id/spec.md", None),
    ("openspec/specs/.hidden/spec.md", None), ("openspec/changes/.tmp/proposal.md", None)])
def test_units_of_names_the_unit_a_path_belongs_to(path: str, unit: str | None) -> None:
    assert units_of([path]) == ({unit} if unit else set())


def test_a_unit_gone_from_disk_or_not_a_unit_projects_nothing() -> None:
    reader = DictReader(change_files())
    assert project_unit(WS, "openspec:change:gone", reader) == Graph()
    assert project_unit(WS, "openspec:spec:../etc", reader) == Graph()
    assert project_unit(WS, "memory:x", reader) == Graph()
    with pytest.raises(ValueError, match="workspace id"):
        project(WS + ":x", reader)


@pytest.mark.parametrize(("remote", "folder", "expected"), [
    ("git@github.com:acme/auth-svc.git", "x", "acme/auth-svc"),
    ("https://github.com/acme/auth-svc", "x", "acme/auth-svc"),
    ("https://github.com/acme/auth-svc.git/", "x", "acme/auth-svc"),
    ("https://user:token@gitlab.com/group/sub/proj.git", "x", "group/sub/proj"),
    ("ssh://git@github.com:22/acme/auth-svc.git", "x", "acme/auth-svc"),
    ("git://example.org/acme/auth svc", "x", "acme/auth-svc"),
    (None, "my project", "my-project"), ("", "auth-svc", "auth-svc"), ("/srv/git/repo.git", "auth-svc", "auth-svc"),
    ("file:///srv/git/repo.git", "auth-svc", "auth-svc"), (None, "acme/auth-svc", "acme/auth-svc"),
    (None, "ünï", "-n-"), (None, "", "workspace"), (None, "..", "workspace"),
    ("https://github.com/" + "a" * 80, "x", "a" * 64)])
def test_workspace_id_from_a_remote_or_the_folder_name(remote: str | None, folder: str, expected: str) -> None:
    assert workspace_id_from(remote, folder) == expected


def test_dict_reader_lists_folders_sorted_with_their_kind() -> None:
    reader = DictReader({"b/x.md": "x", "a.md": "a", "b/c/d.md": "d"})
    assert reader.listdir("") == [("a.md", False), ("b", True)]
    assert reader.listdir("b") == [("c", True), ("x.md", False)]
    assert reader.listdir("a.md") is None and reader.listdir("zz") is None
    assert reader.text("b/x.md") == "x" and reader.text("b") is None
