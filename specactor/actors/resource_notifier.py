"""The resource notifier: reads the change feed and tells the registry which resources changed.

One subscriber for both transports: the registry's listeners (the stdio and HTTP fan-out) turn
`resource_updated(uri)` into `notifications/resources/updated` for the sessions subscribed to
that URI. Toolsets do not notify on their own: a write by any toolset, by hand or by another
process reaches subscribers the same way, through the feed. A rescan (the notifier fell behind,
or a watcher lost events) updates the index resources, since anything may have changed.
"""

from __future__ import annotations

import trio

from specactor.actors.change_feed import ChangeFeed
from specactor.domain.changes import resource_uris
from specactor.protocol.registry import Registry

# Notifications are cheap to produce and a session reads them at its own pace: a buffer that
# holds a burst of a few hundred writes, past which one rescan stands for what was missed.
BUFFER = 512


class ResourceNotifier:
    def __init__(self, feed: ChangeFeed, registry: Registry) -> None:
        self.feed = feed
        self.registry = registry
        self.delivered = 0
        # Made once and kept across restarts: what is published while the notifier restarts waits.
        self.sub = feed.subscribe("resource-notifier", BUFFER)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for change in self.sub:
            for uri in resource_uris(change):
                self.registry.resource_updated(uri)
            self.delivered += 1
