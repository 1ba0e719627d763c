"""A write published on the change feed reaches the sessions subscribed to the resources it touched,
through the one resource notifier, whoever wrote it (a toolset, a hand edit, another process)."""

from __future__ import annotations

from pathlib import Path

import trio

from specactor.domain.changes import Change
from specactor.testing import open_memory_server
from tests.conftest import fixture_config


async def updated(client: object, wanted: set[str]) -> set[str]:
    seen: set[str] = set()
    with trio.fail_after(5):
        while not wanted <= seen:
            await client.request("ping")  # type: ignore[attr-defined]
            seen = {n["params"]["uri"] for n in client.notifications  # type: ignore[attr-defined]
                    if n["method"] == "notifications/resources/updated"}
    return seen


async def test_an_edit_on_the_feed_notifies_subscribers_of_the_resources_it_touched(tmp_path: Path) -> None:
    async with open_memory_server(fixture_config(tmp_path)) as client:
        await client.initialize()
        for uri in ("openspec://changes/add-x/tasks", "openspec://changes"):
            assert (await client.request("resources/subscribe", {"uri": uri}))["result"] == {}
        client.app.services.feed.publish(Change(workspace=str(tmp_path), toolset="", kind="task",
                                                written=("openspec/changes/add-x/tasks.md",), origin="external"))
        seen = await updated(client, {"openspec://changes/add-x/tasks", "openspec://changes"})
        assert "openspec://changes/add-x" not in seen  # not subscribed: not told


async def test_a_rescan_tells_subscribers_of_the_indexes(tmp_path: Path) -> None:
    async with open_memory_server(fixture_config(tmp_path)) as client:
        await client.initialize()
        assert (await client.request("resources/subscribe", {"uri": "openspec://specs"}))["result"] == {}
        client.app.services.feed.publish(Change(workspace=str(tmp_path), toolset="", kind="rescan"))
        await updated(client, {"openspec://specs"})
