"""The vector stage: semantic memory_search scoring at array speed (issue 15), judged and tabled.

    python -m bench.vector_stage [--quick] [--json F]

Runs `bench.vectors.run` (the store's own `memory_db.search` on a reader connection, no server:
see that module) and judges its three figures against the issue's targets (`VECTOR_*` in
bench/gates.py):

- `small_cpu_ms`: mean CPU ms of a semantic search at 2,000 memories x 256 dimensions (threshold
  0.7, the tool's default) ≤ 1 ms;
- `large_p95_ms`: wall-clock P95 of a semantic search at 100,000 x 384 < 20 ms;
- `max_abs_diff`: the largest |numpy score - pure-Python score| over the compared searches ≤ 1e-6.

`--quick` (the CI smoke) measures a smaller large size and fewer searches; its verdicts are smoke.
Without numpy the stage is skipped, and says why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import stagecli
from bench.gates import VECTOR_DIFF, VECTOR_LARGE, VECTOR_LARGE_P95_MS, VECTOR_SMALL, VECTOR_SMALL_CPU_MS, GateResult


@dataclass(frozen=True)
class Plan:
    small: tuple[int, int]  # memories x dimensions
    large: tuple[int, int]
    samples: int  # searches per measured row


QUICK = Plan(VECTOR_SMALL, (10_000, 384), 40)
FULL = Plan(VECTOR_SMALL, VECTOR_LARGE, 200)


def _size(pair: tuple[int, int]) -> str:
    return f"{pair[0]}x{pair[1]}"


def run(quick: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    """The `vectors` section: `bench.vectors.run`'s figures under "figures", or "skipped" without numpy."""
    plan = QUICK if quick else FULL
    try:
        import numpy  # noqa: F401

        from bench import vectors
    except ImportError as err:
        progress(f"vectors: SKIPPED — {err}")
        return {"quick": quick, "skipped": f"numpy is not installed ({err})"}
    progress(f"vectors: {_size(plan.small)} and {_size(plan.large)}, {plan.samples} searches each")
    started = time.monotonic()
    figures = vectors.run(plan.small, plan.large, plan.samples)
    return {"quick": quick, "small": _size(plan.small), "large": _size(plan.large),
            "samples": plan.samples, "duration_s": round(time.monotonic() - started, 1), "figures": figures}


def judge(value: float | None, ok: Callable[[float], bool], *, smoke: bool) -> str:
    """One vector target's verdict: skip unmeasured, smoke below the issue's sizes, else pass / fail."""
    if value is None:
        return "skip"
    return "smoke" if smoke else "pass" if ok(value) else "fail"


def gates(section: dict[str, Any]) -> list[GateResult]:
    figs = section.get("figures") or {}
    quick = bool(section.get("quick"))
    small_cpu, large_p95, diff = figs.get("small_cpu_ms"), figs.get("large_p95_ms"), figs.get("max_abs_diff")
    small_real = section.get("small") == _size(VECTOR_SMALL)
    large_real = section.get("large") == _size(VECTOR_LARGE)
    why = "not measured" if section.get("skipped") is None else f"skipped: {section['skipped']}"

    def detail(value: float | None, text: str, real: bool) -> str:
        if value is None:
            return why
        return text if real and not quick else f"smoke (quick, {section.get('small')} / {section.get('large')}): {text}"

    return [
        GateResult(f"vectors: semantic memory_search CPU at {_size(VECTOR_SMALL)}",
                   f"≤ {VECTOR_SMALL_CPU_MS:g} ms of CPU a search (mean, threshold 0.7)",
                   judge(small_cpu, lambda v: v <= VECTOR_SMALL_CPU_MS, smoke=quick or not small_real),
                   detail(small_cpu, f"{small_cpu:.3f} ms" if small_cpu is not None else "", small_real),
                   ("vectors:small_cpu_ms",)),
        GateResult(f"vectors: semantic memory_search P95 at {_size(VECTOR_LARGE)}",
                   f"p95 < {VECTOR_LARGE_P95_MS:g} ms (wall clock, threshold 0.7)",
                   judge(large_p95, lambda v: v < VECTOR_LARGE_P95_MS, smoke=quick or not large_real),
                   detail(large_p95, f"{large_p95:.2f} ms at {section.get('large')}" if large_p95 is not None
                          else "", large_real), ("vectors:large_p95_ms",)),
        GateResult("vectors: scores equal the pure-Python path's",
                   f"max |numpy score - Python score| ≤ {VECTOR_DIFF:g}",
                   judge(diff, lambda v: v <= VECTOR_DIFF, smoke=quick),
                   detail(diff, f"{diff:.2e}" if diff is not None else "", True), ("vectors:max_abs_diff",)),
    ]


def table(section: dict[str, Any], num: Callable[[float | None], str]) -> list[str]:
    lines = ["## Semantic search: vectors scored with numpy (`bench.vectors`)", ""]
    if section.get("skipped"):
        return [*lines, f"Skipped: {section['skipped']}."]
    f = section["figures"]
    lines += [f"The store's `memory_db.search` on a reader connection, no server; random unit vectors in one scope, "
              f"queries are noisy copies (best cosine ~0.85); {section['samples']} searches per row"
              + (" (quick: smoke sizes)" if section.get("quick") else "") + f"; {section['duration_s']} s.", "",
              "| size | path | threshold | CPU mean (ms) | CPU median (ms) | wall P50 (ms) | wall P95 (ms) | "
              "first search (ms) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    rows = [("small", "numpy", "0.7", "small_numpy_t0.7"), ("small", "numpy", "0", "small_numpy_t0.0"),
            ("small", "Python", "0.7", "small_python_t0.7"), ("small", "Python", "0", "small_python_t0.0"),
            ("small", "numpy, hybrid", "0.7", "small_hybrid_numpy_t0.7"),
            ("small", "Python, hybrid", "0.7", "small_hybrid_python_t0.7"),
            ("large", "numpy", "0.7", "large_numpy_t0.7"), ("large", "numpy", "0", "large_numpy_t0.0"),
            ("large", "Python", "0.7", "large_python_t0.7")]
    for which, path, threshold, key in rows:
        m = f.get(key)
        if m:
            lines.append(f"| {section[which]} | {path} | {threshold} | {num(m['cpu_ms_mean'])} | "
                         f"{num(m['cpu_ms_median'])} | {num(m['wall_ms_p50'])} | {num(m['wall_ms_p95'])} | "
                         f"{num(m['first_ms'])} |")
    after = f.get("large_after_write") or {}
    add_ms = num(after.get("search_after_add_ms_median"))
    delete_ms = num(after.get("search_after_delete_ms_median"))
    lines += ["", f"At {section['large']}: a search right after a memory_add {add_ms} ms (median), right after a "
              f"memory_delete {delete_ms} ms (the "
              f"scope's matrix is loaded again); filling the store took {num(f.get('large_fill_s'))} s. Largest score "
              f"difference numpy vs Python: {f.get('max_abs_diff', float('nan')):.2e} "
              f"(small {f.get('small_max_abs_diff', float('nan')):.2e}, large "
              f"{f.get('large_max_abs_diff', float('nan')):.2e})."]
    return lines


def main(argv: list[str] | None = None) -> int:
    return stagecli.main(argv, prog="python -m bench.vector_stage", doc=__doc__,
                         quick_help=f"large size {_size(QUICK.large)}, {QUICK.samples} searches; smoke verdicts",
                         run=run, gates=gates, table=table)


if __name__ == "__main__":
    raise SystemExit(main())
