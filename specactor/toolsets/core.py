"""The always-on `core` toolset: the server's own resources.

`specactor://metrics` returns the metrics actor's counters and histograms as JSON.
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
                                   "mcp.tool.invocations).")
    async def metrics(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        from specactor.actors.metrics import Snapshot

        stats = await services.metrics.mailbox.call(Snapshot(), METRICS_TIMEOUT)
        return encode(stats.to_json()).decode()
