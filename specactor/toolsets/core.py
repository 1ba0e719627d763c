"""The always-on `core` toolset: the server's own resources.

`specactor://metrics` returns the metrics actor's counters and histograms as JSON, and the
worker pool's statistics once the pool exists (`pool`: its size, live workers, and the jobs run
in workers, in-process, and lost to a worker's death).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specactor.protocol.context import RequestContext
from specactor.protocol.registry import Registry
from specactor.wire.codec import encode

if TYPE_CHECKING:
    from specactor.toolsets import Services

METRICS_TIMEOUT = 5.0


def register(registry: Registry, services: Services) -> None:
    @registry.resource("specactor://metrics", name="metrics", mime_type="application/json",
                       description="Request counts, latency histograms and error counts of this server "
                                   "(mcp.requests.total, mcp.requests.duration, mcp.errors.total, "
                                   "mcp.tool.invocations), and the worker pool's job counts.")
    async def metrics(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        from specactor.actors.metrics import Snapshot

        stats = await services.metrics.mailbox.call(Snapshot(), METRICS_TIMEOUT)
        doc = stats.to_json()
        if "pool" in vars(services):  # built by a first heavy call: reading it must not build it
            doc["pool"] = services.pool.statistics()
        return encode(doc).decode()
