"""Behaviour of the openspec toolset through the full in-memory server: tools, resources,
prompts, writes, and the workspace rules (paths, symlinks, OPENSPEC_ROOT)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from specactor.actors.storages import Storages
from specactor.config import ConfigError, OpenSpecConfig, load, openspec_project
from specactor.testing import MemoryClient, open_memory_server
from tests.conftest import check_frames
from tests.openspec.support import config
from tests.openspec.workspaces import basic, materialise, nested


@asynccontextmanager
async def server(root: Path, era: str = "legacy") -> AsyncIterator[MemoryClient]:
    async with open_memory_server(config(root)) as client:
        with trio.fail_after(30):
            if era == "legacy":
                await client.initialize()
            yield client
        check_frames(client)


async def call(client: MemoryClient, name: str, **arguments: Any) -> dict[str, Any]:
    reply = await client.request("tools/call", {"name": name, "arguments": arguments})
    return reply["result"]["structuredContent"]  # type: ignore[no-any-return]


async def read(client: MemoryClient, uri: str) -> dict[str, Any]:
    return await client.request("resources/read", {"uri": uri})  # type: ignore[no-any-return]


def text_of(reply: dict[str, Any]) -> str:
    return reply["result"]["contents"][0]["text"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- surface


async def test_the_toolset_offers_seven_tools_ten_resources_and_three_prompts(tmp_path: Path) -> None:
    async with server(tmp_path) as client:
        tools = {t["name"] for t in (await client.request("tools/list"))["result"]["tools"]}
        static = {r["uri"] for r in (await client.request("resources/list"))["result"]["resources"]}
        templates = {t["uriTemplate"] for t in (await client.request("resources/templates/list"))["result"]
                     ["resourceTemplates"]}
        prompts = {p["name"] for p in (await client.request("prompts/list"))["result"]["prompts"]}
    assert tools >= {"init", "list", "show", "validate", "archive", "update_project_context", "task_complete"}
    assert {f"openspec://{n}" for n in ("instructions", "project", "specs", "changes", "archive")} <= static
    assert {"openspec://specs/{+capability}", "openspec://changes/{changeId}", "openspec://changes/{changeId}/proposal",
            "openspec://changes/{changeId}/tasks", "openspec://changes/{changeId}/design"} <= templates
    assert prompts >= {"openspec-propose", "openspec-apply", "openspec-archive"}


async def test_prompts_walk_through_the_seed_steps_with_the_real_resources_and_tools(tmp_path: Path) -> None:
    async with server(tmp_path) as client:
        propose = await client.request("prompts/get", {"name": "openspec-propose",
                                                       "arguments": {"description": "Add SSO", "scope": "refactor"}})
        apply = await client.request("prompts/get", {"name": "openspec-apply", "arguments": {"changeId": "add-sso"}})
        archive = await client.request("prompts/get", {"name": "openspec-archive",
                                                       "arguments": {"changeId": "add-sso"}})
    texts = [r["result"]["messages"][0]["content"]["text"] for r in (propose, apply, archive)]
    assert "Add SSO" in texts[0] and "openspec://instructions" in texts[0] and "validate" in texts[0]
    assert "skip_specs" in texts[0]
    assert "openspec://changes/add-sso" in texts[1] and "task_complete" in texts[1]
    assert all(step in texts[2] for step in ("dryRun", "validate", "archive", "openspec://specs"))


# ---------------------------------------------------------------------- init and resources


async def test_init_creates_the_1x_layout_and_refuses_a_second_time(tmp_path: Path) -> None:
    async with server(tmp_path) as client:
        first = await call(client, "init")
        second = await call(client, "init")
    assert first["success"] and first["data"]["created"] == [
        "openspec/config.yaml", "openspec/specs/.gitkeep", "openspec/changes/archive/.gitkeep"]
    assert first["data"]["nextSteps"]
    assert (tmp_path / "openspec/config.yaml").read_text().startswith("schema: spec-driven\n")
    assert not second["success"] and second["error"]["code"] == "CONFLICT"
    assert "already initialised" in second["error"]["message"]


async def test_instructions_and_project_fall_back_to_templates(tmp_path: Path) -> None:
    async with server(tmp_path) as client:
        instructions = text_of(await read(client, "openspec://instructions"))
        project = text_of(await read(client, "openspec://project"))
    assert instructions.startswith("# OpenSpec Instructions") and "task_complete" in instructions
    assert project.startswith("# Project Context")


async def test_documents_come_from_agents_md_project_md_or_config_context(tmp_path: Path) -> None:
    materialise(nested(), tmp_path / "old")
    materialise({"openspec/config.yaml": "schema: spec-driven\ncontext: |\n  Tech: Rust\n"}, tmp_path / "new")
    async with server(tmp_path / "old") as client:
        agents = text_of(await read(client, "openspec://instructions"))
        project = text_of(await read(client, "openspec://project"))
    async with server(tmp_path / "new") as client:
        context = text_of(await read(client, "openspec://project"))
    assert agents == "# Agents\n\nCustom instructions.\n" and project == "# Project\n\nA billing system.\n"
    assert context == "# Project Context\n\nTech: Rust\n"


async def test_lists_link_to_item_resources_and_the_archive_is_newest_first(tmp_path: Path) -> None:
    materialise(basic(), tmp_path)
    async with server(tmp_path) as client:
        specs = text_of(await read(client, "openspec://specs"))
        changes = text_of(await read(client, "openspec://changes"))
        archive = text_of(await read(client, "openspec://archive"))
    assert "- [task-list](openspec://specs/task-list) (2 requirements)" in specs
    assert "[add-two-factor-auth](openspec://changes/add-two-factor-auth) — Add two-factor authentication (2/4 tasks)" \
        in changes
    assert "archive" not in changes.replace("Archived", "")
    assert archive.index("2025-02-01-newer-change") < archive.index("2025-01-01-old-change")


async def test_a_change_resource_returns_every_file_as_its_own_content_item(tmp_path: Path) -> None:
    materialise(basic(), tmp_path)
    async with server(tmp_path) as client:
        whole = await read(client, "openspec://changes/add-two-factor-auth")
        tasks = text_of(await read(client, "openspec://changes/add-two-factor-auth/tasks"))
    uris = [c["uri"] for c in whole["result"]["contents"]]
    assert uris == ["openspec://changes/add-two-factor-auth/proposal", "openspec://changes/add-two-factor-auth/tasks",
                    "openspec://changes/add-two-factor-auth/specs/notifications/spec.md",
                    "openspec://changes/add-two-factor-auth/specs/user-auth/spec.md"]
    assert tasks == (tmp_path / "openspec/changes/add-two-factor-auth/tasks.md").read_text()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_missing_item_is_resource_not_found_with_a_clear_message(tmp_path: Path, era: str) -> None:
    materialise(basic(), tmp_path)
    async with server(tmp_path, era) as client:
        ask = client.request if era == "legacy" else client.modern
        spec = await ask("resources/read", {"uri": "openspec://specs/nope"})
        design = await ask("resources/read", {"uri": "openspec://changes/add-two-factor-auth/design"})
        change = await ask("resources/read", {"uri": "openspec://changes/archive"})
    code = -32002 if era == "legacy" else -32602
    assert spec["error"]["code"] == code and "openspec/specs/nope/spec.md does not exist" in spec["error"]["message"]
    assert design["error"]["code"] == code and "has no design.md" in design["error"]["message"]
    assert change["error"]["code"] == code


async def test_nested_capabilities_read_through_the_reserved_template(tmp_path: Path) -> None:
    materialise(nested(), tmp_path)
    async with server(tmp_path) as client:
        spec = text_of(await read(client, "openspec://specs/billing/invoices"))
        shown = await call(client, "show", item="members/profile")
        listed = await client.request("resources/list")
    assert spec.startswith("# billing/invoices Specification")
    assert shown["data"]["requirementCount"] == 1
    assert "openspec://specs/billing/invoices" in {r["uri"] for r in listed["result"]["resources"]}


# ---------------------------------------------------------------------- path escapes


ESCAPES = ["/etc/passwd", "../outside", "a/../../outside", "..", "a\\b", "nul\x00x", "/", "a//b", "./x"]


@pytest.mark.parametrize("bad", ESCAPES)
async def test_path_escapes_are_invalid_input_on_every_tool(tmp_path: Path, bad: str) -> None:
    materialise(basic(), tmp_path)
    async with server(tmp_path) as client:
        results = [await call(client, "show", item=bad), await call(client, "validate", item=bad),
                   await call(client, "archive", changeId=bad), await call(client, "task_complete", changeId=bad,
                                                                             task="1.1")]
    for result in results:
        assert not result["success"] and result["error"]["code"] == "INVALID_INPUT", result


@pytest.mark.parametrize("uri", ["openspec://specs/../secret", "openspec://specs/%2e%2e/x", "openspec://specs/a%5Cb",
                                 "openspec://specs/a%00b", "openspec://changes/..", "openspec://changes/a%5Cb/tasks",
                                 "openspec://changes/%2e%2e/proposal", "openspec://specs//etc/passwd"])
async def test_path_escapes_are_refused_on_every_resource(tmp_path: Path, uri: str) -> None:
    materialise(basic(), tmp_path)
    async with server(tmp_path) as client:
        reply = await read(client, uri)
    assert reply["error"]["code"] in (-32002, -32602), reply


async def test_symlinks_pointing_out_of_openspec_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    materialise({"secret/spec.md": "# secret\n\n## Purpose\nTop secret purpose text that is long enough.\n\n"
                                   "## Requirements\n", "change/proposal.md": "# Secret change\n"}, outside)
    root = materialise(basic(), tmp_path / "project")
    os.symlink(outside / "secret", root / "openspec/specs/leak")
    os.symlink(outside / "secret/spec.md", root / "openspec/specs/task-list/../user-auth/../leak2.md")
    (root / "openspec/specs/filelink").mkdir()
    os.symlink(outside / "secret/spec.md", root / "openspec/specs/filelink/spec.md")
    os.symlink(outside / "change", root / "openspec/changes/evil")
    async with server(root) as client:
        specs = await call(client, "list", specs=True)
        show_link = await call(client, "show", item="filelink", type="spec")
        show_dir = await call(client, "show", item="leak", type="spec")
        archive = await call(client, "archive", changeId="evil")
        resource = await read(client, "openspec://specs/leak")
    assert {s["id"] for s in specs["data"]["specs"]} == {"task-list", "user-auth"}
    assert show_link["error"]["code"] == "INVALID_INPUT" or "not found" in show_link["error"]["message"]
    assert show_dir["error"]["code"] == "INVALID_INPUT"
    assert archive["error"]["code"] == "INVALID_INPUT"
    assert reply_is_not_found(resource) and "Top secret" not in str(resource)


def reply_is_not_found(reply: dict[str, Any]) -> bool:
    return reply.get("error", {}).get("code") in (-32002, -32602)


# ---------------------------------------------------------------------- project context and tasks


async def test_update_project_context_replaces_appends_and_rewrites_one_section(tmp_path: Path) -> None:
    materialise({"openspec/project.md": "# Project\n\n## Purpose\nOld.\n\n## Tech Stack\n- Go\n"}, tmp_path)
    path = tmp_path / "openspec/project.md"
    async with server(tmp_path) as client:
        section = await call(client, "update_project_context", content="- Python\n- trio", section="Tech Stack")
        after_section = path.read_text()
        await call(client, "update_project_context", content="## Notes\nAppended.", merge=True)
        after_merge = path.read_text()
        replaced = await call(client, "update_project_context", content="# Fresh\n")
    assert section["data"] == {"file": "openspec/project.md", "mode": "section", "section": "Tech Stack",
                               "bytes": len(after_section.encode())}
    assert after_section == "# Project\n\n## Purpose\nOld.\n\n## Tech Stack\n\n- Python\n- trio\n"
    assert after_merge == after_section.rstrip("\n") + "\n\n## Notes\nAppended."
    assert replaced["data"]["mode"] == "replace" and path.read_text() == "# Fresh\n"


async def test_update_project_context_edits_the_context_of_a_1x_config_yaml(tmp_path: Path) -> None:
    async with server(tmp_path) as client:
        await call(client, "init")
        result = await call(client, "update_project_context", content="Tech: Python 3.11\nUses trio")
        await call(client, "update_project_context", content="Be kind", section="Conventions")
        project = text_of(await read(client, "openspec://project"))
    config_text = (tmp_path / "openspec/config.yaml").read_text()
    assert result["data"]["file"] == "openspec/config.yaml"
    assert "context: |" in config_text and "# Per-artifact rules (optional)" in config_text
    assert project == "# Project Context\n\nTech: Python 3.11\nUses trio\n\n## Conventions\n\nBe kind\n"
    assert not (tmp_path / "openspec/project.md").exists()


async def test_task_complete_ticks_exactly_one_task_by_id_or_position(tmp_path: Path) -> None:
    materialise(basic(), tmp_path)
    tasks = tmp_path / "openspec/changes/add-two-factor-auth/tasks.md"
    async with server(tmp_path) as client:
        by_id = await call(client, "task_complete", changeId="add-two-factor-auth", task="1.3")
        again = await call(client, "task_complete", changeId="add-two-factor-auth", task="1.3")
        by_position = await call(client, "task_complete", changeId="add-two-factor-auth", task="4")
        missing = await call(client, "task_complete", changeId="add-two-factor-auth", task="9.9")
        no_change = await call(client, "task_complete", changeId="nope", task="1")
    assert by_id["data"] == {"changeId": "add-two-factor-auth", "alreadyDone": False, "completedTasks": 3,
                             "totalTasks": 4, "task": {"id": "1.3", "line": 4, "description": "1.3 Verify codes"}}
    assert again["data"]["alreadyDone"] is True and by_position["data"]["completedTasks"] == 4
    assert tasks.read_text() == ("## 1. Implementation\n- [x] 1.1 Add OTP table\n- [x] 1.2 Send codes\n"
                                 "- [x] 1.3 Verify codes\n- [x] 1.4 Docs\n")
    assert missing["error"]["code"] == "NOT_FOUND" and no_change["error"]["code"] == "NOT_FOUND"


# ---------------------------------------------------------------------- archive


async def test_archive_dry_run_reports_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    materialise(basic(), tmp_path)
    before = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "openspec").rglob("*"))
    async with server(tmp_path) as client:
        dry = await call(client, "archive", changeId="add-two-factor-auth", dryRun=True, force=True)
    assert dry["data"]["dryRun"] is True
    assert [(s["id"], s["action"]) for s in dry["data"]["specs"]] == [("notifications", "create"),
                                                                      ("user-auth", "update")]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "openspec").rglob("*")) == before


async def test_archive_refuses_incomplete_tasks_unless_forced(tmp_path: Path) -> None:
    materialise(basic(), tmp_path)
    async with server(tmp_path) as client:
        refused = await call(client, "archive", changeId="add-two-factor-auth")
        forced = await call(client, "archive", changeId="add-two-factor-auth", force=True)
    assert refused["error"]["code"] == "CONFLICT"
    assert refused["error"]["details"]["status"][0]["code"] == "archive_tasks_incomplete"
    assert refused["error"]["message"] == "2 incomplete task(s) found for change 'add-two-factor-auth'."
    assert forced["success"] and forced["data"]["archive"]["specsUpdated"] is True
    assert (tmp_path / "openspec/specs/notifications/spec.md").exists()
    assert not (tmp_path / "openspec/changes/add-two-factor-auth").exists()


# ---------------------------------------------------------------------- the workspace


def test_workspace_resolution_follows_the_seed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "code" / "app"
    specs = str(tmp_path / "specs")
    assert openspec_project(project, None, False, home) == (project, False)
    assert openspec_project(project, specs, False, home) == (tmp_path / "specs", False)
    assert openspec_project(project, specs, True, home) == (tmp_path / "specs" / "code" / "app", True)
    assert openspec_project(tmp_path / "elsewhere", specs, True, home)[0] == tmp_path / "specs" \
        / tmp_path.relative_to("/") / "elsewhere"


def test_the_openspec_variables_are_settings_read_once_at_load(tmp_path: Path) -> None:
    environ = {"OPENSPEC_ROOT": str(tmp_path / "specs"), "OPENSPEC_AUTO_PROJECT_ROOT": "true"}
    loaded = load({"root": str(tmp_path)}, environ)
    assert loaded.openspec == OpenSpecConfig(root=str(tmp_path / "specs"), auto_project_root=True)
    assert load({"root": str(tmp_path)}, {"OPENSPEC_ROOT": "", "OPENSPEC_AUTO_PROJECT_ROOT": " "}).openspec \
        == OpenSpecConfig()  # empty is unset, as the OpenSpec CLI reads it
    with pytest.raises(ConfigError, match="OPENSPEC_AUTO_PROJECT_ROOT"):
        load({"root": str(tmp_path)}, {"OPENSPEC_AUTO_PROJECT_ROOT": "maybe"})


async def test_an_auto_project_root_is_created_and_written_through_its_own_storage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    project = home / "work" / "app"
    project.mkdir(parents=True)
    settings = config(project)
    settings = msgspec.structs.replace(settings, openspec=OpenSpecConfig(root=str(tmp_path / "central"),
                                                                         auto_project_root=True))
    async with open_memory_server(settings) as client:
        await client.initialize()
        target = tmp_path / "central" / "work" / "app" / "openspec"
        await call(client, "list")  # the first use creates it
        assert target.is_dir()
        created = await call(client, "init")
        ticked = await call(client, "list")
        assert client.app.supervisor.running(Storages.name(target.parent))  # its own storage actor
        check_frames(client)
    assert created["data"]["path"] == str(target)
    assert (target / "config.yaml").is_file() and not (project / "openspec").exists()
    assert ticked["data"]["root"]["path"] == str(target.parent)


async def test_validate_with_nothing_named_checks_everything_or_everything_of_one_type(tmp_path: Path) -> None:
    materialise(basic(), tmp_path)
    async with server(tmp_path) as client:
        implicit = await call(client, "validate")
        explicit = await call(client, "validate", all=True)
        specs = await call(client, "validate", type="spec")

    def ids(result: dict[str, Any]) -> list[tuple[str, str]]:
        return [(i["type"], i["id"]) for i in result["data"]["items"]]

    assert ids(implicit) == ids(explicit) and len(ids(explicit)) == 4
    assert ids(specs) == [("spec", "task-list"), ("spec", "user-auth")]
    assert list(specs["data"]["summary"]["byType"]) == ["spec"]


async def test_a_write_through_a_symlink_out_of_openspec_is_invalid_input(tmp_path: Path) -> None:
    root = materialise(nested(), tmp_path / "p")
    outside = tmp_path / "outside.md"
    outside.write_text("keep me\n")
    (root / "openspec/project.md").unlink()
    os.symlink(outside, root / "openspec/project.md")
    async with server(root) as client:
        result = await call(client, "update_project_context", content="overwrite")
    assert result["error"]["code"] == "INVALID_INPUT"
    assert outside.read_text() == "keep me\n"
