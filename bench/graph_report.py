"""The graph-sync part of the I/O-waiting stage, judged and shown: its gates and its markdown.

`gates(section)` and `table(section, num)` read what `bench.graphsync.run` returns (or a section
with `error` when the part broke: both gates fail, naming it). Pure functions of the section, so
tests feed them synthetic figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from bench.gates import GRAPH_INITIAL_S, GRAPH_LEVEL, GRAPH_RATIO, GateResult

BURST = 100  # bench.graphsync.BURST: the "c100" keys


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def gates(section: dict[str, Any]) -> list[GateResult]:
    """The writes' P95 level against graph sync off (a gate), and their P95 under concurrency (a reported
    target: MET / MISSED), per tool, the worst named; the initial sync and the outage are reported. Quick: smoke.

    The c=100 ÷ c=1 ratio is reported, not gated (issue 15: "A CPU-bound closed burst cannot meet a 1.5x
    ratio on two cores: 100 requests queue behind each other. Report that ratio next to the CPU bound ... and
    do not gate on it"): a workspace's writes are serial, so a burst of 100 queues behind itself with graph
    sync off as much as on. Whether the graph makes writes wait is the level gate's question.
    """
    smoke = bool(section.get("quick"))
    ratio_target = (f"writes' P95 at c={BURST} ≤ {GRAPH_RATIO:g} x P95 at c=1, graph sync on (reported, not gated: "
                    "a closed burst of serial writes)")
    level_target = (f"writes' P95 with graph sync on ≤ {GRAPH_LEVEL:g} x off, at c=1 and at c={BURST} "
                    "(geometric mean over the tools)")
    if section.get("error"):
        return [GateResult(name, target, "fail", f"harness error: {section['error'][:300]}", ())
                for name, target in (("I/O wait hidden: graph sync", ratio_target),
                                     ("graph sync level: writes on vs off", level_target))]
    ops = section["writes"]["ops"]

    def verdict(ok: bool) -> str:
        return "smoke" if smoke else "pass" if ok else "fail"

    def reported(ok: bool) -> str:
        return "smoke" if smoke else "met" if ok else "missed"

    ratios = {name: op["on"]["ratio_p95"] for name, op in ops.items()}
    worst = max(ratios, key=lambda n: ratios[n])
    over = [n for n, r in ratios.items() if r > GRAPH_RATIO]
    on, off = ops[worst]["on"], ops[worst]["off"]
    bound = 0.95 * BURST * on["server_cpu_ms_per_call"]["c100"]  # 95 calls' CPU before the 95th reply
    out = [GateResult("I/O wait hidden: graph sync", ratio_target, reported(not over),
                      f"worst {worst}: c={BURST} p95 {on['c100']['p95_ms']:.1f} ms = {on['ratio_p95']:.1f} x c=1 "
                      f"p95 {on['c1']['p95_ms']:.1f} ms (graph sync off: {off['ratio_p95']:.1f} x); its CPU bound "
                      f"{bound:.1f} ms"
                      + (f"; over: {', '.join(over)}" if over else ""),
                      tuple(f"iowait:graph:{n}:on:c{c}:p95" for n in ops for c in (1, BURST)))]
    levels = {c: geomean([op["level_p95"][f"c{c}"] for op in ops.values()]) for c in (1, BURST)}
    each = {f"{n} c={c}": op["level_p95"][f"c{c}"] for n, op in ops.items() for c in (1, BURST)}
    worst = max(each, key=lambda k: each[k])
    over = [f"c={c}" for c, v in levels.items() if v > GRAPH_LEVEL]
    out.append(GateResult("graph sync level: writes on vs off", level_target, verdict(not over),
                          "geometric mean over " + ", ".join(ops) + ": "
                          + ", ".join(f"c={c} {v:.2f} x" for c, v in levels.items())
                          + f"; worst tool {worst} {each[worst]:.2f} x"
                          + (f"; over at {', '.join(over)}" if over else ""),
                          tuple(f"iowait:graph:{n}:{side}:c{c}:p95" for n in ops for side in ("on", "off")
                                for c in (1, BURST))))
    return out


def table(section: dict[str, Any], num: Callable[[float | None], str]) -> list[str]:
    """The markdown: writes on and off, then the initial syncs, then the outage."""
    if section.get("error"):
        return ["### Graph sync", "", f"**Harness error**: {section['error']}"]
    burst, w, code = section["burst"], section["writes"], section.get("code") or {}
    ops = w["ops"]
    levels = {c: geomean([op["level_p95"][f"c{c}"] for op in ops.values()]) for c in (1, burst)}
    lines = ["### Graph sync", "",
             f"An Emergent double (`python -m specactor.testing.emergent`) answers every request after "
             f"{section['latency_ms']:g} ms. Writes on AirsSpec {w['airs_specs']:,} specs + OpenSpec {w['specs']} "
             f"specs and {w['changes']} changes, two servers side by side, graph sync off and on (stdio; c={burst}: "
             f"{burst} requests written at once; the outbox drained before each burst, untimed). CPU/call: server CPU "
             "from the first call to the drained outbox, the graph sync's share included; requests and double CPU: "
             "during that tool's measurement. specactor " + (code.get("commit") or "?")
             + (f" with {len(code['changed'])} files of specactor/ changed" if code.get("changed") else "")
             + (" (quick: smoke sizes)" if section.get("quick") else ""), "",
             "| write tool | c | n | p95 off (ms) | p95 on (ms) | on ÷ off | p95 ÷ c=1 off / on | target | "
             "CPU/call off / on (ms) | drain after (s) | requests | double CPU (s) |",
             "|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|"]
    for name, op in ops.items():
        on, off = op["on"], op["off"]
        for c in (1, burst):
            key = f"c{c}"
            drain = on["drain_s"]["after_c1"] if c == 1 else on["drain_s"]["after_burst_median"]
            ratio = f"{num(off['ratio_p95'])}x / {num(on['ratio_p95'])}x" if c != 1 else ""
            target = f"level ≤ {GRAPH_LEVEL:g}x" + (f"; on ≤ {GRAPH_RATIO:g}x c=1 (reported)" if c != 1 else "")
            cpu = f"{num(off['server_cpu_ms_per_call'][key])} / {num(on['server_cpu_ms_per_call'][key])}"
            lines.append(f"| {name} | {c} | {on[key]['n']} | {num(off[key]['p95_ms'])} | {num(on[key]['p95_ms'])} | "
                         f"{num(op['level_p95'][key])}x | {ratio} | {target} | {cpu} | {num(drain)} | "
                         + (f"{on['requests']:,} | {num(on['double_cpu_s'])} |" if c == 1 else " | |"))
    first, again = section["initial"], w["initial_sync"]
    met = "met" if first["seconds_from_spawn"] < GRAPH_INITIAL_S else "MISSED"
    lines += ["", "Level: P95 on ÷ off, geometric mean over the tools: " + ", ".join(
                  f"c={c} {num(v)}x" for c, v in levels.items()) + f" (target ≤ {GRAPH_LEVEL:g}x at each). "
              f"`graph_sync` with nothing to send (it reconciles every unit): {num(w['graph_sync_idle_s'])} s.",
              "", "| initial sync | objects | relationships | requests | time (s) | target | server / double CPU (s) |",
              "|---|---:|---:|---:|---:|---|---|",
              f"| OpenSpec {first['specs']} specs + {first['changes']} changes, spawn → outbox empty, all synced | "
              f"{first['objects']:,} | {first['relationships']:,} | {first['requests']:,} | "
              f"{num(first['seconds_from_spawn'])} ({num(first['seconds_from_initialize'])} from `initialize`) | "
              f"< {GRAPH_INITIAL_S:g} s: {met} | {num(first['server_cpu_s'])} / {num(first['double_cpu_s'])} |",
              f"| the writes' workspace, `initialize` → all synced | {again['objects']:,} | "
              f"{again['relationships']:,} | | {num(again['seconds_from_initialize'])} | | |"]
    d = section["outage"]
    lat = d["write_latency"]
    lines += ["", f"Outage: Emergent down {d['outage_s']:g} s while task_complete and spec_create write "
              f"{d['rate_per_s']:g}/s, then back up; default backoff (`graph.retry_max_seconds` 30 s, long-outage "
              "threshold 20 failures). Catch-up = back up → outbox empty: the wait for the drain's next try, then "
              "the drain.", "",
              "| writes | backlog at recovery | failed rounds | wait for the next try (s) | drain (s) | catch-up (s) | "
              "requests | server / double CPU (s) | writes during the outage p50 / p95 (ms) |",
              "|---:|---:|---:|---:|---:|---:|---:|---|---|",
              f"| {d['writes']} | {d['backlog_at_recovery']:,} | {d['failures_at_recovery']} | "
              f"{num(d['wait_for_retry_s'])} | {num(d['drain_s'])} | {num(d['catch_up_s'])} | {d['requests']:,} | "
              f"{num(d['server_cpu_s'])} / {num(d['double_cpu_s'])} | {num(lat['p50_ms'])} / {num(lat['p95_ms'])} |"]
    return lines
