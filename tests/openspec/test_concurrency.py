"""Writes that run together in one group commit see each other, and the caches that make reads
cheap still see every change: an event naming a directory, an edit made by another process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from specactor.domain.openspec.cache import CachedSource
from specactor.domain.openspec.project import config_context
from specactor.testing import MemoryClient, open_memory_server
from tests.conftest import check_frames
from tests.openspec.support import config
from tests.openspec.test_cache import ONE, SPEC, FakeFs, counts
from tests.openspec.workspaces import basic, materialise

CHANGE = "add-two-factor-auth"


async def burst(client: MemoryClient, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every call sent before any reply is read, so that the writes queue up behind one another."""
    idents = [f"burst-{k}" for k in range(len(calls))]
    for ident, (name, arguments) in zip(idents, calls, strict=True):
        await client.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments}})
    return [(await client.reply_for(ident, 30))["result"]["structuredContent"] for ident in idents]


def run(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with open_memory_server(config(root)) as client:
            with trio.fail_after(60):
                await client.initialize()
                out = await burst(client, calls)
            check_frames(client)
        return out

    return trio.run(go)


def test_concurrent_task_completes_on_one_change_lose_no_tick(tmp_path: Path) -> None:
    root = materialise(basic(), tmp_path)
    tasks = root / "openspec" / "changes" / CHANGE / "tasks.md"
    tasks.write_text("## 1. Work\n" + "".join(f"- [ ] 1.{k} Task {k}\n" for k in range(1, 21)))
    results = run(root, [("task_complete", {"changeId": CHANGE, "task": f"1.{k}"}) for k in range(1, 21)])
    assert all(r["success"] for r in results)
    assert tasks.read_text().count("- [x]") == 20
    assert sorted(r["data"]["completedTasks"] for r in results) == list(range(1, 21))


def test_concurrent_section_edits_keep_every_section(tmp_path: Path) -> None:
    root = materialise(basic(), tmp_path)
    results = run(root, [("update_project_context", {"section": f"Part {k}", "content": f"Body {k}."})
                         for k in range(12)])
    assert all(r["success"] for r in results)
    text = config_context((root / "openspec" / "config.yaml").read_text()) or ""  # a 1.x workspace
    assert all(f"## Part {k}\n\nBody {k}.\n" in text for k in range(12))


def test_an_archive_racing_a_tick_of_its_change_neither_loses_the_tick_nor_brings_the_change_back(
        tmp_path: Path) -> None:
    root = materialise(basic(), tmp_path)
    tasks = root / "openspec" / "changes" / CHANGE / "tasks.md"
    tasks.write_text("- [x] 1.1 Done\n- [ ] 1.2 Last\n")
    ticks = [("task_complete", {"changeId": "update-task-broken", "task": "1.1"}),
             ("task_complete", {"changeId": CHANGE, "task": "1.2"})]
    # Concurrent requests run in no promised order: the archive may see the tick (and archive the
    # ticked change) or run first (and refuse, one task open). Either way nothing is lost.
    *done, archive = run(root, [*ticks, ("archive", {"changeId": CHANGE})])
    assert all(r["success"] for r in done), done
    ticked = "- [x] 1.1 Done\n- [x] 1.2 Last\n"
    if archive["success"]:
        assert not (root / "openspec" / "changes" / CHANGE).exists()  # no write landed after the move
        archived = next((root / "openspec" / "changes" / "archive").glob(f"*-{CHANGE}"))
        assert (archived / "tasks.md").read_text() == ticked
    else:
        assert "incomplete task" in archive["error"]["message"]
        assert tasks.read_text() == ticked


def test_an_event_naming_a_directory_forgets_every_file_cached_under_it() -> None:
    fs = FakeFs({"specs/area/a/spec.md": SPEC, "specs/area/b/spec.md": SPEC, "specs/c/spec.md": SPEC},
                watchable=True)
    src = CachedSource(fs)
    assert counts(src) == [0, 0, 0]
    for rel in ("specs/area/a/spec.md", "specs/area/b/spec.md", "specs/c/spec.md"):
        fs.files[rel] = ONE  # no event for the files themselves: only the directory is named
    fs.pending.append("specs/area")
    reads = fs.calls["read"]
    src.refresh()
    assert counts(src) == [1, 1, 0]  # specs/c was not named: still the cached answer
    assert fs.calls["read"] == reads + 2


def test_warm_resource_indexes_see_edits_made_on_disk_by_another_process(tmp_path: Path) -> None:
    root = materialise(basic(), tmp_path)
    openspec = root / "openspec"

    async def go() -> list[str]:
        async with open_memory_server(config(root)) as client:
            with trio.fail_after(60):
                await client.initialize()
                out = []
                for step in range(3):
                    for uri in ("openspec://specs", "openspec://changes", "openspec://archive"):
                        reply = await client.request("resources/read", {"uri": uri})
                        out.append(reply["result"]["contents"][0]["text"])
                    if step == 0:  # another process edits; the cache must notice
                        tasks = openspec / "changes" / CHANGE / "tasks.md"
                        tasks.write_text(tasks.read_text().replace("[ ]", "[x]"))
                        (openspec / "specs" / "extra").mkdir()
                        (openspec / "specs" / "extra" / "spec.md").write_text(ONE.replace("# a", "# extra"))
                        (openspec / "changes" / "archive" / "2024-01-01-old").mkdir(parents=True)
            check_frames(client)
        return out

    first, second, third = (texts := trio.run(go))[:3], texts[3:6], texts[6:]
    assert "extra" not in first[0] and "extra" in second[0]
    assert first[1] != second[1] and "4/4" in second[1]
    assert "2024-01-01-old" not in first[2] and "2024-01-01-old" in second[2]
    assert second == third


def _complete_change(root: Path, change: str, cap: str) -> None:
    from specactor.domain.openspec.render import DeltaDoc, RequirementDoc, ScenarioDoc, render_delta

    folder = root / "openspec" / "changes" / change
    (folder / "specs" / cap).mkdir(parents=True)
    (folder / "proposal.md").write_text(f"# Change: {change}\n\n## Why\nTo test a burst of archives.\n\n"
                                        f"## What Changes\n- {cap}\n")
    (folder / "tasks.md").write_text("## 1. Work\n- [x] 1.1 Write it\n")
    req = RequirementDoc(f"Kept by {change}", [f"The system SHALL keep {change}."],
                         [ScenarioDoc("Archived", ["- **WHEN** archived", "- **THEN** merged"])])
    (folder / "specs" / cap / "spec.md").write_text(render_delta(DeltaDoc(added=[req])))


def test_a_burst_of_archives_is_applied_together_and_archives_each_change_once_with_every_requirement(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import specactor.toolsets.openspec as toolset

    root = materialise(basic(), tmp_path)
    caps = ["burst-one", "burst-two", "burst-one", "burst-three", "burst-two", "burst-one"]
    changes = [f"burst-{k}" for k in range(len(caps))]
    for change, cap in zip(changes, caps, strict=True):
        _complete_change(root, change, cap)
    sizes: list[int] = []
    real = toolset.apply_archives

    def counted(project: Path, archives: list[Any]) -> Any:
        sizes.append(len(archives))
        return real(project, archives)

    monkeypatch.setattr(toolset, "apply_archives", counted)
    *archived, again, missing = run(root, [*[("archive", {"changeId": c}) for c in changes],
                                           ("archive", {"changeId": changes[1]}),
                                           ("archive", {"changeId": "burst-none"})])
    both = [archived[1], again]
    assert all(r["success"] for r in archived[:1] + archived[2:]), archived
    assert sorted(r["success"] for r in both) == [False, True]  # the same change: archived once
    assert next(r for r in both if not r["success"])["error"]["code"] == "NOT_FOUND"
    assert missing["error"]["code"] == "NOT_FOUND"  # (which changes it lists depends on the order they ran in)
    assert max(sizes) > 1 and sum(sizes) == len(changes)  # applied together, each once
    listing = sorted(p.name for p in (root / "openspec" / "changes" / "archive").iterdir())
    assert [name[11:] for name in listing if name[11:].startswith("burst-")] == changes
    assert not any((root / "openspec" / "changes" / c).exists() for c in changes)
    for cap in set(caps):
        text = (root / "openspec" / "specs" / cap / "spec.md").read_text()
        kept = [c for c, of in zip(changes, caps, strict=True) if of == cap]
        assert all(f"### Requirement: Kept by {c}\n" in text for c in kept), (cap, text)
    assert not list((root / "openspec").rglob("*.tmp")) and not (root / ".specactor/openspec-archive.journal").exists()
