"""The metrics of several HTTP worker processes, summed: what `/metrics` serves with `--workers N`.

Each worker keeps counting in its own `MetricsActor` (a dict update per request, nothing more)
and `publish_forever` writes its snapshot, when it changed, to `<folder>/<pid>.msgpack` at
most every `PUBLISH_EVERY` seconds (written aside, then renamed: a reader never sees half a
file). `combined` is this worker's live figures plus the latest snapshot of every other live
worker; the snapshots of dead workers are skipped, and removed by the parent when it replaces
them. prometheus-client's own multiprocess mode would put an mmap write under every counter
and histogram update of every request, and keeps dead workers' figures; see docs/decisions.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import trio

from specactor.actors.metrics import BUCKETS, Histogram, Labels, MetricsActor, MetricsStatistics
from specactor.actors.shared_sessions import alive

PUBLISH_EVERY = 0.5  # seconds: how stale another worker's figures may be in a scrape


class _Counter(msgspec.Struct, array_like=True):
    name: str
    labels: list[tuple[str, str]]
    value: int


class _Hist(msgspec.Struct, array_like=True):
    name: str
    labels: list[tuple[str, str]]
    counts: list[int]
    count: int
    sum: float


class _Snapshot(msgspec.Struct, array_like=True):
    counters: list[_Counter]
    histograms: list[_Hist]
    dropped: int


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(_Snapshot)


def encode(stats: MetricsStatistics) -> bytes:
    return _enc.encode(_Snapshot(
        [_Counter(name, list(labels), value) for name, series in stats.counters.items()
         for labels, value in series.items()],
        [_Hist(name, list(labels), list(h.counts), h.count, h.sum) for name, series in stats.histograms.items()
         for labels, h in series.items()],
        stats.dropped))


def add(into: MetricsStatistics, data: bytes) -> MetricsStatistics:
    """`into` plus the figures of one encoded snapshot (a new record; `into` is not changed)."""
    snap = _dec.decode(data)
    counters = {name: dict(series) for name, series in into.counters.items()}
    for c in snap.counters:
        series = counters.setdefault(c.name, {})
        key: Labels = tuple((k, v) for k, v in c.labels)
        series[key] = series.get(key, 0) + c.value
    hists = {name: dict(series) for name, series in into.histograms.items()}
    for h in snap.histograms:
        hseries = hists.setdefault(h.name, {})
        key = tuple((k, v) for k, v in h.labels)
        old = hseries.get(key)
        if old is None:
            hseries[key] = Histogram(BUCKETS, tuple(h.counts), h.count, h.sum)
        else:
            hseries[key] = Histogram(BUCKETS, tuple(a + b for a, b in zip(old.counts, h.counts, strict=True)),
                                     old.count + h.count, old.sum + h.sum)
    return MetricsStatistics(counters, hists, into.dropped + snap.dropped)


class WorkerMetrics:
    """Args:
        metrics: this worker's own figures.
        folder: where every worker of the server publishes (the parent's runtime folder).
    """

    def __init__(self, metrics: MetricsActor, folder: Path, pid: int | None = None) -> None:
        self.metrics = metrics
        self.folder = folder
        self.pid = os.getpid() if pid is None else pid

    def combined(self) -> MetricsStatistics:
        """This worker's figures plus the last published ones of every other live worker."""
        total = self.metrics.statistics()
        for path in self.folder.glob("*.msgpack"):
            pid = int(path.stem) if path.stem.isdigit() else 0
            if pid == self.pid or not pid or not alive(pid):
                continue
            try:
                total = add(total, path.read_bytes())
            except (OSError, msgspec.DecodeError):  # replaced or removed while read: its next copy counts
                continue
        return total

    def publish(self) -> None:
        path = self.folder / f"{self.pid}.msgpack"
        aside = path.with_suffix(".tmp")
        aside.write_bytes(encode(self.metrics.statistics()))
        os.replace(aside, path)

    async def publish_forever(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        last: MetricsStatistics | None = None
        task_status.started()
        while True:
            stats = self.metrics.statistics()
            if stats != last:
                self.publish()
                last = stats
            await trio.sleep(PUBLISH_EVERY)


def forget(folder: Path, pid: int) -> None:
    """Remove a dead worker's snapshot (the parent, when it replaces the worker)."""
    (folder / f"{pid}.msgpack").unlink(missing_ok=True)
