"""The Streamable HTTP part of the results: its JSON section and its markdown table.

`section` turns the `HttpRun`s into the document's `"http"` entry: per target its label,
server, era, exit code, flat figures (`figures.http_measures`), latency summaries per
concurrency and, for plotting, `cdf_ms`: up to `CDF_POINTS` order statistics of each level's
latencies at evenly spaced ranks (min and max included; every sample when there are fewer),
so the stored JSON stays small however many requests were made. `table` renders the section
as markdown rows: one per measure (per concurrency), a column per target, seven ratios
(specactor÷floor, SDK÷specactor in each era, specactor÷TS SDK with sessions and stateless), the
target and verdict of the gates and reported targets that judge it. Two more ratios judge specactor
against its own floor: one worker (`--workers 1`) ÷ the floor, and the default deployment ÷ one
worker in the 2026-07-28 era.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bench.figures import http_figures, http_measures
from bench.gates import GateResult
from bench.http_harness import TARGETS, HttpConfig, HttpRun
from bench.servers import http_workers
from bench.stats import ratio

CDF_POINTS = 1000
CLIENT = ("raw HTTP/1.1 over non-blocking sockets, one epoll loop (bench/http_driver.py); "
          "each worker its own keep-alive connection and session")
RATIOS = {"specactor/floor": ("specactor", "floor"), "sdk/specactor": ("sdk", "specactor"),
          "sdk/specactor 2026": ("sdk-2026", "specactor-2026"), "specactor/ts": ("specactor", "ts"),
          "specactor/ts-stateless": ("specactor", "ts-stateless"), "1w/floor": ("specactor-1w", "floor"),
          "workers/1w 2026": ("specactor-2026", "specactor-1w-2026")}
RATIO_HEADS = ("specactor÷floor", "SDK÷specactor", "SDK÷specactor (2026)", "specactor÷TS sessions",
               "specactor÷TS stateless", "1 worker÷floor", "default÷1 worker (2026)")


def _cdf(values: list[float]) -> list[float]:
    ordered = sorted(values)
    n = len(ordered)
    if n <= CDF_POINTS:
        return [round(v, 3) for v in ordered]
    return [round(ordered[round(i * (n - 1) / (CDF_POINTS - 1))], 3) for i in range(CDF_POINTS)]


def section(runs: dict[str, HttpRun], cfg: HttpConfig) -> dict[str, Any]:
    targets: dict[str, Any] = {}
    figs: dict[str, dict[str, float | None]] = {}
    for key, run in runs.items():
        flat, summaries = http_figures(run)
        figs[key] = flat
        targets[key] = {
            "label": run.target.label,
            "server": run.target.server,
            "era": run.target.era.name,
            "exit_code": run.exit_code,
            "server_info": run.server_info.get("serverInfo", {}),
            "figures": flat,
            "summaries": summaries,
            "samples": {f"c{c}": {"cdf_ms": _cdf(lv.latencies_ms),
                                  "slice_calls_per_s": [round(v, 1) for v in lv.slice_calls_per_s]}
                        for c, lv in run.levels.items()},
        }
    ratios = {
        m.key: {name: ratio(figs.get(a, {}).get(m.key), figs.get(b, {}).get(m.key)) for name, (a, b) in RATIOS.items()}
        for _, m in http_measures(cfg.levels)
    }
    return {"config": asdict(cfg), "levels": list(cfg.levels), "client": CLIENT, "workers": http_workers(),
            "targets": targets,
            "figures": figs, "ratios": ratios}


def table(http: dict[str, Any], gates: list[GateResult], num: Any, fmt_ratio: Any) -> list[str]:
    """The markdown lines of the HTTP table (num/fmt_ratio: the stdio table's number formats)."""
    targets = http["targets"]
    keys = [t.key for t in TARGETS if t.key in targets]
    head = ["measure", "c", *(targets[k]["label"] for k in keys), *RATIO_HEADS, "target", "verdict"]
    cfg = http["config"]
    lines = [
        "## Streamable HTTP: `tools/call` echo, closed loop",
        "",
        f"c workers, each with its own keep-alive connection (and, in the 2025-11-25 era, its own session), "
        f"send requests back to back; {cfg['rounds']} x {cfg['slice_s']:g} s per target and concurrency, "
        f"targets taking turns. Client: {http['client']}. specactor serves in its default deployment "
        f"(`--workers` = the cores, {http.get('workers', '?')} here); specactor 1 worker: `--workers 1`.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---", "---:"] + ["---:"] * (len(keys) + len(RATIO_HEADS)) + ["---", "---"]) + "|",
    ]
    for level, m in http_measures(http["levels"]):
        row = [f"{m.label} ({m.unit})", "" if level is None else str(level)]
        row += [num(targets[k]["figures"].get(m.key)) for k in keys]
        row += [fmt_ratio(http["ratios"][m.key].get(name)) for name in RATIOS]
        judged = [g for g in gates if m.key in g.measures]
        row.append("; ".join(g.target for g in judged))
        row.append("; ".join(f"**{g.verdict.upper()}**" if g.verdict == "fail" else g.verdict.upper()
                             for g in judged))
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "Startup and RSS are per server (one server serves both eras). Server CPU and RSS are summed over "
        "the server's process tree (specactor's HTTP workers included). CPU per call: server "
        "utime+stime (/proc, 10 ms ticks) and the client's `process_time`, over the measured loops. "
        "SDK÷specactor above 1 means specactor is faster/smaller, except for throughput, where below 1 does; "
        "specactor÷TS below 1 means specactor is faster/smaller, except for throughput, where above 1 does "
        "(specactor in the 2025-11-25 era with sessions, its default deployment, against each TS SDK process).",
    ]
    return lines
