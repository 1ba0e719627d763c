"""The change feed: every committed write is published once; each subscriber reads them in order.

`publish` never blocks and never fails a writer: it puts the event in each subscriber's own
bounded buffer. A subscriber that falls behind loses nothing silently. When its buffer is full,
the events it misses are dropped and it is marked behind; the next event it reads is a single
`rescan` for each workspace it missed events of, and then the live events resume. So a slow
subscriber (a graph sync waiting on the network) costs a rescan, never a writer's time or
unbounded memory.

Events carry the feed's own sequence number, so within one feed they are totally ordered, and
per path in the order their writes committed (writers publish after their commit, from the
event loop's one thread).
"""

from __future__ import annotations

import itertools

import msgspec
import trio

from specactor.domain.changes import Change
from specactor.logsetup import get_logger

log = get_logger("specactor.change_feed")

# Room for a burst of writes while a subscriber is busy: a closed burst of 100 tool calls in
# one workspace is at most a few hundred events; past this the subscriber rescans instead.
DEFAULT_BUFFER = 1024


class Subscription:
    """One subscriber's view of the feed: iterate it (`async for change in sub`), close it when done."""

    def __init__(self, feed: ChangeFeed, name: str, buffer: int) -> None:
        self.name = name
        self._feed = feed
        self._send, self._receive = trio.open_memory_channel[Change](buffer)
        self.behind: set[str] = set()  # workspaces whose events were dropped since the last read
        self.dropped = 0

    def offer(self, change: Change) -> None:
        if self.behind:  # once behind, stay behind until the reader catches up: order is kept
            self._drop(change)
            return
        try:
            self._send.send_nowait(change)
        except trio.WouldBlock:
            self._drop(change)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def _drop(self, change: Change) -> None:
        if not self.behind:
            log.warning("change feed subscriber fell behind; it will rescan", subscriber=self.name)
        self.behind.add(change.workspace)
        self.dropped += 1

    def receive_nowait(self) -> Change:
        """The next event, or raise trio.WouldBlock."""
        try:
            return self._receive.receive_nowait()
        except trio.WouldBlock:
            if not self.behind:
                raise
        return self._rescan()

    async def receive(self) -> Change:
        """The next event, waiting for one."""
        try:
            return self.receive_nowait()
        except trio.WouldBlock:
            return await self._receive.receive()

    def _rescan(self) -> Change:
        workspace = min(self.behind)
        self.behind.discard(workspace)
        return Change(workspace=workspace, toolset="", kind="rescan", origin="external",
                      seq=self._feed.last_seq)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Change:
        # A plain iterator, not an async generator: a reader cancelled mid-wait leaves nothing to close.
        try:
            return await self.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._feed._subscribers.discard(self)
        self._send.close()
        self._receive.close()


class ChangeFeed:
    """Publish committed writes; subscribe to read them. Not an actor loop: publishing is a call on
    the event loop's thread (a worker thread goes through `trio.from_thread.run_sync`), and each
    subscriber's channel is its own mailbox."""

    def __init__(self) -> None:
        self._subscribers: set[Subscription] = set()
        self._seq = itertools.count(1)
        self.last_seq = 0
        self.published = 0

    def subscribe(self, name: str, buffer: int = DEFAULT_BUFFER) -> Subscription:
        sub = Subscription(self, name, buffer)
        self._subscribers.add(sub)
        return sub

    def publish(self, change: Change) -> Change:
        """Stamp `change` with the next sequence number and offer it to every subscriber. Never blocks."""
        self.last_seq = next(self._seq)
        stamped = msgspec.structs.replace(change, seq=self.last_seq)
        self.published += 1
        for sub in tuple(self._subscribers):
            sub.offer(stamped)
        return stamped

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)
