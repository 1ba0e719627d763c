"""The open-loop stage's gates and markdown table (`bench/openloop.py` measures).

`gates`: the 5 calls/s run against the default deployment: P95 of the 100 clients ≤
`OPEN_LOOP_RATIO` x one client's at that pace, and every P95 < `OPEN_LOOP_P95_MS` ("smoke" with
`--quick`). `table`: the gate and stress runs, the per-operation P95s, and the knee per deployment
(reported, never judged).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.gates import OPEN_LOOP_P95_MS, OPEN_LOOP_RATIO, GateResult


def gates(section: dict[str, Any]) -> list[GateResult]:
    name_ratio, name_p95 = "open loop P95 vs one client", "open loop P95"
    if "gate" not in section:
        return [GateResult(name_ratio, f"≤ {OPEN_LOOP_RATIO:g} x", "skip", "not measured", ()),
                GateResult(name_p95, f"every p95 < {OPEN_LOOP_P95_MS:g} ms", "skip", "not measured", ())]
    smoke = bool(section.get("quick"))
    run = section["gate"]
    one, many, ratio = run["single"], run["open"], run["ratio_p95"]
    keys = ("openloop:gate:single:p95", "openloop:gate:open:p95")
    worst = max(one["p95_ms"], many["p95_ms"])
    pace = f"{run['rate_per_client']:g} calls/s each ({run['offered_per_s']:,.0f} calls/s offered)"
    deployment = f"default deployment, {section.get('workers', '?')} workers"
    return [
        GateResult(name_ratio,
                   f"P95 of {section['clients']} clients ≤ {OPEN_LOOP_RATIO:g} x one client's at the same pace, "
                   f"{pace}, {deployment}",
                   "smoke" if smoke else "pass" if ratio <= OPEN_LOOP_RATIO else "fail",
                   f"{section['clients']} clients p95 {many['p95_ms']:.1f} ms = {ratio:.2f} x one client's "
                   f"{one['p95_ms']:.1f} ms; achieved {many['achieved_per_s']:.0f}/s of {many['offered_per_s']:.0f}/s",
                   keys),
        GateResult(name_p95, f"every p95 < {OPEN_LOOP_P95_MS:g} ms, {pace}, {deployment}",
                   "smoke" if smoke else "pass" if worst < OPEN_LOOP_P95_MS else "fail",
                   f"one client {one['p95_ms']:.1f} ms, {section['clients']} clients {many['p95_ms']:.1f} ms", keys),
    ]


def _knee_text(entry: dict[str, Any], num: Callable[[float | None], str]) -> str:
    """The knee in words: a rate, a bound (≥ the highest tried, below the lowest), or where the budget left it."""
    knee_at, fail_at, closed = entry["knee_per_s"], entry["first_fail_per_s"], entry["closed"]
    if knee_at is None and fail_at is None:
        return "not probed (no time in the budget)"
    if knee_at is None:
        return f"below {num(fail_at)}/s" + (" (the lowest rate tried)" if closed else ", budget spent")
    if fail_at is None:
        return f"≥ {num(knee_at)}/s" + (" (the highest rate tried)" if closed else ", budget spent")
    return f"{num(knee_at)}/s (fails at {num(fail_at)}/s)" + ("" if closed else ", budget spent")


def table(section: dict[str, Any], num: Callable[[float | None], str]) -> list[str]:
    sizes = section["sizes"]
    lines = [f"## Open loop (Streamable HTTP): {section['clients']} clients against one at the same pace", "",
             f"2025-11-25 sessions, each client one keep-alive connection, requests due on a fixed schedule, latency "
             f"from the due time; mix: {', '.join(section['mix'])}. Workspace: {sizes['airsspec_specs']} AirsSpec "
             f"specs, {sizes['openspec_specs']} OpenSpec specs + {sizes['openspec_changes']} changes, "
             f"{sizes['memories']:,} memories" + (" (quick: smoke sizes)" if section.get("quick") else "")
             + f". specactor in its default deployment ({section['workers']} workers) unless said. CPU demand = "
             "offered calls/s x server CPU per call (summed over the workers), in cores: this machine has "
             f"{section['workers']}.", "",
             "| run | clients | n | offered (calls/s) | achieved (calls/s) | p50 (ms) | p95 (ms) | p99 (ms) | "
             "p95 ÷ one client | target | sent > 1 ms late | server CPU/call (ms) | CPU demand (cores) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for run_key, title in (("gate", "gate"), ("stress", "stress (reported)")):
        run = section[run_key]
        for key in ("single", "open"):
            lv = run[key]
            ratio = num(run["ratio_p95"]) + "x" if key == "open" else ""
            target = "" if run_key == "stress" else (f"≤ {OPEN_LOOP_RATIO:g}x; p95 < {OPEN_LOOP_P95_MS:g} ms"
                                                     if key == "open" else f"p95 < {OPEN_LOOP_P95_MS:g} ms")
            lines.append(f"| {title}, {run['rate_per_client']:g}/s each | {lv['clients']} | {lv['n']:,} | "
                         f"{num(lv['offered_per_s'])} | {num(lv['achieved_per_s'])} | {num(lv['p50_ms'])} | "
                         f"{num(lv['p95_ms'])} | {num(lv['p99_ms'])} | {ratio} | {target} | {lv['late_sends']:,} | "
                         f"{num(lv['server_cpu_ms_per_call'])} | "
                         f"{num(lv['offered_per_s'] * lv['server_cpu_ms_per_call'] / 1000)} |")
    gate = section["gate"]
    lines += ["", "| operation | p50, 1 client (ms) | p95, 1 client (ms) | p50, 100 clients (ms) | "
                  "p95, 100 clients (ms) |", "|---|---:|---:|---:|---:|"]
    for name in section["mix"]:
        a, b = gate["single"]["per_op"].get(name), gate["open"]["per_op"].get(name)
        if a and b:
            lines.append(f"| {name} | {num(a['p50_ms'])} | {num(a['p95_ms'])} | {num(b['p50_ms'])} | "
                         f"{num(b['p95_ms'])} |")
    grid = ", ".join(num(r) for r in next(iter(section["knee"].values()))["rates_per_s"])
    lines += ["", "**Knee** (reported): the highest offered rate at which both targets hold (p95 of "
              f"{section['clients']} clients < {OPEN_LOOP_P95_MS:g} ms and ≤ {OPEN_LOOP_RATIO:g} x one client's at "
              f"the same pace), bisection over {grid} "
              "calls/s offered (bench/knee.py), the runs above counted as probes.", "",
              "| workers | knee (offered calls/s) | offered (calls/s) | p95, 1 client (ms) | p95, 100 clients (ms) | "
              "ratio | achieved (calls/s) | server CPU/call (ms) | holds | from | search time (s) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    for workers, entry in section["knee"].items():
        for k, row in enumerate(entry["probes"]):
            head = (f"{workers} | {_knee_text(entry, num)}" if k == 0 else " | ")
            lines.append(f"| {head} | {num(row['offered_per_s'])} | {num(row['single_p95_ms'])} | "
                         f"{num(row['open_p95_ms'])} | {num(row['ratio_p95'])}x | {num(row['achieved_per_s'])} | "
                         f"{num(row['server_cpu_ms_per_call'])} | {'yes' if row['holds'] else 'no'} | {row['from']} | "
                         + (f"{entry['spent_s']} of {entry['budget_s']:g} |" if k == 0 else " |"))
    return lines
