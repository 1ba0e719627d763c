"""The change feed: every subscriber sees each event once, in order; a slow one rescans, a writer never waits."""

from __future__ import annotations

import trio
import trio.testing

from specactor.actors.change_feed import ChangeFeed
from specactor.domain.changes import Change, kind_of, resource_uris


def change(path: str, workspace: str = "/ws") -> Change:
    return Change(workspace=workspace, toolset="openspec", kind=kind_of("openspec", (path,)), written=(path,))


async def test_every_subscriber_sees_each_event_once_in_publish_order() -> None:
    feed = ChangeFeed()
    a, b = feed.subscribe("a"), feed.subscribe("b")
    for i in range(5):
        feed.publish(change(f"openspec/specs/s{i}/spec.md"))
    for sub in (a, b):
        with trio.fail_after(1):
            got = [await sub.receive() for _ in range(5)]
        assert [c.seq for c in got] == [1, 2, 3, 4, 5]
        assert [c.written[0] for c in got] == [f"openspec/specs/s{i}/spec.md" for i in range(5)]
        assert [c.kind for c in got] == ["spec"] * 5


async def test_a_full_subscriber_costs_the_writer_nothing_and_rescans_each_workspace_it_missed() -> None:
    feed = ChangeFeed()
    slow = feed.subscribe("slow", buffer=2)
    for i in range(10):  # never blocks: this test would hang otherwise
        feed.publish(change("openspec/changes/c/tasks.md", workspace="/a" if i < 5 else "/b"))
    assert slow.dropped == 8
    got = [slow.receive_nowait() for _ in range(4)]
    assert [c.kind for c in got] == ["task", "task", "rescan", "rescan"]
    assert sorted(c.workspace for c in got[2:]) == ["/a", "/b"]
    feed.publish(change("openspec/specs/x/spec.md"))
    assert slow.receive_nowait().seq == 11  # live again, after the rescans


async def test_events_published_while_behind_are_not_delivered_out_of_order() -> None:
    feed = ChangeFeed()
    sub = feed.subscribe("s", buffer=1)
    feed.publish(change("openspec/specs/a/spec.md"))
    feed.publish(change("openspec/specs/b/spec.md"))  # dropped: behind
    first = sub.receive_nowait()
    feed.publish(change("openspec/specs/c/spec.md"))  # still behind until the rescan is read
    assert first.written == ("openspec/specs/a/spec.md",)
    assert sub.receive_nowait().kind == "rescan"


async def test_iterating_a_subscription_ends_when_it_is_closed() -> None:
    feed = ChangeFeed()
    sub = feed.subscribe("s")
    seen: list[int] = []

    async def read() -> None:
        async for c in sub:
            seen.append(c.seq)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        feed.publish(change("openspec/specs/a/spec.md"))
        await trio.testing.wait_all_tasks_blocked()
        sub.close()
    assert seen == [1]
    assert feed.subscribers == 0


def test_the_kind_of_a_write_comes_from_where_it_landed() -> None:
    assert kind_of("openspec", ("openspec/changes/add-x/tasks.md",)) == "task"
    assert kind_of("openspec", ("openspec/changes/add-x/proposal.md",)) == "change"
    assert kind_of("openspec", ("openspec/specs/auth/spec.md",)) == "spec"
    assert kind_of("openspec", ("openspec/config.yaml",)) == "config"
    assert kind_of("airsspec", (".airsspec/specs/1-x/plan.md",)) == "plan"
    assert kind_of("airsspec", (".airsspec/specs/1-x/state.toon",)) == "spec"
    assert kind_of("memory", ()) == "memory"
    assert kind_of("knowledge", ()) == "knowledge"


def test_a_change_names_the_resources_it_touched_once_each() -> None:
    def uris(*paths: str, kind: str = "other") -> list[str]:
        return resource_uris(Change(workspace="/ws", toolset="", kind=kind, written=paths))  # type: ignore[arg-type]

    assert uris("openspec/changes/add-x/tasks.md") == [
        "openspec://changes/add-x/tasks", "openspec://changes/add-x", "openspec://changes"]
    assert uris("openspec/changes/add-x/specs/auth/spec.md", "openspec/changes/add-x/proposal.md") == [
        "openspec://changes/add-x/specs/auth/spec.md", "openspec://changes/add-x", "openspec://changes",
        "openspec://changes/add-x/proposal"]
    assert uris("openspec/specs/auth/login/spec.md") == ["openspec://specs/auth/login", "openspec://specs"]
    assert uris("openspec/changes/archive/2026-11-25-add-x/tasks.md") == ["openspec://archive", "openspec://changes"]
    assert uris("openspec/project.md") == ["openspec://project"]
    assert uris(".airsspec/specs/1-x/plan.md")[:2] == ["airsspec:///1-x", "airsspec:///1-x/spec"]
    assert uris(".airsspec/config.toml") == ["airsspec:///config"]
    assert uris("src/main.py") == []
    assert "openspec://specs" in uris(kind="rescan")
