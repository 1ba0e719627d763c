"""The knowledge tools answer from caches (the snapshot by commit, HEAD read from git's files), yet a
commit, an amend, a reset, a branch switch, packed refs or a detached HEAD is seen by the very
next call; and while HEAD stays put, repeated calls start no git process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

from specactor.actors.knowledge_reader import KnowledgeReader
from specactor.actors.memory_actors import MemoryActors
from specactor.domain.knowledge import gitrefs
from specactor.testing import MemoryClient
from tests.memory.conftest import Repo, actors_for, error, item, ok, started

NO_EVAL = ("Keep code safe.\n\n## Constraints\n```yaml\n- operator: must_not_match\n  target: code\n"
           "  pattern: 'eval\\('\n  severity: block\n```\n")
EVAL_FILE = {"path": "src/app.ts", "content": "const x = eval('1');\n"}
OID = "0123456789abcdef0123456789abcdef01234567"


async def actor_for(nursery: trio.Nursery, tmp_path: Path, root: Path) -> MemoryActors:
    return await started(nursery, actors_for(tmp_path, root))


async def ids_at_head(actor: KnowledgeReader) -> set[str]:
    with trio.fail_after(30):
        return set((await actor.snapshot()).items)


@pytest.fixture
def git_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every git command run from now on (by the tests or the server) appends a line to this file."""
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp_path / "counting-bin"
    bin_dir.mkdir()
    log = tmp_path / "git.log"
    script = bin_dir / "git"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec {real} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(real).parent}")
    return log


def git_runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


async def test_a_commit_is_seen_by_the_very_next_query_show_check_and_status(client: MemoryClient,
                                                                           repo: Repo) -> None:
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    first = repo.commit()
    assert [i["id"] for i in (await ok(client, "knowledge_query", {}))["items"]] == ["adr-a"]
    assert (await ok(client, "knowledge_check", {"files": [EVAL_FILE]}))["passed"] is True
    assert (await ok(client, "sync_status", {}))["headCommit"] == first

    repo.write("company/adrs/a.md", item("adr-a", "Alpha renamed"))
    repo.write("company/policies/no-eval.md", item("pol-no-eval", "No eval", kind="policy", body=NO_EVAL))
    second = repo.commit()
    assert {i["id"] for i in (await ok(client, "knowledge_query", {}))["items"]} == {"adr-a", "pol-no-eval"}
    assert (await ok(client, "knowledge_show", {"id": "adr-a"}))["item"]["title"] == "Alpha renamed"
    checked = await ok(client, "knowledge_check", {"files": [EVAL_FILE]})
    assert checked["passed"] is False and checked["violations"][0]["knowledgeItemId"] == "pol-no-eval"
    assert (await ok(client, "sync_status", {}))["headCommit"] == second

    repo.remove("company/policies/no-eval.md")
    repo.commit()
    assert (await error(client, "knowledge_show", {"id": "pol-no-eval"}))["code"] == "NOT_FOUND"
    assert (await ok(client, "knowledge_check", {"files": [EVAL_FILE]}))["passed"] is True


async def test_repeated_calls_start_no_git_process_until_head_moves(client: MemoryClient, repo: Repo,
                                                                    git_log: Path) -> None:
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.write("company/policies/no-eval.md", item("pol-no-eval", "No eval", kind="policy", body=NO_EVAL))
    repo.commit()
    await ok(client, "knowledge_query", {})  # reads the new commit with git
    before = git_runs(git_log)
    for _ in range(3):
        await ok(client, "knowledge_query", {"query": "alpha"})
        await ok(client, "knowledge_show", {"id": "adr-a"})
        await ok(client, "knowledge_check", {"files": [EVAL_FILE]})
        await ok(client, "sync_status", {})
    assert git_runs(git_log) == before

    repo.write("company/adrs/b.md", item("adr-b", "Bravo"))
    repo.commit()
    moved = git_runs(git_log)
    assert (await ok(client, "knowledge_show", {"id": "adr-b"}))["item"]["title"] == "Bravo"
    assert git_runs(git_log) > moved


async def test_amend_branch_switch_reset_and_detached_head_are_seen_at_once(tmp_path: Path, repo: Repo,
                                                                          nursery: trio.Nursery) -> None:
    actor = (await actor_for(nursery, tmp_path, repo.root)).reader
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    base = repo.commit()
    assert await ids_at_head(actor) == {"adr-a"}

    repo.write("company/adrs/b.md", item("adr-b", "Bravo"))
    repo.git("add", "-A")
    repo.git("commit", "-q", "--amend", "-m", "amended")  # the same branch, another commit
    assert await ids_at_head(actor) == {"adr-a", "adr-b"}

    repo.git("checkout", "-q", "-b", "side")
    repo.write("company/adrs/c.md", item("adr-c", "Charlie"))
    repo.commit()
    assert await ids_at_head(actor) == {"adr-a", "adr-b", "adr-c"}
    repo.git("checkout", "-q", "main")
    assert await ids_at_head(actor) == {"adr-a", "adr-b"}

    repo.git("reset", "-q", "--hard", "side")
    assert await ids_at_head(actor) == {"adr-a", "adr-b", "adr-c"}
    repo.git("checkout", "-q", "--detach", base)
    assert await ids_at_head(actor) == {"adr-a"}
    assert await actor.head_commit() == base


async def test_packed_refs_are_read_as_git_reads_them_and_an_unborn_branch_asks_git(
        tmp_path: Path, repo: Repo, nursery: trio.Nursery) -> None:
    actor = (await actor_for(nursery, tmp_path, repo.root)).reader
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.commit()
    await ids_at_head(actor)
    repo.write("company/adrs/b.md", item("adr-b", "Bravo"))
    second = repo.commit()
    repo.git("pack-refs", "--all")  # the branch now lives only in packed-refs
    assert not (repo.root / ".git" / "refs" / "heads" / "main").exists()
    assert actor.head_from_files() == second and await ids_at_head(actor) == {"adr-a", "adr-b"}

    repo.write("company/adrs/c.md", item("adr-c", "Charlie"))
    third = repo.commit()  # a loose ref again, newer than the packed one
    assert actor.head_from_files() == third and await ids_at_head(actor) == {"adr-a", "adr-b", "adr-c"}

    repo.git("checkout", "-q", "--orphan", "fresh")  # HEAD names a branch with no commit yet
    repo.git("rm", "-q", "-r", "--cached", ".")
    assert actor.head_from_files() is None
    assert await ids_at_head(actor) == set() and await actor.head_commit() is None


async def test_a_linked_worktree_follows_its_own_head(tmp_path: Path, repo: Repo, nursery: trio.Nursery) -> None:
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.commit()
    repo.git("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature")
    tree = Repo.__new__(Repo)
    tree.root = tmp_path / "wt"
    actor = (await actor_for(nursery, tmp_path, tree.root)).reader
    assert await ids_at_head(actor) == {"adr-a"}

    repo.write("company/adrs/main-only.md", item("adr-main", "Main only"))
    repo.commit()  # on main, in the main worktree: not this worktree's HEAD
    tree.write("company/adrs/b.md", item("adr-b", "Bravo"))
    head = tree.commit()
    assert actor.head_from_files() == head and await ids_at_head(actor) == {"adr-a", "adr-b"}


async def test_a_repository_created_inside_the_knowledge_folder_takes_over_at_once(tmp_path: Path,
                                                                                  nursery: trio.Nursery) -> None:
    outer = Repo(tmp_path / "workspace")
    outer.write("knowledge/company/adrs/a.md", item("adr-a", "Alpha"))
    outer.commit()
    actor = (await actor_for(nursery, tmp_path, outer.root / "knowledge")).reader
    assert await ids_at_head(actor) == {"adr-a"}
    assert actor.head_from_files() == outer.git("rev-parse", "HEAD")

    inner = Repo(outer.root / "knowledge")  # git init in the knowledge folder itself
    inner.write("company/adrs/b.md", item("adr-b", "Bravo"))
    inner.commit()
    assert await ids_at_head(actor) == {"adr-a", "adr-b"}
    assert await actor.head_commit() == inner.git("rev-parse", "HEAD")


async def test_a_sync_with_nothing_new_here_still_publishes_what_another_process_synced(
        tmp_path: Path, repo: Repo, nursery: trio.Nursery) -> None:
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.commit()
    # two servers, one database
    mine, other = [(await actor_for(nursery, tmp_path, repo.root)).sync for _ in range(2)]
    with trio.fail_after(30):
        _, _, _, manifest = await mine.sync(force=False, company_id="default")
        assert set(manifest["items"]) == {"adr-a"}
        repo.write("company/adrs/b.md", item("adr-b", "Bravo"))
        repo.commit()
        plan, _, _, _ = await other.sync(force=False, company_id="default")
        assert plan.added == 1
        plan, _, _, manifest = await mine.sync(force=False, company_id="default")
    assert (plan.added, plan.unchanged) == (0, 2) and set(manifest["items"]) == {"adr-a", "adr-b"}


def test_head_and_ref_files_are_read_only_when_they_are_plain() -> None:
    assert gitrefs.head_target(f"{OID}\n".encode()) == gitrefs.HeadTarget(commit=OID)
    assert gitrefs.head_target(b"ref: refs/heads/feature/x\n") == gitrefs.HeadTarget(branch="refs/heads/feature/x")
    for odd in (b"ref: refs/remotes/origin/main\n", b"ref: refs/heads/../../x\n", b"ref: refs/heads/a.lock\n",
                b"ref: \n", b"", b"0123\n", OID.upper().encode()):
        assert gitrefs.head_target(odd) is None, odd
    assert gitrefs.object_id(f"{OID}\n".encode()) == OID and gitrefs.object_id(b"ref: refs/heads/x\n") is None
    packed = (f"# pack-refs with: peeled fully-peeled sorted\n{OID} refs/heads/main\n"
              f"{OID} refs/tags/v1\n^{'f' * 40}\n").encode()
    assert gitrefs.packed_refs(packed) == {"refs/heads/main": OID, "refs/tags/v1": OID}
