"""The results document (JSON) and its human-readable table (markdown).

`build` gathers every figure, the raw samples, the machine (load average at start and end
included), the exact command line and the gate verdicts into one JSON-able dict: the stdio
results at the top level (`servers`, `ratios`, `config`; empty when stdio was not run), the
Streamable HTTP results under `http` (`bench.http_report`; null when not run), the per-tool
stage under `pertool` (`bench.pertool`; null when not run), the I/O-waiting, open-loop and vector
stages under `iowait`, `openloop` and `vectors` (null when not run), the toolset workloads under
`toolsets` (`bench.toolsets`; null when not run), the servers left out and why under `skipped`
(the TS SDK peer when npm cannot install it). `write` stores
it as `<out>/<UTC stamp>.json` and `<out>/latest.json`, and renders `<out>/latest.md`: per
transport one row per measure, one column per server, the ratios, the target and the verdict.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shlex
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.figures import MEASURES, server_figures
from bench.gates import GateResult, evaluate, overall, smoke
from bench.harness import Config, ServerRun
from bench.hook_stage import gates as hook_gates
from bench.hook_stage import table as hook_table
from bench.http_harness import HttpConfig, HttpRun
from bench.http_report import section, table
from bench.iowait import gates as iowait_gates
from bench.iowait import table as iowait_table
from bench.openloop_report import gates as openloop_gates
from bench.openloop_report import table as openloop_table
from bench.pertool import gates as pertool_gates
from bench.pertool import table as pertool_table
from bench.servers import http_workers
from bench.stats import ratio
from bench.toolsets import table as toolset_table
from bench.vector_stage import gates as vector_gates
from bench.vector_stage import table as vector_table

_NUMBER_LIST = re.compile(r"\[\s*([-0-9.eE+,\s]+?)\s*\]")  # raw samples: one line each, not one per number
LABELS = {"specactor": "specactor", "sdk": "SDK peer", "floor": "floor", "ts": "TS SDK"}
STDIO_RATIOS = {"specactor/floor": ("specactor", "floor"), "sdk/specactor": ("sdk", "specactor"),
                "specactor/ts": ("specactor", "ts")}
STDIO_RATIO_HEADS = ("specactor÷floor", "SDK÷specactor", "specactor÷TS SDK")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "cpu": _cpu_model(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "loadavg": list(os.getloadavg()),
    }


def _round(values: list[float], digits: int = 3) -> list[float]:
    return [round(v, digits) for v in values]


def build(runs: dict[str, ServerRun], cfg: Config, *, transport: str, started: datetime,
          duration_s: float, gates_enforced: bool, argv: list[str],
          http_runs: dict[str, HttpRun] | None = None, http_cfg: HttpConfig | None = None,
          loadavg_start: list[float] | None = None, toolsets: dict[str, Any] | None = None,
          pertool: dict[str, Any] | None = None, iowait: dict[str, Any] | None = None,
          openloop: dict[str, Any] | None = None, vectors: dict[str, Any] | None = None,
          hooks: dict[str, Any] | None = None, skipped: dict[str, str] | None = None,
          quick: bool = False) -> dict[str, Any]:
    servers: dict[str, Any] = {}
    figs: dict[str, dict[str, float | None]] = {}
    for key, run in runs.items():
        flat, summaries = server_figures(run)
        figs[key] = flat
        info = run.server_info.get("serverInfo", {})
        servers[key] = {
            "label": run.spec.label,
            "argv": list(run.spec.argv),
            "server_info": info,
            "exit_codes": run.exit_codes,
            "figures": flat,
            "summaries": summaries,
            "samples": {
                "first_reply_ms": _round(run.first_reply_ms, 2),
                "single_ms": _round(run.single_ms),
                "burst_ms": _round(run.burst_ms),
                "burst_calls_per_s": _round(run.burst_tput, 1),
            },
        }
    ratios = {
        m.key: {name: ratio(figs.get(a, {}).get(m.key), figs.get(b, {}).get(m.key))
                for name, (a, b) in STDIO_RATIOS.items()}
        for m in MEASURES
    }
    http = section(http_runs, http_cfg or HttpConfig()) if http_runs is not None else None
    gates = evaluate(figs, http["figures"] if http is not None else None, toolsets, quick=quick,
                     workers=http_workers())
    gates += pertool_gates(pertool) if pertool else []
    gates += iowait_gates(iowait) if iowait and not iowait.get("error") else []
    gates += openloop_gates(openloop) if openloop and not openloop.get("error") else []
    gates += vector_gates(vectors) if vectors and not vectors.get("error") else []
    gates += hook_gates(hooks) if hooks and not hooks.get("error") else []
    if quick:
        gates = smoke(gates)
    return {
        "schema": 2,
        "timestamp": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "duration_s": round(duration_s, 1),
        "command": shlex.join([sys.executable, "-m", "bench", *argv]),
        "cwd": os.getcwd(),
        "machine": {**machine(), "loadavg_start": loadavg_start},
        "transport": transport,
        "config": asdict(cfg),
        "units": {m.key: m.unit for m in MEASURES},
        "servers": servers,
        "ratios": ratios,
        "http": http,
        "toolsets": toolsets,
        "pertool": pertool,
        "iowait": iowait,
        "openloop": openloop,
        "vectors": vectors,
        "hooks": hooks,
        "skipped": skipped or {},
        "gates": [g.as_dict() for g in gates],
        "gates_enforced": gates_enforced,
        "verdict": overall(gates),
    }


def _num(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def markdown(doc: dict[str, Any]) -> str:
    gates = [GateResult(**{**g, "measures": tuple(g["measures"])}) for g in doc["gates"]]
    mach = doc["machine"]
    load = " / ".join(f"{v:.2f}" for v in mach["loadavg"])
    start = mach.get("loadavg_start")
    lines = [
        f"# specactor bench — {doc['timestamp']} — **{doc['verdict']}**",
        "",
        f"`{doc['command']}` · transport {doc['transport']} · {mach['nproc']} CPUs ({mach['cpu']}) · "
        f"Python {mach['python']} · {doc['duration_s']} s · load average (1/5/15 min) "
        + (f"at start {' / '.join(f'{v:.2f}' for v in start)}, " if start else "") + f"at end {load}",
    ]
    for reason in sorted(set((doc.get("skipped") or {}).values())):
        keys = ", ".join(k for k, v in doc["skipped"].items() if v == reason)
        lines += ["", f"**Left out** ({keys}): TS SDK peer SKIPPED — {reason}"]
    if doc["servers"]:
        lines += ["", "## stdio", "", *_stdio_table(doc, gates)]
    if doc.get("http"):
        lines += ["", *table(doc["http"], gates, _num, _ratio)]
    if doc.get("pertool"):
        lines += ["", *pertool_table(doc["pertool"], _num)]
    for key, render in (("iowait", iowait_table), ("openloop", openloop_table), ("vectors", vector_table),
                        ("hooks", hook_table)):
        stage = doc.get(key)
        if stage and stage.get("error"):
            lines += ["", f"## {key}: the stage broke", "", f"**Harness error**: {stage['error']}"]
        elif stage:
            lines += ["", *render(stage, _num)]
    if doc.get("toolsets"):
        lines += ["", *toolset_table(doc["toolsets"], gates, _num)]
    lines += ["", "## Gates", ""]
    for g in gates:
        lines.append(f"- **{g.verdict.upper()}** {g.name} — target {g.target}; {g.detail}")
    if not doc["gates_enforced"]:
        lines += ["", "_Gates reported but not enforced (`--no-gates`)._"]
    return "\n".join(lines) + "\n"


def _stdio_table(doc: dict[str, Any], gates: list[GateResult]) -> list[str]:
    servers = doc["servers"]
    keys = [k for k in LABELS if k in servers]
    head = ["measure", *(LABELS[k] for k in keys), *STDIO_RATIO_HEADS, "target", "verdict"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(head) - 3) + ["---", "---"]) + "|",
    ]
    for m in MEASURES:
        row = [f"{m.label} ({m.unit})"]
        row += [_num(servers[k]["figures"].get(m.key)) for k in keys]
        r = doc["ratios"][m.key]
        row += [_ratio(r.get(name)) for name in STDIO_RATIOS]
        judged = [g for g in gates if m.key in g.measures]
        row.append("; ".join(g.target for g in judged))
        row.append("; ".join(f"**{g.verdict.upper()}**" if g.verdict == "fail" else g.verdict.upper()
                             for g in judged))
        lines.append("| " + " | ".join(row) + " |")
    cfg = doc["config"]
    lines += [
        "",
        f"Samples: {cfg['samples']} sequential calls and {cfg['rounds']} burst rounds of {cfg['burst']} per "
        f"server, {cfg['spawns']} spawns for first reply, {cfg['warmup']} warm-up calls. "
        "Latencies are client-side (request written → reply read), in ms; MB = 10⁶ bytes. "
        "Ratios > 1 in the SDK÷specactor column mean specactor is smaller/faster, except for the "
        "calls/s rows, where < 1 does; specactor÷TS SDK below 1 means specactor is smaller/faster, except for "
        "the calls/s rows, where above 1 does. Verdicts MET / MISSED (SMOKE with --quick) are reported targets, "
        "not gates. "
        "See bench/README.md.",
    ]
    waiting = servers.get("specactor", {}).get("figures", {}).get("waiting_median_ms")
    floor = servers.get("floor", {}).get("figures", {}).get("single_median_ms")
    if waiting is not None and floor:
        lines += ["", f"`echo` cannot wait, so specactor answers it in the transport's task; a tool that awaits "
                  f"gets a task, a cancel scope and a concurrency slot: its median is {_num(waiting)} ms, "
                  f"{waiting / floor:.2f}x the floor's echo (which spawns a task per request)."]
    return lines


def write(doc: dict[str, Any], out: Path, started: datetime) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)
    text = _NUMBER_LIST.sub(lambda m: "[" + re.sub(r"\s+", "", m.group(1)) + "]", text) + "\n"
    stamped = out / f"{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    stamped.write_text(text)
    (out / "latest.json").write_text(text)
    (out / "latest.md").write_text(markdown(doc))
    return stamped


def utc_now() -> datetime:
    return datetime.now(UTC)
