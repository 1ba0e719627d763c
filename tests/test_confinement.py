"""Confinement: no resource or tool of the airsspec and openspec toolsets answers with a file from
outside the workspace, whichever level of the path a symlink replaces (the top folder, `specs`,
an item's folder, the file itself), over memory, stdio and HTTP; what is refused is a clear
error, and nothing outside is written. Also the confining helper itself, the change files a
change lists, id refusals in words, and resource names unique across toolsets.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from specactor.config import Config, SessionLogConfig
from specactor.fs.confined import Confined, read_confined
from specactor.fs.files import PathEscape
from specactor.protocol.uritemplate import UriTemplate
from specactor.testing import MemoryClient, everything, open_memory_server
from tests.conftest import check_frames, fixture_config

MARK = "zzsecretzz"  # in every outside file, and the name of an outside-only spec and change


# ---------------------------------------------------------------------- the helper


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """ws/a/b/f, and symlinks: inside (relative, absolute, climbing back in), out, a loop."""
    ws, out = tmp_path / "ws", tmp_path / "out"
    (ws / "a" / "b").mkdir(parents=True)
    out.mkdir()
    (ws / "a" / "b" / "f").write_text("inside")
    (out / "f").write_text(MARK)
    os.symlink("a/b", ws / "rel-in")
    os.symlink(ws / "a", ws / "abs-in")
    os.symlink("..", ws / "a" / "up")
    os.symlink("../out", ws / "rel-out")
    os.symlink(out, ws / "abs-out")
    os.symlink("../../out/f", ws / "a" / "file-out")
    os.symlink("loop", ws / "loop")
    return ws


@pytest.mark.parametrize("rel", ["a/b/f", "rel-in/f", "abs-in/b/f", "a/up/a/b/f", "a/up/rel-in/f"])
def test_a_symlink_that_stays_inside_the_root_is_followed(tree: Path, rel: str) -> None:
    with Confined(tree) as files:
        assert files.read(rel) == b"inside"
        assert files.stat(rel) is not None


@pytest.mark.parametrize("rel", ["rel-out/f", "abs-out/f", "a/file-out", "a/up/rel-out/f", "a/up/a/file-out",
                                 "abs-out/missing", "loop"])
def test_a_symlink_leading_out_of_the_root_is_refused_naming_it(tree: Path, rel: str) -> None:
    with Confined(tree) as files:
        with pytest.raises(PathEscape, match="symlink"):
            files.read(rel)
        with pytest.raises(PathEscape):
            files.stat(rel)
    with pytest.raises(PathEscape):
        read_confined(tree, rel)


def test_without_links_every_symlink_on_the_way_is_refused_and_a_final_one_is_seen_as_itself(tree: Path) -> None:
    with Confined(tree, links=False) as files:
        assert files.read("a/b/f") == b"inside"
        for rel in ("rel-in/f", "abs-in/b/f", "a/up/a/b/f", "rel-out/f", "a/file-out"):
            with pytest.raises(PathEscape, match="is a symlink"):
                files.read(rel)
        final = files.stat("rel-in", follow=False)
        assert final is not None and final.st_size == len("a/b")


def test_a_symlink_leaving_the_confining_folder_is_refused_even_inside_the_root(tree: Path) -> None:
    (tree / "c").mkdir()
    (tree / "c" / "f").write_text("beside")
    with Confined(tree, "a") as files:
        assert files.read("b/f") == b"inside" and files.read("up/a/b/f") == b"inside"
        with pytest.raises(PathEscape, match="outside 'a'"):
            files.read("up/c/f")
        with pytest.raises(PathEscape, match="outside the workspace"):
            files.read("up/abs-out/f")
        with pytest.raises(PathEscape, match="outside 'a'"):
            files.scandir("up")
    with Confined(tree, "rel-in") as files:  # the confining folder itself reached through a symlink inside
        assert files.read("f") == b"inside"
    with Confined(tree, "abs-out") as files, pytest.raises(PathEscape):
        files.read("f")


def test_a_file_in_a_folder_open_already_is_still_checked_when_it_became_a_symlink(tree: Path) -> None:
    # A lookup in a folder the walk opened before starts there; a final symlink is resolved as ever.
    f = tree / "a" / "b" / "f"
    with Confined(tree) as files, Confined(tree, links=False) as strict:
        assert files.read("a/b/f") == b"inside" and strict.read("a/b/f") == b"inside"
        f.unlink()
        os.symlink("../../rel-out/f", f)
        with pytest.raises(PathEscape, match="symlink"):
            files.read("a/b/f")
        with pytest.raises(PathEscape):
            files.stat("a/b/f")
        with pytest.raises(PathEscape, match="is a symlink"):
            strict.read("a/b/f")
        f.unlink()
        (tree / "a" / "g").write_text("moved")
        os.symlink("../g", f)
        assert files.read("a/b/f") == b"moved"
        final = strict.stat("a/b/f", follow=False)
        assert final is not None and final.st_size == len("../g")


def test_missing_files_are_none_and_many_folders_keep_a_bounded_number_open(tree: Path) -> None:
    for i in range(40):
        (tree / "many" / str(i)).mkdir(parents=True)
        (tree / "many" / str(i) / "f").write_text(str(i))
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
    with Confined(tree) as files:
        assert files.read("nope") is None and files.stat("a/b/f/under-a-file") is None
        assert [files.read(f"many/{i}/f") for i in range(40)] == [str(i).encode() for i in range(40)]
        if before:
            assert len(os.listdir("/proc/self/fd")) - before <= 20
    if before:
        assert len(os.listdir("/proc/self/fd")) == before


# ---------------------------------------------------------------------- workspaces

OPENSPEC_FILES = {
    "openspec/project.md": "# Project\n\nPublic context.\n",
    "openspec/AGENTS.md": "# Agents\n\nPublic instructions.\n",
    "openspec/specs/cap/spec.md": "# cap Specification\n\n## Purpose\nPublic purpose, long enough to be a purpose.\n\n"
                                  "## Requirements\n### Requirement: Public thing\nThe system SHALL do the public "
                                  "thing.\n\n#### Scenario: Works\n- **WHEN** asked\n- **THEN** it works\n",
    "openspec/changes/ch/proposal.md": "# Change: Public change\n\n## Why\nA public reason that is long enough to "
                                       "pass the validation rules.\n\n## What Changes\n- **cap:** Public change\n",
    "openspec/changes/ch/tasks.md": "## 1. Work\n- [ ] 1.1 Public task\n- [ ] 1.2 Other public task\n",
    "openspec/changes/ch/design.md": "# Design\n\nPublic design.\n",
    "openspec/changes/ch/specs/cap/spec.md": "## ADDED Requirements\n### Requirement: Public addition\nThe "
                                             "system SHALL add publicly.\n\n#### Scenario: Added\n- **WHEN** x\n"
                                             "- **THEN** y\n",
    "openspec/changes/archive/2020-01-01-old/proposal.md": "# Change: Public old change\n",
}
OPENSPEC_LEVELS = ["openspec", "openspec/specs", "openspec/specs/cap", "openspec/specs/cap/spec.md",
                   "openspec/changes", "openspec/changes/ch", "openspec/changes/ch/proposal.md",
                   "openspec/changes/ch/tasks.md", "openspec/changes/ch/design.md", "openspec/changes/ch/specs",
                   "openspec/changes/ch/specs/cap", "openspec/changes/ch/specs/cap/spec.md",
                   "openspec/changes/archive", "openspec/project.md", "openspec/AGENTS.md"]
AIRSSPEC_LEVELS = [".airsspec", ".airsspec/specs", ".airsspec/specs/{id}", ".airsspec/specs/{id}/spec.md",
                   ".airsspec/specs/{id}/plan.md", ".airsspec/specs/{id}/state.toon", ".airsspec/config.toml"]


def server_config(root: Path, toolset: str) -> Config:
    return Config(root=str(root), toolsets=[toolset], session_log=SessionLogConfig(enabled=False))


@asynccontextmanager
async def serve(root: Path, toolset: str) -> AsyncIterator[MemoryClient]:
    async with open_memory_server(server_config(root, toolset)) as client:
        with trio.fail_after(10):
            await client.initialize()
        yield client
        check_frames(client)


async def call(client: MemoryClient, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = await client.request("tools/call", {"name": name, "arguments": arguments}, timeout=20)
    return reply


@pytest.fixture(scope="module")
def airsspec_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with one spec that has a plan and a state (its id: `spec_id` below)."""
    root = tmp_path_factory.mktemp("airsspec-template")

    async def build() -> None:
        async with serve(root, "airsspec") as client:
            created = await call(client, "spec_create", {"title": "Public spec", "description": "Public"})
            spec_id = created["result"]["structuredContent"]["data"]["spec_id"]
            steps = [{"title": "Public step", "description": "Public"}]
            calls: list[tuple[str, dict[str, Any]]] = [
                ("plan_create", {"approach": "Public approach", "steps": steps}),
                ("build_start", {"plan_approved": True}),
                ("build_update", {"notes": "Public notes", "current_step": "Public step"})]
            for name, arguments in calls:
                reply = await call(client, name, {"spec_id": spec_id, **arguments})
                assert reply["result"]["structuredContent"]["success"], reply

    trio.run(build)
    return root


def spec_id(root: Path) -> str:
    [found] = os.listdir(root / ".airsspec" / "specs")
    return found


def outside_copy(workspace: Path, top: str, outside: Path) -> None:
    """`top` copied to `outside`, every file marked, plus an item that exists only outside."""
    shutil.copytree(workspace / top, outside / top)
    for path in (outside / top).rglob("*"):
        if path.is_file():
            text = path.read_text().replace("Public", MARK)
            path.write_text(text if MARK in text else f"# {MARK}\n{text}")
    if top == "openspec":
        shutil.copytree(outside / "openspec/specs/cap", outside / f"openspec/specs/{MARK}")
        shutil.copytree(outside / "openspec/changes/ch", outside / f"openspec/changes/{MARK}")
    else:
        shutil.copytree(outside / f".airsspec/specs/{spec_id(workspace)}", outside / f".airsspec/specs/1-{MARK}")


def replace_with_symlink(workspace: Path, outside: Path, rel: str, relative: bool) -> None:
    here = workspace / rel
    if here.is_dir():
        shutil.rmtree(here)
    else:
        here.unlink()
    there = outside / rel
    os.symlink(os.path.relpath(there, here.parent) if relative else there, here)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def materialise_openspec(root: Path) -> None:
    for rel, text in OPENSPEC_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def level_cases(levels: list[str]) -> Iterator[Any]:
    for level in levels:
        for relative in (False, True):
            yield pytest.param(level, relative, id=f"{level}-{'relative' if relative else 'absolute'}")


# ---------------------------------------------------------------------- what a client can ask

VALUES = {"capability": "cap", "changeId": "ch", "path": "specs/cap/spec.md"}
OPENSPEC_TOOLS: list[tuple[str, dict[str, Any]]] = [
    ("list", {}), ("list", {"specs": True}), ("show", {"item": "cap", "type": "spec"}),
    ("show", {"item": "ch", "type": "change"}), ("show", {"item": "ch", "deltasOnly": True}),
    ("validate", {"item": "cap", "type": "spec"}), ("validate", {"item": "ch", "type": "change"}),
    ("validate", {"all": True, "strict": True}), ("archive", {"changeId": "ch", "dryRun": True}),
    # the writers last: what they refuse, and what they would write outside
    ("task_complete", {"changeId": "ch", "task": "1.1"}), ("update_project_context", {"content": "# New\n"}),
    ("update_project_context", {"content": "More", "merge": True}), ("init", {}),
    ("archive", {"changeId": "ch", "force": True})]


def airsspec_tools(spec: str) -> list[tuple[str, dict[str, Any]]]:
    return [("spec_list", {}), ("spec_status", {"spec_id": spec}), ("spec_check_dependencies", {"spec_id": spec}),
            ("spec_create", {"title": "Dependent", "description": "", "dependencies": [{"spec_id": spec}]}),
            ("spec_update", {"spec_id": spec, "description": "Changed"}),
            ("spec_transition", {"spec_id": spec, "to_state": "archived"}),
            ("plan_create", {"spec_id": spec, "approach": "A", "steps": [{"title": "S", "description": ""}]}),
            ("plan_update", {"spec_id": spec, "approach": "B"}),
            ("plan_step_complete", {"spec_id": spec, "step_index": 0, "notes": "n"}),
            ("build_start", {"spec_id": spec, "plan_approved": True}),
            ("build_update", {"spec_id": spec, "progress_percentage": 50}),
            ("build_complete", {"spec_id": spec, "summary": "Done"})]


async def uris(client: MemoryClient, scheme: str, values: dict[str, str]) -> list[str]:
    """Every resource listed and every template expanded with `values`, of one toolset (`scheme`)."""
    listed = (await client.request("resources/list"))["result"]["resources"]
    templates = (await client.request("resources/templates/list"))["result"]["resourceTemplates"]
    found = [r["uri"] for r in listed if r["uri"].startswith(scheme)]
    for template in templates:
        if template["uriTemplate"].startswith(scheme):
            tpl = UriTemplate(template["uriTemplate"])
            assert set(tpl.variables) <= set(values), f"no test value for {template['uriTemplate']}"
            found.append(tpl.expand(**values))
    return found


async def ask_everything(client: MemoryClient, scheme: str, values: dict[str, str],
                         tools: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """(what was asked, the reply) for every resource, then every tool call, in order."""
    answers: list[tuple[str, dict[str, Any]]] = []
    for method in ("resources/list", "resources/templates/list"):
        answers.append((method, await client.request(method)))
    for uri in await uris(client, scheme, values):
        answers.append((uri, await client.request("resources/read", {"uri": uri}, timeout=20)))
    templates = (await client.request("resources/templates/list"))["result"]["resourceTemplates"]
    for template in (t["uriTemplate"] for t in templates if t["uriTemplate"].startswith(scheme)):
        for variable in UriTemplate(template).variables:
            params = {"ref": {"type": "ref/resource", "uri": template}, "argument": {"name": variable, "value": ""}}
            answers.append((f"complete {template} {variable}", await client.request("completion/complete", params)))
    for name, arguments in tools:
        answers.append((f"{name} {arguments}", await call(client, name, arguments)))
    return answers


def check_answers(answers: list[tuple[str, dict[str, Any]]]) -> None:
    """No answer holds anything from outside; each refusal is a clear error, never a crash."""
    for asked, reply in answers:
        assert MARK not in json.dumps(reply), (asked, reply)
        if "error" in reply:
            assert reply["error"]["code"] in (-32002, -32602), (asked, reply)
            assert reply["error"]["message"], (asked, reply)
            continue
        content = reply["result"].get("structuredContent")
        if isinstance(content, dict) and not content.get("success", True):
            error = content["error"]
            assert error["code"] in ("NOT_FOUND", "INVALID_INPUT", "CONFLICT"), (asked, reply)
            if error["code"] == "INVALID_INPUT":
                assert "symlink" in error["message"] or "outside" in error["message"], (asked, reply)


# ---------------------------------------------------------------------- the walk over every level


def test_every_tool_taking_an_id_or_path_is_walked(tmp_path: Path) -> None:
    async def names() -> dict[str, set[str]]:
        async with open_memory_server(Config(root=str(tmp_path), toolsets=["airsspec", "openspec"],
                                             session_log=SessionLogConfig(enabled=False))) as client:
            await client.initialize()
            tools = (await client.request("tools/list"))["result"]["tools"]
        return {t["name"]: set(t["inputSchema"].get("properties", {})) for t in tools}

    taking = {name for name, props in trio.run(names).items()
              if props & {"spec_id", "dependencies", "item", "changeId", "content"}}
    walked = {name for name, _ in OPENSPEC_TOOLS} | {name for name, _ in airsspec_tools("1-x")}
    assert taking <= walked


@pytest.mark.parametrize(("level", "relative"), list(level_cases(OPENSPEC_LEVELS)))
async def test_no_openspec_resource_or_tool_answers_from_outside_through_a_symlink(
        tmp_path: Path, level: str, relative: bool) -> None:
    workspace, outside = tmp_path / "project", tmp_path / "outside"
    materialise_openspec(workspace)
    outside_copy(workspace, "openspec", outside)
    replace_with_symlink(workspace, outside, level, relative)
    before = snapshot(outside)
    async with serve(workspace, "openspec") as client:
        answers = await ask_everything(client, "openspec://", VALUES, OPENSPEC_TOOLS)
    check_answers(answers)
    assert snapshot(outside) == before


@pytest.mark.parametrize(("level", "relative"), list(level_cases(AIRSSPEC_LEVELS)))
async def test_no_airsspec_resource_or_tool_answers_from_outside_through_a_symlink(
        tmp_path: Path, airsspec_template: Path, level: str, relative: bool) -> None:
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    shutil.copytree(airsspec_template, workspace)
    spec = spec_id(workspace)
    outside_copy(workspace, ".airsspec", outside)
    replace_with_symlink(workspace, outside, level.format(id=spec), relative)
    before = snapshot(outside)
    async with serve(workspace, "airsspec") as client:
        answers = await ask_everything(client, "airsspec:///", {"spec_id": spec}, airsspec_tools(spec))
    check_answers(answers)
    assert snapshot(outside) == before


async def test_an_item_folder_behind_a_symlink_is_refused_over_http_in_both_toolsets(
        tmp_path: Path, airsspec_template: Path) -> None:
    from tests.http.support import http_server, initialize, legacy_call

    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    shutil.copytree(airsspec_template, workspace)
    spec = spec_id(workspace)
    outside_copy(workspace, ".airsspec", outside)
    replace_with_symlink(workspace, outside, f".airsspec/specs/{spec}", relative=False)
    materialise_openspec(workspace)
    outside_copy(workspace, "openspec", outside)
    replace_with_symlink(workspace, outside, "openspec/specs/cap", relative=False)
    async with http_server(workspace) as server:
        sid = await initialize(server.client)
        replies = [await legacy_call(server.client, sid, "resources/read", {"uri": uri})
                   for uri in (f"airsspec:///{spec}/spec", f"airsspec:///{spec}/plan", f"airsspec:///{spec}/state",
                               f"airsspec:///{spec}", "openspec://specs/cap")]
    for reply in replies:
        assert MARK not in json.dumps(reply) and reply["error"]["code"] == -32002, reply


def test_a_symlinked_specs_folder_is_refused_over_stdio_naming_the_symlink(tmp_path: Path,
                                                                          airsspec_template: Path) -> None:
    from tests.protocol.stdio_support import StdioServer

    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    shutil.copytree(airsspec_template, workspace)
    spec = spec_id(workspace)
    outside_copy(workspace, ".airsspec", outside)
    replace_with_symlink(workspace, outside, ".airsspec/specs", relative=True)
    with StdioServer(workspace) as server:
        server.initialize()
        replies = [server.request("resources/read", {"uri": f"airsspec:///{spec}/{part}"})
                   for part in ("spec", "plan", "state")]
        status = server.request("tools/call", {"name": "spec_status", "arguments": {"spec_id": spec}})
    for reply in replies:
        assert MARK not in json.dumps(reply) and reply["error"]["code"] == -32002, reply
        assert "'.airsspec/specs' is a symlink" in reply["error"]["message"]
    error = status["result"]["structuredContent"]["error"]
    assert error["code"] == "INVALID_INPUT" and "'.airsspec/specs' is a symlink" in error["message"]


# ---------------------------------------------------------------------- what a change lists, ids, names


async def test_every_file_a_change_lists_can_be_read_by_its_uri(tmp_path: Path) -> None:
    materialise_openspec(tmp_path)
    (tmp_path / "openspec/changes/ch/notes.txt").write_text("notes\n")
    async with serve(tmp_path, "openspec") as client:
        listed = (await client.request("resources/read", {"uri": "openspec://changes/ch"}))["result"]["contents"]
        reads = {item["uri"]: await client.request("resources/read", {"uri": item["uri"]}) for item in listed}
        missing = await client.request("resources/read", {"uri": "openspec://changes/ch/specs/nope/spec.md"})
        folder = await client.request("resources/read", {"uri": "openspec://changes/ch/specs"})
    assert {item["uri"] for item in listed} >= {"openspec://changes/ch/proposal",
                                                "openspec://changes/ch/specs/cap/spec.md",
                                                "openspec://changes/ch/notes.txt"}
    for item in listed:
        [content] = reads[item["uri"]]["result"]["contents"]
        assert (content["uri"], content["text"], content["mimeType"]) == (item["uri"], item["text"], item["mimeType"])
    assert missing["error"]["code"] == -32002 and "specs/nope/spec.md" in missing["error"]["message"]
    assert folder["error"]["code"] == -32002


@pytest.mark.parametrize("bad", ["../x", "a/../b", ".."])
async def test_an_id_with_dot_dot_is_refused_in_words_not_with_a_regex(tmp_path: Path, bad: str) -> None:
    async with open_memory_server(Config(root=str(tmp_path), toolsets=["airsspec", "openspec"],
                                         session_log=SessionLogConfig(enabled=False))) as client:
        await client.initialize()
        calls: list[tuple[str, dict[str, Any]]] = [
            ("spec_status", {"spec_id": bad}), ("show", {"item": bad}), ("archive", {"changeId": bad}),
            ("task_complete", {"changeId": bad, "task": "1"}),
            ("spec_create", {"title": "t", "description": "", "dependencies": [{"spec_id": bad}]})]
        errors = [(await call(client, name, arguments))["result"]["structuredContent"]["error"]
                  for name, arguments in calls]
        prompt = await client.request("prompts/get", {"name": "review_spec", "arguments": {"spec_id": bad}})
    for error in errors:
        assert error["code"] == "INVALID_INPUT" and error["details"]["rule"] == "pattern", error
        assert repr(bad) in error["message"] and "'..'" in error["message"], error
        assert error["details"]["pattern"] not in error["message"] and "(?" not in error["message"], error
    assert prompt["error"]["code"] == -32602 and repr(bad) in prompt["error"]["message"]
    assert "'..'" in prompt["error"]["message"] and "^" not in prompt["error"]["message"]


async def test_an_id_with_a_final_newline_is_refused_in_words(tmp_path: Path) -> None:
    async with serve(tmp_path, "airsspec") as client:
        reply = await call(client, "spec_status", {"spec_id": "1-a\n"})
    error = reply["result"]["structuredContent"]["error"]
    assert error["code"] == "INVALID_INPUT" and "lowercase letters" in error["message"] and "^" not in error["message"]


async def test_resource_and_template_names_are_unique_across_every_toolset(tmp_path: Path,
                                                                          airsspec_template: Path) -> None:
    shutil.copytree(airsspec_template / ".airsspec", tmp_path / ".airsspec")
    materialise_openspec(tmp_path)
    async with open_memory_server(fixture_config(tmp_path, session_log=SessionLogConfig(enabled=False)),
                                  everything.register) as client:
        await client.initialize()
        resources = (await client.request("resources/list"))["result"]["resources"]
        templates = (await client.request("resources/templates/list"))["result"]["resourceTemplates"]
    names = [r["name"] for r in resources] + [t["name"] for t in templates]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert {"airsspec-specs", "openspec-specs", "airsspec-spec", "openspec-spec", "static-text"} <= set(names)
