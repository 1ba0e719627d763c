"""The cache invalidator: reads the change feed and tells the toolsets' caches what changed.

A toolset registers a callback (`register`) for its caches; each change on the feed, this
process's writes and edits the workspace watcher saw alike, reaches every callback once, in feed
order, on a worker thread (a cache takes its own lock, which a long read may hold). A rescan (this
subscriber fell behind, or the watcher lost events) reaches them too: they forget everything of
that workspace. So a hand edit shows in an AirsSpec list as soon as the watcher sees it, not at
the next two-second sweep; the caches' own checks (stat keys, inotify, the journal) stay as the
safety net for what the feed cannot know.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from specactor.actors.change_feed import ChangeFeed
from specactor.domain.changes import Change

# A burst of a few hundred writes fits; past that, one rescan stands for what was missed.
BUFFER = 1024
# Changes applied in one trip to a worker thread at most: a burst of 100 archives is one hop, not
# 100 (each ~40 us of the event loop's time, in the tail of the burst's replies).
HOP = 256

Invalidate = Callable[[Change], None]


class CacheInvalidator:
    def __init__(self, feed: ChangeFeed) -> None:
        self.feed = feed
        self._callbacks: list[Invalidate] = []
        self.applied = 0  # changes every callback has seen: tests wait on it
        self._applied = trio.Event()
        # Made once and kept across restarts: what is published while the invalidator restarts waits.
        self.sub = feed.subscribe("cache-invalidator", BUFFER)

    def register(self, callback: Invalidate) -> None:
        """Call `callback(change)` for every later change (on a worker thread; it must not raise)."""
        self._callbacks.append(callback)

    async def wait_applied(self, count: int) -> None:
        """Wait until `count` changes have reached every callback."""
        while self.applied < count:
            await self._applied.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for change in self.sub:
            batch = [change]  # and what else waits: a group commit publishes its writes together
            while len(batch) < HOP:
                try:
                    batch.append(self.sub.receive_nowait())
                except trio.WouldBlock:
                    break
            await trio.to_thread.run_sync(_apply, tuple(self._callbacks), batch)  # one hop for them all
            self.applied += len(batch)
            self._applied.set()
            self._applied = trio.Event()


def _apply(callbacks: tuple[Invalidate, ...], changes: list[Change]) -> None:
    for change in changes:  # in feed order, each to every callback
        for callback in callbacks:
            callback(change)
