"""The toolsets' caches read the change feed: a hand edit shows in an AirsSpec list as soon as the
workspace watcher sees it, not at the next sweep; a rescan makes the next read look at everything."""

from __future__ import annotations

from pathlib import Path

import trio

from specactor.domain.airsspec.documents import Documents
from specactor.domain.changes import Change
from specactor.fs.airsspec_fs import AirsSpecDisk
from specactor.testing import MemoryClient
from tests.airsspec.support import Client, airsspec_server


def disk(raw: MemoryClient) -> AirsSpecDisk:
    caches = raw.app.services.caches
    found = [cb.__self__ for cb in caches._callbacks if isinstance(getattr(cb, "__self__", None), AirsSpecDisk)]
    assert len(found) == 1
    return found[0]  # type: ignore[no-any-return]


async def applied(raw: MemoryClient) -> None:
    """Until every change published so far has reached the caches."""
    with trio.fail_after(10):
        await raw.app.services.caches.wait_applied(raw.app.services.feed.published)


async def titles(c: Client) -> set[str]:
    return {s["title"] for s in (await c.ok("spec_list"))["specs"]}


async def test_a_hand_edit_shows_in_the_spec_list_once_the_watcher_sees_it(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = (await c.ok("spec_create", title="Before", description="d"))["spec_id"]
        assert await titles(c) == {"Before"}
        disk(c.raw).catalog.sweep_interval = 3600.0  # no sweep will come to the rescue
        sub = c.raw.app.services.feed.subscribe("test")
        spec = tmp_path / ".airsspec" / "specs" / spec_id / "spec.md"
        spec.write_text(spec.read_text().replace("Before", "After, by hand"))
        with trio.fail_after(10):
            while (await sub.receive()).origin != "external":
                pass
        await applied(c.raw)
        assert await titles(c) == {"After, by hand"}


async def test_a_rescan_makes_the_next_read_look_at_every_spec(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for root, title in ((ours, "One"), (theirs, "Two")):
        root.mkdir()
        async with airsspec_server(root) as writer:
            await writer.ok("spec_create", title=title, description="d")
    disk = AirsSpecDisk(ours, Documents())
    disk.catalog.sweep_interval = 3600.0  # no sweep will come to the rescue

    def listed() -> set[str]:
        return disk.read(lambda catalog, files: {e.id for e in catalog.entries(files)})

    assert len(listed()) == 1
    for path in (theirs / ".airsspec" / "specs").iterdir():  # a spec arrives that no journal names
        path.rename(ours / ".airsspec" / "specs" / path.name)
    assert len(listed()) == 1
    disk.changed(Change(workspace=str(ours), toolset="", kind="rescan", origin="external"))
    assert len(listed()) == 2
    disk.changed(Change(workspace=str(theirs), toolset="", kind="rescan", origin="external"))  # not ours: no-op
