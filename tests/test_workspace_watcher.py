"""Edits made by hand or by another process reach the change feed through the workspace watcher,
once per batch and marked external; the server's own writes are not published a second time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from specactor.actors.change_feed import ChangeFeed, Subscription
from specactor.actors.workspace_watcher import WorkspaceWatcher, is_temp
from specactor.config import Config, SessionLogConfig
from specactor.domain.changes import Change
from specactor.testing import open_memory_server
from tests.airsspec.support import Client


async def next_external(sub: Subscription, timeout: float = 10) -> Change:
    with trio.fail_after(timeout):
        while True:
            change = await sub.receive()
            if change.origin == "external":
                return change


@asynccontextmanager
async def watching(root: Path, **options: object) -> AsyncIterator[tuple[ChangeFeed, Subscription]]:
    feed = ChangeFeed()
    sub = feed.subscribe("test")
    watcher = WorkspaceWatcher(root, feed, **options)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(watcher.run)
        with trio.fail_after(10):
            await watcher.ready.wait()  # the watches are set up on a worker thread after the start
        yield feed, sub
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("mode", ["inotify", "polling"])
async def test_a_hand_edit_and_a_delete_are_published_as_external_with_their_kind(tmp_path: Path, mode: str) -> None:
    spec = tmp_path / "openspec" / "specs" / "auth" / "spec.md"
    spec.parent.mkdir(parents=True)
    spec.write_text("# auth\n")
    options = {"use_inotify": mode == "inotify", "poll_interval": 0.05}
    async with watching(tmp_path, **options) as (_, sub):
        spec.write_text("# auth, edited by hand\n")
        change = await next_external(sub)
        assert change.written == ("openspec/specs/auth/spec.md",) and change.kind == "spec"
        assert change.toolset == "" and change.workspace == str(tmp_path)
        spec.unlink()
        change = await next_external(sub)
        assert change.removed == ("openspec/specs/auth/spec.md",)


async def test_a_tree_that_appears_after_the_start_is_watched_with_what_it_already_holds(tmp_path: Path) -> None:
    async with watching(tmp_path) as (_, sub):
        plan = tmp_path / ".airsspec" / "specs" / "1-x" / "plan.md"
        plan.parent.mkdir(parents=True)
        plan.write_text("steps\n")
        seen: set[str] = set()
        with trio.fail_after(10):
            while ".airsspec/specs/1-x/plan.md" not in seen:
                seen.update((await next_external(sub)).written)
        (plan.parent / "spec.md").write_text("later\n")  # the new folder is watched now
        assert (await next_external(sub)).written == (".airsspec/specs/1-x/spec.md",)


async def test_temp_files_and_files_outside_the_trees_are_never_published(tmp_path: Path) -> None:
    (tmp_path / "openspec").mkdir()
    async with watching(tmp_path) as (_, sub):
        (tmp_path / "openspec" / ".spec.md.1a2b.tmp").write_text("staged")
        (tmp_path / "src.py").write_text("x = 1\n")
        (tmp_path / "openspec" / "project.md").write_text("# project\n")
        assert (await next_external(sub)).written == ("openspec/project.md",)
    assert is_temp("openspec/specs/a/.spec.md.5.tmp") and not is_temp("openspec/specs/a/spec.md")


async def test_the_servers_own_writes_are_on_the_feed_once_and_not_again_as_external(tmp_path: Path) -> None:
    config = Config(root=str(tmp_path), toolsets=["airsspec"], session_log=SessionLogConfig(enabled=False))
    async with open_memory_server(config) as raw:
        await raw.initialize()
        sub = raw.app.services.feed.subscribe("test")
        c = Client(raw)
        spec_id = (await c.ok("spec_create", title="Watched", description=""))["spec_id"]
        await c.ok("spec_update", spec_id=spec_id, description="edited through the tool")
        hand = tmp_path / ".airsspec" / "specs" / spec_id / "notes.md"
        hand.write_text("a note by hand\n")  # then one edit by hand, so the test knows the watcher ran
        changes: list[Change] = []
        with trio.fail_after(10):
            while not any(ch.origin == "external" for ch in changes):
                changes.append(await sub.receive())
        sub.close()
    assert [ch.origin for ch in changes].count("self") == 2
    external = [ch for ch in changes if ch.origin == "external"]
    assert external[0].written == (f".airsspec/specs/{spec_id}/notes.md",), external


def test_an_inotify_closed_by_hand_is_not_closed_again_by_the_collector(tmp_path: Path) -> None:
    import gc
    import os

    from specactor.fs.inotify import Inotify

    inotify = Inotify()
    assert inotify.watch(str(tmp_path), "")
    fd = inotify.fd
    inotify.close()
    inotify.close()  # twice: a no-op
    reused = os.open(os.devnull, os.O_RDONLY)  # may take the same number
    try:
        del inotify
        gc.collect()
        os.fstat(reused)  # still open: the finalizer did not close a descriptor it no longer owns
    finally:
        os.close(reused)
    assert fd >= 0


async def test_what_is_published_while_a_watcher_restarts_is_not_lost(tmp_path: Path) -> None:
    feed = ChangeFeed()
    watcher = WorkspaceWatcher(tmp_path, feed)
    feed.publish(Change(workspace=str(tmp_path), toolset="airsspec", kind="spec", written=(".airsspec/x",)))
    assert watcher.sub.receive_nowait().written == (".airsspec/x",)  # subscribed since it was built


async def test_own_writes_are_forgotten_when_their_time_is_up_and_a_rewrite_keeps_its_later_time(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    from specactor.actors.workspace_watcher import OWN_TTL

    feed = ChangeFeed()
    watcher = WorkspaceWatcher(tmp_path, feed, use_inotify=False)
    root = str(tmp_path)

    def wrote(*paths: str) -> None:
        feed.publish(Change(workspace=root, toolset="airsspec", kind="airsspec", written=paths))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watcher._learn_own, watcher.sub)
        wrote(*(f".airsspec/specs/s{i}/spec.md" for i in range(5000)))  # more than the old sweep's 4,096
        await trio.testing.wait_all_tasks_blocked()
        assert len(watcher.own) == 5000
        await trio.sleep(OWN_TTL / 2)
        wrote(".airsspec/specs/s0/spec.md")  # written again: remembered for another OWN_TTL
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(OWN_TTL / 2 + 1)
        wrote(".airsspec/specs/new/spec.md")  # any later write lets the expired go
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(watcher.own) == [".airsspec/specs/new/spec.md", ".airsspec/specs/s0/spec.md"]
        assert len(watcher._expiring) == 2  # the queue lets go with them
        await trio.sleep(OWN_TTL + 1)
        wrote()
        await trio.testing.wait_all_tasks_blocked()
        assert watcher.own == {} and not watcher._expiring
        nursery.cancel_scope.cancel()


async def test_while_requests_are_in_flight_a_hand_edit_waits_for_a_quiet_moment_but_no_longer_than_max_defer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specactor.actors import workspace_watcher

    spec = tmp_path / "openspec" / "specs" / "auth" / "spec.md"
    spec.parent.mkdir(parents=True)
    spec.write_text("# auth\n")
    busy = True

    def quiet_for() -> float:  # the dispatcher's: 0 while a request is in flight
        return 0.0 if busy else 1.0

    monkeypatch.setattr(workspace_watcher, "MAX_DEFER", 0.3)
    async with watching(tmp_path, use_inotify=False, poll_interval=0.05, quiet_for=quiet_for) as (_, sub):
        spec.write_text("# auth, edited under constant load\n")
        edited = trio.current_time()
        assert (await next_external(sub)).written == ("openspec/specs/auth/spec.md",)
        assert trio.current_time() - edited >= 0.3  # it waited for a quiet moment, then went ahead
        monkeypatch.setattr(workspace_watcher, "MAX_DEFER", 3600.0)
        spec.write_text("# auth, edited while a request runs\n")
        busy = False  # the request is answered: the edit goes out now, not in an hour
        assert (await next_external(sub)).written == ("openspec/specs/auth/spec.md",)
