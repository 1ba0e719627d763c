"""The metrics actor's statistics in Prometheus text format, through prometheus-client's own
exposition (dots in the seed's names become underscores, as Prometheus requires)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from specactor.actors.metrics import MetricsStatistics

_HELP = {
    "mcp.requests.total": "MCP requests answered, by method and tool",
    "mcp.errors.total": "MCP errors, by JSON-RPC or tool error code",
    "mcp.tool.invocations": "tools/call invocations, by tool",
    "mcp.requests.duration": "MCP request latency in seconds, by method and tool",
}


class _Snapshot(Collector):
    def __init__(self, stats: MetricsStatistics) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        for name, series in self.stats.counters.items():
            prom = name.replace(".", "_").removesuffix("_total")
            labels = sorted({k for key in series for k, _ in key})
            family = CounterMetricFamily(prom, _HELP[name], labels=labels)
            for key, value in series.items():
                family.add_metric([dict(key)[k] for k in labels], value)
            yield family
        for name, hists in self.stats.histograms.items():
            family_h = HistogramMetricFamily(name.replace(".", "_") + "_seconds", _HELP[name],
                                             labels=["method", "tool"])
            for key, hist in hists.items():
                cumulative, seen = [], 0
                for edge, count in zip((*map(str, hist.buckets), "+Inf"), hist.counts, strict=True):
                    seen += count
                    cumulative.append((edge, seen))
                family_h.add_metric([dict(key)["method"], dict(key)["tool"]], cumulative, hist.sum)
            yield family_h


def exposition(stats: MetricsStatistics) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(stats))
    return generate_latest(registry)
