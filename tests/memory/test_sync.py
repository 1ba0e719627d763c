"""sync_now and sync_status: deltas across commits, pointers, orphans, failures, and interrupted syncs."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
import trio

from specactor.testing import MemoryClient, open_memory_server
from tests.memory.conftest import ADR_042, Repo, actors_for, call, error, item, ok, server_config, started

REPO_ROOT = Path(__file__).resolve().parents[2]


def stats(result: dict[str, object]) -> tuple[object, ...]:
    return tuple(result[k] for k in ("added", "updated", "deleted", "unchanged"))


async def test_sync_follows_adds_changes_deletes_and_renames_across_commits(client: MemoryClient, repo: Repo) -> None:
    repo.write("company/adrs/adr-042-database-selection.md", ADR_042)
    repo.write("company/policies/logging.md", item("pol-logging", "Structured logs"))
    repo.write("projects/specactor-ws/patterns/retry.md", item("pat-retry", "Retry with backoff"))
    first = repo.commit("three items")
    result = await ok(client, "sync_now", {})
    assert stats(result) == (3, 0, 0, 0) and result["failures"] == [] and result["lastKnowledgeCommit"] == first

    repo.write("company/policies/logging.md", item("pol-logging", "Structured JSON logs"))
    repo.write("company/policies/tracing.md", item("pol-tracing", "Trace every request"))
    repo.commit("change one, add one")
    assert stats(await ok(client, "sync_now", {})) == (1, 1, 0, 2)

    repo.remove("company/policies/tracing.md")
    repo.commit("delete one")
    assert stats(await ok(client, "sync_now", {})) == (0, 0, 1, 3)

    repo.move("projects/specactor-ws/patterns/retry.md", "company/patterns/retry.md")  # same id, new layer
    repo.move("company/policies/logging.md", "company/policies/logs.md")
    repo.commit("rename two")
    assert stats(await ok(client, "sync_now", {})) == (0, 2, 0, 1)
    assert stats(await ok(client, "sync_now", {})) == (0, 0, 0, 3)  # nothing new since

    status = await ok(client, "sync_status", {})
    assert status["healthy"] is True and status["lastKnowledgeCommit"] == repo.git("rev-parse", "HEAD")
    assert status["headCommit"] == status["lastKnowledgeCommit"] and status["failedItems"] == 0
    assert status["stats"]["totalSyncs"] == 5 and status["stats"]["totalItemsSynced"] == 3 + 2 + 2
    assert status["timeSinceSync"].endswith("ago") and stats(status) == (0, 0, 0, 3)


async def test_pointers_are_searchable_in_their_layer_and_deleted_items_leave_orphans(
        client: MemoryClient, repo: Repo, env: Path) -> None:
    repo.write("company/adrs/adr-042-database-selection.md", ADR_042)
    repo.write("projects/specactor-ws/patterns/retry.md", item("pat-retry", "Retry with exponential backoff"))
    repo.commit()
    await ok(client, "sync_now", {})
    found = await ok(client, "memory_search", {"query": "database selection postgresql"})
    pointer = found["results"][0]
    assert pointer["layer"] == "company" and pointer["tags"] == ["database", "postgresql"]
    assert pointer["content"] == ("Database Selection for New Services\nNew services use PostgreSQL.\n[ADR]\n"
                                  "Constraints:\n- MySQL not allowed for new services per ADR-042. Use PostgreSQL "
                                  "instead.\n(adr-042-database-selection)")
    retry = await ok(client, "memory_search", {"query": "retry backoff"})
    assert [r["layer"] for r in retry["results"]] == ["project"]

    repo.remove("company/adrs/adr-042-database-selection.md")
    repo.commit("drop the ADR")
    assert (await ok(client, "sync_now", {}))["deleted"] == 1
    assert (await ok(client, "memory_search", {"query": "database selection", "threshold": 0}))["results"] == []
    db = sqlite3.connect(env.parent / "data" / "memory.db")
    orphaned, meta = db.execute("SELECT orphaned, metadata FROM memories WHERE knowledge_id = ?",
                                ("adr-042-database-selection",)).fetchone()
    db.close()
    assert orphaned == 1 and '"isOrphaned":true' in meta and '"type":"knowledge_pointer"' in meta

    repo.write("company/adrs/adr-042-database-selection.md", ADR_042)
    repo.commit("bring it back")
    assert (await ok(client, "sync_now", {}))["added"] == 1
    again = await ok(client, "memory_search", {"query": "database selection"})
    assert again["results"][0]["memoryId"] == pointer["memoryId"]  # the same pointer, revived


async def test_force_rewrites_every_pointer(client: MemoryClient, repo: Repo) -> None:
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    repo.write("company/adrs/b.md", item("adr-b", "Bravo"))
    repo.commit()
    await ok(client, "sync_now", {})
    assert stats(await ok(client, "sync_now", {"force": True})) == (2, 0, 0, 0)
    assert stats(await ok(client, "sync_now", {})) == (0, 0, 0, 2)


async def test_a_bad_item_fails_alone_and_is_retried_once_fixed(client: MemoryClient, repo: Repo, env: Path) -> None:
    repo.write("company/adrs/good.md", item("adr-good", "Good"))
    repo.write("company/adrs/bad.md", "---\ntitle: Bad\nstatus: accepted\n---\n## Constraints\n```yaml\n"
                                      "- {operator: must_exist, target: file, pattern: '[oops'}\n```\n")
    repo.commit()
    result = await ok(client, "sync_now", {})
    assert stats(result) == (1, 0, 0, 0)
    assert [f["file"] for f in result["failures"]] == ["company/adrs/bad.md"]
    assert "does not compile" in result["failures"][0]["error"]
    status = await ok(client, "sync_status", {})
    assert status["healthy"] is False and status["failedItems"] == 1

    repo.write("company/adrs/bad.md", item("adr-bad", "Fixed"))
    repo.write("company/adrs/dup.md", item("adr-good", "Same id twice"))
    repo.commit("fix one, duplicate another")
    result = await ok(client, "sync_now", {})
    assert stats(result) == (1, 0, 0, 1)
    assert [(f["file"], "duplicate id 'adr-good'" in f["error"]) for f in result["failures"]] == [
        ("company/adrs/dup.md", True)]
    manifest = (env.parent / "knowledge" / "manifest.json").read_text()
    assert '"adr-bad"' in manifest and '"commitHash": "' + repo.git("rev-parse", "HEAD") in manifest


async def test_sync_on_a_missing_repository_is_not_found_and_changes_nothing(client: MemoryClient) -> None:
    err = await error(client, "sync_now", {})
    assert err["code"] == "NOT_FOUND" and err["details"]["kind"] == "knowledge repository"
    status = await ok(client, "sync_status", {})
    assert status["healthy"] is False and status["lastSyncAt"] is None and status["headCommit"] is None


def toggle(flag: Path, *, on: bool) -> None:
    if on:
        flag.touch()
    else:
        flag.unlink()


@pytest.fixture
def flaky_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that fails `cat-file --batch` while the returned flag file exists."""
    real = shutil.which("git")
    assert real
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    flag = tmp_path / "fail-git"
    script = bin_dir / "git"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do\n  if [ "$a" = "--batch" ] && [ -e "{flag}" ]; then\n'
                      f'    echo "fatal: simulated failure" >&2; exit 128\n  fi\ndone\nexec {real} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(real).parent}")
    return flag


async def test_a_git_error_mid_sync_keeps_the_previous_state_and_the_next_run_completes(
        client: MemoryClient, repo: Repo, flaky_git: Path) -> None:
    repo.write("company/adrs/a.md", item("adr-a", "Alpha"))
    first = repo.commit()
    await ok(client, "sync_now", {})
    repo.write("company/adrs/a.md", item("adr-a", "Alpha two"))
    repo.write("company/adrs/b.md", item("adr-b", "Bravo"))
    repo.commit()
    toggle(flaky_git, on=True)
    envelope = await call(client, "sync_now", {})
    assert envelope["error"]["code"] == "PROVIDER_ERROR" and "simulated failure" in envelope["error"]["message"]
    status = await ok(client, "sync_status", {})
    assert status["lastKnowledgeCommit"] == first and status["stats"]["totalSyncs"] == 1
    toggle(flaky_git, on=False)
    assert stats(await ok(client, "sync_now", {})) == (1, 1, 0, 0)


async def test_a_sync_killed_mid_transaction_keeps_the_previous_state_and_the_next_run_completes(
        repo: Repo, tmp_path: Path, nursery: trio.Nursery) -> None:
    db = tmp_path / "store" / "memory.db"
    actor = (await started(nursery, actors_for(tmp_path, repo.root))).sync
    for i in range(3):
        repo.write(f"company/adrs/{i}.md", item(f"adr-{i}", f"Decision {i}"))
    first = repo.commit()
    plan, _, _, _ = await actor.sync(force=False, company_id="default")
    assert plan.added == 3
    for i in range(2):
        repo.write(f"company/adrs/{i}.md", item(f"adr-{i}", f"Decision {i}, revised"))
    for i in range(3, 6):
        repo.write(f"company/adrs/{i}.md", item(f"adr-{i}", f"Decision {i}"))
    repo.commit("two changed, three added")

    with trio.fail_after(60):
        worker = await trio.run_process([sys.executable, "-m", "tests.memory.sync_worker", str(db), str(repo.root),
                                         "3"], cwd=REPO_ROOT, capture_stdout=True, capture_stderr=True, check=False)
    assert worker.returncode == -9 and worker.stdout.split() == [b"writing"], worker.stderr

    raw = sqlite3.connect(db)
    assert raw.execute("SELECT last_commit FROM sync_state").fetchone() == (first,)
    assert raw.execute("SELECT count(*) FROM memories").fetchone() == (3,)
    assert raw.execute("SELECT count(*) FROM memories WHERE content LIKE '%revised%'").fetchone() == (0,)
    raw.close()
    plan, commit, _, _ = await actor.sync(force=False, company_id="default")
    assert (plan.added, plan.updated, plan.deleted, plan.unchanged) == (3, 2, 0, 1)
    assert commit == repo.git("rev-parse", "HEAD")
    record_plan, _, _, _ = await actor.sync(force=False, company_id="default")
    assert (record_plan.added, record_plan.updated, record_plan.unchanged) == (0, 0, 6)


async def test_sync_works_on_a_knowledge_folder_inside_the_workspace_repository(client: MemoryClient,
                                                                               env: Path) -> None:
    workspace = Repo(env.parent)  # one repository holding knowledge/ among other things
    workspace.write("knowledge/company/adrs/a.md", item("adr-a", "Alpha"))
    workspace.write("src/main.py", "print('hi')\n")
    workspace.commit()
    assert stats(await ok(client, "sync_now", {})) == (1, 0, 0, 0)
    workspace.write("src/main.py", "print('bye')\n")  # outside knowledge/: not a change to sync
    workspace.write("knowledge/company/adrs/b.md", item("adr-b", "Bravo"))
    workspace.commit()
    assert stats(await ok(client, "sync_now", {})) == (1, 0, 0, 1)


async def test_a_manifest_inside_the_workspace_is_written_through_the_storage_actor(
        env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECACTOR_KNOWLEDGE_REPO", str(env / "knowledge"))
    workspace = Repo(env)
    workspace.write("knowledge/company/adrs/a.md", item("adr-a", "Alpha"))
    head = workspace.commit()
    async with open_memory_server(server_config(env)) as client:
        await client.initialize()
        await ok(client, "sync_now", {})
        assert client.app.storage.commits == 1
    manifest = json.loads(read(env / "knowledge" / "manifest.json"))
    assert manifest["commitHash"] == head and manifest["byType"] == {"adr": ["adr-a"]}
    assert manifest["items"]["adr-a"]["path"] == "company/adrs/a.md"


def read(path: Path) -> str:
    return path.read_text()


async def test_two_servers_syncing_one_store_at_once_never_answer_conflict(env: Path, repo: Repo) -> None:
    """Two servers (HTTP workers, two assistants) share one memory store: a sync whose write finds
    the other's sync committed since it read is planned again, not refused."""
    repo.write("company/adrs/adr-042.md", ADR_042)
    repo.commit("adr")
    config = server_config(env)
    async with open_memory_server(config) as first, open_memory_server(config) as second:
        await first.initialize()
        await second.initialize()
        answers: list[dict[str, object]] = []

        async def syncs(client: MemoryClient, rounds: int) -> None:
            for k in range(rounds):
                if k == 3:
                    name = "first" if client is first else "second"
                    repo.write(f"company/policies/{name}.md", item(f"pol-{name}", "Policy"))
                    repo.commit("more")
                answers.append(await call(client, "sync_now", {}))

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(syncs, first, 8)
                nursery.start_soon(syncs, second, 8)
        assert [a for a in answers if a["success"] is not True] == []
        assert len(answers) == 16


async def test_a_burst_of_sync_calls_after_a_commit_costs_one_sync(client: MemoryClient, repo: Repo) -> None:
    repo.write("company/policies/logging.md", item("pol-logging", "Structured logs"))
    repo.commit()
    await ok(client, "sync_now", {})  # the reader has found the repository's git files: HEAD is read from them
    repo.write("company/adrs/adr-042-database-selection.md", ADR_042)
    head = repo.commit()
    before = (await ok(client, "sync_status", {}))["stats"]["totalSyncs"]
    idents = list(range(1000, 1030))
    for ident in idents:  # written at once, as a client's burst: the calls overlap in the server
        await client.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                           "params": {"name": "sync_now", "arguments": {}}})
    replies = [await client.reply_for(ident, timeout=30) for ident in idents]
    results = [r["result"]["structuredContent"]["data"] for r in replies]
    assert {r["lastKnowledgeCommit"] for r in results} == {head} and {stats(r) for r in results} == {(1, 0, 0, 1)}
    assert (await ok(client, "sync_status", {}))["stats"]["totalSyncs"] == before + 1


async def test_a_call_joins_the_running_sync_only_while_its_commit_is_still_head(tmp_path: Path, repo: Repo) -> None:
    repo.write("company/adrs/adr-042-database-selection.md", ADR_042)
    repo.commit()
    async with trio.open_nursery() as nursery:
        actors = await started(nursery, actors_for(tmp_path, repo.root))
        await actors.sync.sync(force=False, company_id="acme")  # HEAD is read from git's files from now on
        repo.write("company/patterns/retry.md", item("pat-retry", "Retry with backoff"))
        first = repo.commit()
        parse, entered, release = actors.reader.parse, trio.Event(), trio.Event()

        async def held(*args: object) -> object:
            entered.set()  # the running sync has read HEAD (from git's files, then git) and lists its tree
            await release.wait()  # it stays in flight until the test lets it go
            return await parse(*args)  # type: ignore[arg-type]

        actors.reader.parse = held  # type: ignore[method-assign]
        got: dict[str, object] = {}

        async def sync(name: str) -> None:
            got[name] = await actors.sync.sync(force=False, company_id="acme")

        with trio.fail_after(30):
            async with trio.open_nursery() as calls:
                calls.start_soon(sync, "running")
                await entered.wait()
                calls.start_soon(sync, "joined")  # HEAD is still the commit the running sync reads
                await trio.testing.wait_all_tasks_blocked()
                repo.write("company/policies/logging.md", item("pol-logging", "Structured logs"))
                second = repo.commit()
                calls.start_soon(sync, "later")  # a commit since: it needs a sync that sees it
                await trio.testing.wait_all_tasks_blocked()
                release.set()
        nursery.cancel_scope.cancel()
    assert got["joined"] is got["running"] and got["running"][1] == first  # type: ignore[index]
    assert got["later"] is not got["running"] and got["later"][1] == second  # type: ignore[index]
