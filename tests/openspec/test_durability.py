"""Archive is all or nothing: a process killed at any point of it leaves either the workspace as
it was or, once the next call recovers the journal, exactly what a clean archive leaves."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from specactor.fs import wal
from specactor.testing import open_memory_server
from tests.openspec.support import call_tool, config, tree
from tests.openspec.workspaces import basic, materialise

CHANGE = "add-two-factor-auth"
# A process that runs the archive code with the steps of an archive counted (the journal's write,
# each spec's install, each change's move) and kills itself (no cleanup, no finally) at the
# `kill_at`-th. KILLER and BATCH_KILLER add what it runs.
KILLING = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    import specactor.fs.openspec_fs as toolset

    root, kill_at = Path(sys.argv[1]), int(sys.argv[2])
    calls = [0]
    real_write, real_install, real_rename = toolset.atomic_write, toolset.install, os.rename

    def step() -> None:
        calls[0] += 1
        if calls[0] == kill_at:
            os._exit(9)

    def write(path, data):
        step()
        real_write(path, data)

    def install(tmp, path):
        step()
        real_install(tmp, path)

    def rename(a, b, *args, **kw):
        if "changes" in str(a):
            step()
        real_rename(a, b, *args, **kw)

    toolset.atomic_write, toolset.install, toolset.os.rename = write, install, rename
""")
KILLER = KILLING + textwrap.dedent("""
    from tests.openspec.support import call_tool

    call_tool(root, "archive", {"changeId": sys.argv[3], "force": True})
    os._exit(0)
""")


def archived(tmp_path: Path) -> dict[str, bytes]:
    clean = materialise(basic(), tmp_path / "clean")
    assert call_tool(clean, "archive", {"changeId": CHANGE, "force": True})["success"]
    return tree(clean)


# Steps: 1 journal write, 2 first spec, 3 second spec, 4 the change's move; 5 = not killed at all.
@pytest.mark.parametrize("kill_at", [1, 2, 3, 4, 5])
def test_an_archive_killed_at_any_step_is_all_or_nothing(tmp_path: Path, kill_at: int) -> None:
    expected = archived(tmp_path)
    root = materialise(basic(), tmp_path / "victim")
    before = tree(root)
    done = subprocess.run([sys.executable, "-c", KILLER, str(root), str(kill_at), CHANGE],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, timeout=120, check=False)
    assert done.returncode == (9 if kill_at < 5 else 0), done.stderr.decode()[-2000:]
    journal = root / ".specactor" / "openspec-archive.journal"
    if kill_at == 1:
        assert tree(root) == before and not journal.exists()  # killed before the commit point
        return
    call_tool(root, "list", {})  # any call finishes a committed archive first
    assert not journal.exists()
    assert tree(root) == expected


def test_a_failed_write_before_the_journal_commit_changes_nothing(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import specactor.fs.openspec_fs as toolset

    root = materialise(basic(), tmp_path / "w")
    before = tree(root)

    def broken(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(toolset, "atomic_write", broken)
    result = call_tool(root, "archive", {"changeId": CHANGE, "force": True})
    assert result["error"]["code"] == "INTERNAL"
    assert tree(root) == before


def test_half_written_and_unreadable_markdown_gives_issues_not_crashes(tmp_path: Path) -> None:
    root = materialise(basic(), tmp_path / "h")
    spec = root / "openspec/specs/user-auth/spec.md"
    spec.write_bytes(spec.read_bytes()[:150] + b"\xe2\x82")  # torn mid-character, inside the Purpose
    (root / "openspec/changes/add-two-factor-auth/tasks.md").unlink()
    (root / "openspec/changes/add-two-factor-auth/tasks.md").mkdir()  # a directory where a file belongs
    shutil.rmtree(root / "openspec/changes/update-task-broken/specs")
    (root / "openspec/changes/update-task-broken/specs").write_text("not a directory")
    results = [call_tool(root, "validate", {"all": True, "strict": True}), call_tool(root, "list", {}),
               call_tool(root, "show", {"item": "user-auth"}), call_tool(root, "show", {"item": CHANGE}),
               call_tool(root, "archive", {"changeId": CHANGE, "dryRun": True, "force": True})]
    assert all(r["success"] or r["error"]["code"] != "INTERNAL" for r in results), results
    items = {i["id"]: i for i in results[0]["data"]["items"]}
    assert items["user-auth"]["valid"] is False


@pytest.mark.skipif(wal.boot_id() is None, reason="no boot id here (not Linux): no write-ahead log")
def test_an_archive_first_makes_the_logged_writes_durable_so_no_restore_can_bring_the_change_back(
        tmp_path: Path) -> None:
    root = materialise(basic(), tmp_path / "ws")

    async def go() -> list[list[str]]:
        seen = []
        async with open_memory_server(config(root)) as client:
            with trio.fail_after(60):
                await client.initialize()
                ticked = await client.request("tools/call", {"name": "task_complete", "arguments": {
                    "changeId": CHANGE, "task": "1.3"}}, timeout=60)
                assert ticked["result"]["structuredContent"]["success"]
                seen.append(logged(root))
                archived = await client.request("tools/call", {"name": "archive", "arguments": {
                    "changeId": CHANGE, "force": True}}, timeout=60)
                assert archived["result"]["structuredContent"]["success"]
                seen.append(logged(root))
        return seen

    before, after = trio.run(go)
    assert before == [f"openspec/changes/{CHANGE}/tasks.md"]  # the tick went through the log...
    assert after == []  # ...and was made durable before the change directory moved


def logged(root: Path) -> list[str]:
    reader = wal.WriteAheadLog(root / ".specactor", "reader")
    reader.open()
    try:
        return [rel for found in reader.catch_up() for rel, _ in found.record.writes]
    finally:
        reader.close()


BATCH_KILLER = KILLING + textwrap.dedent("""
    toolset.apply_archives(root, [
        toolset.Archive({"openspec/specs/a/spec.md": b"A merged\\n"}, [],
                        ("openspec/changes/one", "openspec/changes/archive/d-one")),
        toolset.Archive({"openspec/specs/b/spec.md": b"B new\\n"}, ["openspec/specs/c/spec.md"],
                        ("openspec/changes/two", "openspec/changes/archive/d-two")),
    ])
    os._exit(0)
""")


def _two_changes(root: Path) -> Path:
    for rel, text in {"specs/a/spec.md": "A\n", "specs/c/spec.md": "C\n", "changes/one/tasks.md": "- [x] 1\n",
                      "changes/one/specs/a/spec.md": "delta a\n", "changes/two/proposal.md": "why\n"}.items():
        (root / "openspec" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "openspec" / rel).write_text(text)
    return root


# Steps: 1 the journal, 2-3 the two specs installed, 4-5 the two changes moved; 6 = not killed.
@pytest.mark.parametrize("kill_at", [1, 2, 3, 4, 5, 6])
def test_archives_applied_together_are_all_or_nothing_together(tmp_path: Path, kill_at: int) -> None:
    from specactor.fs.openspec_fs import journal_pending, recover

    root = _two_changes(tmp_path / "ws")
    before = tree(root)
    done = subprocess.run([sys.executable, "-c", BATCH_KILLER, str(root), str(kill_at)],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, timeout=120, check=False)
    assert done.returncode == (9 if kill_at < 6 else 0), done.stderr.decode()[-2000:]
    if kill_at == 1:
        assert tree(root) == before and not journal_pending(root)  # killed before the commit point
        return
    recovered = recover(root)
    assert not journal_pending(root)
    assert tree(root) == {"specs/a/spec.md": b"A merged\n", "specs/b/spec.md": b"B new\n",
                          "changes/archive/d-one/tasks.md": b"- [x] 1\n",
                          "changes/archive/d-one/specs/a/spec.md": b"delta a\n",
                          "changes/archive/d-two/proposal.md": b"why\n"}
    assert not (root / "openspec/specs/c").exists()  # the retired spec's emptied folder went with it
    if kill_at < 6:
        assert "openspec/specs/a/spec.md" in recovered.written and "openspec/specs/c/spec.md" in recovered.removed
