"""Order statistics for latency samples: linear-interpolated percentiles and a fixed summary.

Every figure is in the unit of the input (the harness passes milliseconds). Percentiles use
the same definition as numpy's default ("linear"): p-th percentile of n sorted values sits at
rank p/100 * (n - 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import fmean


def percentile(sorted_values: Sequence[float], p: float) -> float:
    if not sorted_values:
        return math.nan
    rank = p / 100 * (len(sorted_values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def summarize(values: Sequence[float]) -> dict[str, float]:
    """n, min, mean, median (p50), p95, p99 and max of `values`."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    return {
        "n": len(ordered),
        "min": ordered[0],
        "mean": fmean(ordered),
        "median": percentile(ordered, 50),
        "p95": percentile(ordered, 95),
        "p99": percentile(ordered, 99),
        "max": ordered[-1],
    }


def median(values: Sequence[float]) -> float:
    return percentile(sorted(values), 50)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0 or math.isnan(denominator):
        return None
    return numerator / denominator
