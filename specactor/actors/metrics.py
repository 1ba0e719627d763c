"""The metrics actor: it owns the seed's counters and histograms.

Series: `mcp.requests.total{method,tool}`, `mcp.requests.duration{method,tool}` (seconds),
`mcp.errors.total{code}` and `mcp.tool.invocations{tool}`. The dispatcher records each request
with `observe`, a plain call on the event loop's one thread: waking this actor's task for
every request cost 6 % of a request's time (docs/decisions.md). `statistics()` returns a
frozen snapshot; `call(Snapshot())` does the same through the mailbox, after anything queued.
"""

from __future__ import annotations

import bisect
from typing import Any

import msgspec
import trio

from specactor.actors.mailbox import Mailbox

# Latency buckets in seconds: fine around our 0.1-5 ms operating range, coarse up to the seed's
# 200 ms target and beyond.
BUCKETS: tuple[float, ...] = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2,
                              0.5, 1.0, 2.5, 5.0, 10.0)

Labels = tuple[tuple[str, str], ...]


class Observation(msgspec.Struct, frozen=True):
    method: str
    tool: str
    seconds: float
    error: str | None


class Snapshot(msgspec.Struct, frozen=True):
    pass


class Histogram(msgspec.Struct, frozen=True):
    buckets: tuple[float, ...]
    counts: tuple[int, ...]  # per bucket, not cumulative; the last is +Inf
    count: int
    sum: float

    def quantile(self, q: float) -> float:
        """An upper-bound estimate: the bucket edge below which a `q` share of samples fall."""
        if self.count == 0:
            return 0.0
        target, seen = q * self.count, 0
        for edge, n in zip((*self.buckets, float("inf")), self.counts, strict=True):
            seen += n
            if seen >= target:
                return edge
        return float("inf")  # pragma: no cover


class MetricsStatistics(msgspec.Struct, frozen=True):
    counters: dict[str, dict[Labels, int]]
    histograms: dict[str, dict[Labels, Histogram]]
    dropped: int

    def to_json(self) -> dict[str, Any]:
        def labels(lbl: Labels) -> dict[str, str]:
            return dict(lbl)

        return {
            "counters": {name: [{"labels": labels(k), "value": v} for k, v in series.items()]
                         for name, series in self.counters.items()},
            "histograms": {name: [{"labels": labels(k), "count": h.count, "sum": h.sum,
                                   "p50": h.quantile(0.5), "p95": h.quantile(0.95), "p99": h.quantile(0.99),
                                   "buckets": dict(zip([*map(str, h.buckets), "+Inf"], h.counts, strict=True))}
                                  for k, h in series.items()]
                           for name, series in self.histograms.items()},
            "dropped": self.dropped,
        }


class _Hist(msgspec.Struct):
    counts: list[int] = msgspec.field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    count: int = 0
    total: float = 0.0


class MetricsActor:
    def __init__(self) -> None:
        # Snapshots and the occasional queued observation; 4096 absorbs a burst of queued
        # observations while the actor is descheduled. When full, they are dropped and counted.
        self.mailbox: Mailbox[Observation | Snapshot] = Mailbox("metrics", 4096)
        self._counters: dict[str, dict[Labels, int]] = {
            "mcp.requests.total": {}, "mcp.errors.total": {}, "mcp.tool.invocations": {}}
        self._hists: dict[str, dict[Labels, _Hist]] = {"mcp.requests.duration": {}}
        self._by_key: dict[tuple[str, str], tuple[Labels, _Hist]] = {}  # hot-path lookups
        self.dropped = 0

    def observe(self, method: str, tool: str, seconds: float, error: str | None) -> None:
        """Record one request; synchronous, never blocks, never drops."""
        key = (method, tool)
        series = self._by_key.get(key)
        if series is None:
            labels: Labels = (("method", method), ("tool", tool))
            series = self._by_key[key] = (labels, self._hists["mcp.requests.duration"].setdefault(labels, _Hist()))
        labels, hist = series
        totals = self._counters["mcp.requests.total"]
        totals[labels] = totals.get(labels, 0) + 1
        if tool:
            self._inc("mcp.tool.invocations", (("tool", tool),))
        if error is not None:
            self._inc("mcp.errors.total", (("code", error),))
        hist.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        hist.count += 1
        hist.total += seconds

    def observe_nowait(self, obs: Observation) -> None:
        """Queue an observation for the actor's task (for callers outside the event loop's thread
        of control); dropped and counted when the mailbox is full."""
        if not self.mailbox.cast_nowait(obs):
            self.dropped += 1

    def _inc(self, name: str, labels: Labels) -> None:
        series = self._counters[name]
        series[labels] = series.get(labels, 0) + 1

    def _apply(self, obs: Observation) -> None:
        self.observe(obs.method, obs.tool, obs.seconds, obs.error)

    def statistics(self) -> MetricsStatistics:
        return MetricsStatistics(
            counters={name: dict(series) for name, series in self._counters.items()},
            histograms={name: {k: Histogram(BUCKETS, tuple(h.counts), h.count, h.total) for k, h in series.items()}
                        for name, series in self._hists.items()},
            dropped=self.dropped,
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for letter in self.mailbox:
            with letter:
                if isinstance(letter.body, Observation):
                    self._apply(letter.body)
                else:
                    letter.reply(self.statistics())
