"""Every committed write of the file-based toolsets is published on the change feed exactly once,
by the storage actor that committed it, before the call is answered: the workspace, the paths
written and removed, the toolset and the kind. Another process's writes to the same workspace
are not published as this server's. A storage actor that crashes is restarted, and the server
goes on writing."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing

from specactor.actors.change_feed import Subscription
from specactor.actors.storages import Storages
from specactor.config import Config, SessionLogConfig
from specactor.domain.airsspec import layout
from specactor.domain.changes import Change
from specactor.testing import MemoryClient, open_memory_server
from tests.airsspec.support import Client
from tests.conftest import check_frames
from tests.openspec.workspaces import basic, materialise

REPO = Path(__file__).resolve().parents[1]
CHANGE = "add-two-factor-auth"


@asynccontextmanager
async def server(root: Path, *toolsets: str) -> AsyncIterator[tuple[Client, Subscription]]:
    """A server on `root` and a subscription to its change feed, opened before any write."""
    config = Config(root=str(root), toolsets=list(toolsets), session_log=SessionLogConfig(enabled=False))
    async with open_memory_server(config) as raw:
        with trio.fail_after(10):
            await raw.initialize()
        sub = raw.app.services.feed.subscribe("test")
        try:
            yield Client(raw), sub
        finally:
            sub.close()
        check_frames(raw)


def published(sub: Subscription, *, external: bool = False) -> list[Change]:
    """What the feed holds now: a write is published before its call is answered. Edits the
    workspace watcher saw (a test's files written by hand) only with `external`."""
    out = []
    while True:
        try:
            change = sub.receive_nowait()
        except trio.WouldBlock:
            return out
        if external or change.origin == "self":
            out.append(change)


def one(sub: Subscription) -> Change:
    changes = published(sub)
    assert len(changes) == 1, changes
    return changes[0]


async def test_each_openspec_write_is_published_once_with_its_paths_toolset_and_kind(tmp_path: Path) -> None:
    async with server(tmp_path, "openspec") as (c, sub):
        await c.ok("init")
        init = one(sub)
        # The change arrives by hand (not through a tool): nothing of it is published as a write.
        materialise({rel: text for rel, text in basic().items() if rel != "openspec/config.yaml"}, tmp_path)
        await c.ok("task_complete", changeId=CHANGE, task="1.3")
        task = one(sub)
        await c.ok("task_complete", changeId=CHANGE, task="1.3")  # already done: nothing written
        assert published(sub) == []
        archived = (await c.ok("archive", changeId=CHANGE, force=True))["archive"]["archivedAs"]
        archive = one(sub)
    assert (init.workspace, init.toolset, init.kind, init.origin) == (str(tmp_path), "openspec", "config", "self")
    assert "openspec/config.yaml" in init.written and init.removed == ()
    assert (task.toolset, task.kind, task.written, task.removed) == (
        "openspec", "task", (f"openspec/changes/{CHANGE}/tasks.md",), ())
    assert (archive.toolset, archive.kind) == ("openspec", "change")
    files = sorted(rel for rel in basic() if rel.startswith(f"openspec/changes/{CHANGE}/"))
    assert sorted(archive.removed) == files  # the change's files, where they were
    moved = {f"openspec/changes/archive/{archived}/{rel.removeprefix(f'openspec/changes/{CHANGE}/')}"
             for rel in files}
    merged = {f"openspec/{rel.removeprefix(f'openspec/changes/{CHANGE}/')}" for rel in files if "/specs/" in rel}
    assert merged == {"openspec/specs/notifications/spec.md", "openspec/specs/user-auth/spec.md"}
    assert moved | merged == set(archive.written)
    assert init.seq < task.seq < archive.seq


async def test_each_airsspec_write_is_published_once_with_its_paths_toolset_and_kind(tmp_path: Path) -> None:
    async with server(tmp_path, "airsspec") as (c, sub):
        spec_id = (await c.ok("spec_create", title="Feed", description=""))["spec_id"]
        created = one(sub)
        await c.ok("spec_transition", spec_id=spec_id, to_state="active")
        moved = one(sub)
        await c.ok("plan_create", spec_id=spec_id, approach="a", steps=[{"title": "s", "description": ""}])
        planned = one(sub)
        await c.error("spec_transition", spec_id=spec_id, to_state="nonsense")  # refused: nothing written
        assert published(sub) == []
    for change, kind in ((created, "spec"), (moved, "spec"), (planned, "plan")):
        assert (change.workspace, change.toolset, change.kind, change.origin) == (str(tmp_path), "airsspec", kind,
                                                                                 "self")
        assert change.removed == ()
    assert {layout.CONFIG, layout.spec_file(spec_id), layout.state_file(spec_id)} <= set(created.written)
    assert layout.state_file(spec_id) in moved.written and layout.CONFIG not in moved.written
    assert layout.plan_file(spec_id) in planned.written
    assert created.seq < moved.seq < planned.seq


async def test_a_write_to_a_workspace_above_the_root_is_published_by_its_own_storage_actor(tmp_path: Path) -> None:
    (tmp_path / ".airsspec").mkdir()
    (tmp_path / layout.CONFIG).write_text('[project]\nname = "outer"\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    async with server(inner, "airsspec") as (c, sub):
        spec_id = (await c.ok("spec_create", title="Up", description=""))["spec_id"]
        change = one(sub)
        assert c.raw.app.supervisor.running(Storages.name(tmp_path))
    assert change.workspace == str(tmp_path) and layout.spec_file(spec_id) in change.written


def same_path_in_order(changes: list[Change]) -> bool:
    """Per path, events come in the order their writes committed (their feed sequence)."""
    last: dict[str, int] = {}
    for change in changes:
        for path in change.paths:
            if last.get(path, -1) >= change.seq:
                return False
            last[path] = change.seq
    return True


@pytest.mark.slow
async def test_writes_by_another_process_arrive_as_external_and_ours_once_as_our_own(tmp_path: Path) -> None:
    async with server(tmp_path, "airsspec") as (c, sub):
        ours = (await c.ok("spec_create", title="Ours", description=""))["spec_id"]
        theirs = []
        for n in range(2):
            spec_id = (await c.ok("spec_create", title=f"Theirs {n}", description=""))["spec_id"]
            await c.ok("plan_create", spec_id=spec_id, approach="a",
                       steps=[{"title": f"step {i}", "description": ""} for i in range(8)])
            await c.ok("build_start", spec_id=spec_id)
            theirs.append(spec_id)
        marker = tmp_path / ".airsspec" / "specs" / ours / "marker.md"
        marker.write_text("by hand\n")  # the first external event must be this one, none of ours
        with trio.fail_after(10):
            setup = [await sub.receive()]
            while setup[-1].origin == "self":
                setup.append(await sub.receive())
        assert setup[-1].written == (f".airsspec/specs/{ours}/marker.md",), setup[-1]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        args = [sys.executable, "-m", "tests.airsspec.worker", str(tmp_path), "7", "40", *theirs]
        worker = await trio.to_thread.run_sync(functools.partial(
            subprocess.Popen, args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        try:
            writes = 0
            while worker.poll() is None or writes < 20:  # ours overlap theirs, and at least 20 of them
                await c.ok("spec_update", spec_id=ours, description=f"update {writes}")
                writes += 1
            with trio.fail_after(120):
                out, err = await trio.to_thread.run_sync(worker.communicate)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
        changes = published(sub, external=True)
        def seen(spec_id: str) -> bool:
            return any(ch.origin == "external" and f"/{spec_id}/" in path for ch in changes for path in ch.paths)

        # The watcher's batches, up to the last after its debounce. Every spec of theirs is waited
        # for: a batch read mid-run may hold the worker's first writes (all to one spec) while the
        # others' still wait for the next batch.
        with trio.fail_after(10):
            while not all(seen(spec_id) for spec_id in theirs):
                changes.append(await sub.receive())
    assert worker.returncode == 0, err.decode()[-3000:]
    assert msgspec.json.decode(out.strip().splitlines()[-1])  # the worker wrote too
    own = [ch for ch in changes if ch.origin == "self"]
    assert len(own) == writes  # each of ours once
    assert all(ch.toolset == "airsspec" and layout.spec_file(ours) in ch.written for ch in own)
    assert not any(f"/{spec_id}/" in path for ch in own for path in ch.paths for spec_id in theirs)
    assert same_path_in_order(own)
    external = [ch for ch in changes if ch.origin == "external"]
    assert all(ch.toolset == "" for ch in external)
    for spec_id in theirs:  # theirs arrive through the watcher, as someone else's
        assert any(f"/{spec_id}/" in path for ch in external for path in ch.paths), spec_id


# ---------------------------------------------------------------------- a crash


def crash_once(client: MemoryClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next publish raises inside the storage actor that commits (its loop crashes), once."""
    feed = client.app.services.feed
    real = feed.publish

    def boom(change: Change) -> Change:
        monkeypatch.setattr(feed, "publish", real)
        raise RuntimeError("injected: the storage actor's loop fails")

    monkeypatch.setattr(feed, "publish", boom)


@pytest.mark.parametrize("where", ["server root", "workspace above the root"])
async def test_a_crashed_storage_actor_is_restarted_and_the_server_goes_on_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    root = tmp_path
    if where != "server root":  # the storage actor `Storages` starts on demand
        (tmp_path / ".airsspec").mkdir()
        (tmp_path / layout.CONFIG).write_text('[project]\nname = "outer"\n')
        root = tmp_path / "pkg"
        root.mkdir()
    name = "storage" if where == "server root" else Storages.name(tmp_path)
    async with server(root, "airsspec") as (c, sub):
        spec_id = (await c.ok("spec_create", title="Before", description=""))["spec_id"]
        published(sub)
        crash_once(c.raw, monkeypatch)
        failed = await c.call("spec_update", spec_id=spec_id, description="during")
        assert not failed["success"]
        await c.ok("spec_update", spec_id=spec_id, description="after")
        after = one(sub)
        status = await c.ok("spec_status", spec_id=spec_id)
        restarts = c.raw.app.supervisor.restarts.get(name, 0)
    assert restarts == 1
    assert after.written and layout.spec_file(spec_id) in after.written
    assert status["spec_id"] == spec_id


async def test_a_killed_storage_actor_is_restarted_and_its_workspace_written_again(tmp_path: Path) -> None:
    async with server(tmp_path, "openspec") as (c, sub):
        await c.ok("init")
        assert one(sub).kind == "config"
        supervisor = c.raw.app.supervisor
        supervisor.kill("storage")  # as a fault no code of the actor expects
        with trio.fail_after(5):  # the crash is logged and the actor restarted after its backoff
            while supervisor.restarts.get("storage", 0) < 1 or "storage" not in supervisor.children:
                await trio.testing.wait_all_tasks_blocked()
        await c.ok("update_project_context", content="After the restart.")
        change = one(sub)
    assert change.written == ("openspec/config.yaml",) and change.kind == "config"
