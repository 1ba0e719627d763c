"""From raw samples to the figures the table, the gates and the JSON report use.

`MEASURES` is the one list of reported stdio measures (key, label, unit, which way is
better); `server_figures` computes them for one server, plus the full latency summaries.
`http_measures(levels)` and `http_figures` do the same for one Streamable HTTP target: a few
per-server rows, then throughput, latency percentiles and CPU per call at each concurrency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.harness import ServerRun
from bench.http_harness import HttpRun
from bench.stats import median, summarize


@dataclass(frozen=True)
class Measure:
    key: str
    label: str
    unit: str
    higher_is_better: bool = False


MEASURES = (
    Measure("first_reply_ms", "first reply (spawn → initialize reply), median", "ms"),
    Measure("idle_rss_mb", "idle RSS (after handshake + idle)", "MB"),
    Measure("peak_rss_mb", "peak RSS (VmHWM, end of run)", "MB"),
    Measure("single_median_ms", "single call, median", "ms"),
    Measure("single_p95_ms", "single call, p95", "ms"),
    Measure("single_p99_ms", "single call, p99", "ms"),
    Measure("single_calls_per_s", "single call, calls/s (sequential)", "calls/s", higher_is_better=True),
    Measure("single_cpu_s_per_1k", "server CPU per 1,000 single calls", "s"),
    Measure("waiting_median_ms", "single call of a tool that awaits (specactor: sleep 0 s), median", "ms"),
    Measure("burst_p50_ms", "burst-100, per-request p50", "ms"),
    Measure("burst_p95_ms", "burst-100, per-request p95", "ms"),
    Measure("burst_p99_ms", "burst-100, per-request p99", "ms"),
    Measure("burst_calls_per_s", "burst-100 throughput, median over rounds", "calls/s", higher_is_better=True),
    Measure("burst_cpu_s_per_1k", "server CPU per 1,000 burst calls", "s"),
)


def _per_1k(cpu_s: float, calls: int) -> float | None:
    return cpu_s / calls * 1000 if calls else None


def server_figures(run: ServerRun) -> tuple[dict[str, float | None], dict[str, Any]]:
    """(flat figures keyed like MEASURES, full summaries) for one server."""
    first = summarize(run.first_reply_ms)
    single = summarize(run.single_ms)
    burst = summarize(run.burst_ms)
    tput = summarize(run.burst_tput)
    total_single_s = sum(run.single_ms) / 1000
    flat: dict[str, float | None] = {
        "first_reply_ms": first.get("median"),
        "idle_rss_mb": run.idle_rss_mb,
        "peak_rss_mb": run.peak_rss_mb,
        "single_median_ms": single.get("median"),
        "single_p95_ms": single.get("p95"),
        "single_p99_ms": single.get("p99"),
        "single_calls_per_s": len(run.single_ms) / total_single_s if total_single_s else None,
        "single_cpu_s_per_1k": _per_1k(run.single_cpu_s, len(run.single_ms)),
        "waiting_median_ms": median(run.waiting_ms) if run.waiting_ms else None,
        "burst_p50_ms": burst.get("median"),
        "burst_p95_ms": burst.get("p95"),
        "burst_p99_ms": burst.get("p99"),
        "burst_calls_per_s": median(run.burst_tput) if run.burst_tput else None,
        "burst_cpu_s_per_1k": _per_1k(run.burst_cpu_s, len(run.burst_ms)),
    }
    summaries = {"first_reply_ms": first, "single_ms": single, "burst_ms": burst, "burst_calls_per_s": tput}
    return flat, summaries


# ---------------------------------------------------------------- Streamable HTTP

HTTP_STATIC = (
    Measure("startup_ms", "startup (spawn → first initialize reply)", "ms"),
    Measure("idle_rss_mb", "idle RSS (after one session + idle)", "MB"),
    Measure("peak_rss_mb", "peak RSS (VmHWM, end of run)", "MB"),
)
HTTP_PER_LEVEL = (
    Measure("calls_per_s", "throughput", "calls/s", higher_is_better=True),
    Measure("p50_ms", "latency p50", "ms"),
    Measure("p95_ms", "latency p95", "ms"),
    Measure("p99_ms", "latency p99", "ms"),
    Measure("server_cpu_ms", "server CPU per call", "ms"),
    Measure("client_cpu_ms", "client CPU per call", "ms"),
)


def http_key(level: int, key: str) -> str:
    """The flat figure key of a per-level HTTP measure, e.g. `http_c10_calls_per_s`."""
    return f"http_c{level}_{key}"


def http_measures(levels: Sequence[int]) -> list[tuple[int | None, Measure]]:
    """(level or None, measure) for every HTTP row, in table order; keys already flat."""
    rows: list[tuple[int | None, Measure]] = [(None, Measure("http_" + m.key, m.label, m.unit, m.higher_is_better))
                                              for m in HTTP_STATIC]
    for c in levels:
        rows += [(c, Measure(http_key(c, m.key), m.label, m.unit, m.higher_is_better)) for m in HTTP_PER_LEVEL]
    return rows


def http_figures(run: HttpRun) -> tuple[dict[str, float | None], dict[str, Any]]:
    """(flat figures keyed like `http_measures`, latency summaries per level) for one target."""
    flat: dict[str, float | None] = {
        "http_startup_ms": run.startup_ms, "http_idle_rss_mb": run.idle_rss_mb, "http_peak_rss_mb": run.peak_rss_mb,
    }
    summaries: dict[str, Any] = {}
    for c, lv in run.levels.items():
        n = len(lv.latencies_ms)
        s = summarize(lv.latencies_ms)
        summaries[f"c{c}"] = {**s, "wall_s": lv.wall_s, "slice_calls_per_s": summarize(lv.slice_calls_per_s)}
        flat.update({
            http_key(c, "calls_per_s"): n / lv.wall_s if lv.wall_s else None,
            http_key(c, "p50_ms"): s.get("median"),
            http_key(c, "p95_ms"): s.get("p95"),
            http_key(c, "p99_ms"): s.get("p99"),
            http_key(c, "server_cpu_ms"): lv.server_cpu_s / n * 1000 if n else None,
            http_key(c, "client_cpu_ms"): lv.client_cpu_s / n * 1000 if n else None,
        })
    return flat, summaries
