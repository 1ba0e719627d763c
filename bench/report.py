"""The results document (JSON) and its human-readable table (markdown).

`build` gathers every figure, the raw samples, the machine, the exact command line and the
gate verdicts into one JSON-able dict; `write` stores it as `<out>/<UTC stamp>.json` and
`<out>/latest.json`, and renders `<out>/latest.md`: one row per measure, one column per
server, the two ratios (specactor÷floor, SDK÷specactor), the target and the verdict.
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
from bench.gates import GateResult, evaluate, overall
from bench.harness import Config, ServerRun
from bench.stats import ratio

_NUMBER_LIST = re.compile(r"\[\s*([-0-9.eE+,\s]+?)\s*\]")  # raw samples: one line each, not one per number
LABELS = {"specactor": "specactor", "sdk": "SDK peer", "floor": "floor"}


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
          duration_s: float, gates_enforced: bool, argv: list[str]) -> dict[str, Any]:
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
        m.key: {
            "specactor/floor": ratio(figs.get("specactor", {}).get(m.key), figs.get("floor", {}).get(m.key)),
            "sdk/specactor": ratio(figs.get("sdk", {}).get(m.key), figs.get("specactor", {}).get(m.key)),
        }
        for m in MEASURES
    }
    gates = evaluate(figs)
    return {
        "schema": 1,
        "timestamp": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "duration_s": round(duration_s, 1),
        "command": shlex.join([sys.executable, "-m", "bench", *argv]),
        "cwd": os.getcwd(),
        "machine": machine(),
        "transport": transport,
        "config": asdict(cfg),
        "units": {m.key: m.unit for m in MEASURES},
        "servers": servers,
        "ratios": ratios,
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
    servers = doc["servers"]
    keys = [k for k in ("specactor", "sdk", "floor") if k in servers]
    head = ["measure", *(LABELS[k] for k in keys), "specactor÷floor", "SDK÷specactor", "target", "verdict"]
    lines = [
        f"# specactor bench — {doc['timestamp']} — **{doc['verdict']}**",
        "",
        f"`{doc['command']}` · transport {doc['transport']} · {doc['machine']['nproc']} CPUs "
        f"({doc['machine']['cpu']}) · Python {doc['machine']['python']} · {doc['duration_s']} s",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(head) - 3) + ["---", "---"]) + "|",
    ]
    for m in MEASURES:
        row = [f"{m.label} ({m.unit})"]
        row += [_num(servers[k]["figures"].get(m.key)) for k in keys]
        r = doc["ratios"][m.key]
        row += [_ratio(r["specactor/floor"]), _ratio(r["sdk/specactor"])]
        judged = [g for g in gates if m.key in g.measures]
        row.append("; ".join(g.target for g in judged))
        row.append("; ".join(f"**{g.verdict.upper()}**" if g.verdict == "fail" else g.verdict.upper()
                             for g in judged))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Gates", ""]
    for g in gates:
        lines.append(f"- **{g.verdict.upper()}** {g.name} — target {g.target}; {g.detail}")
    if not doc["gates_enforced"]:
        lines += ["", "_Gates reported but not enforced (`--no-gates`)._"]
    cfg = doc["config"]
    lines += [
        "",
        f"Samples: {cfg['samples']} sequential calls and {cfg['rounds']} burst rounds of {cfg['burst']} per "
        f"server, {cfg['spawns']} spawns for first reply, {cfg['warmup']} warm-up calls. "
        "Latencies are client-side (request written → reply read), in ms; MB = 10⁶ bytes. "
        "Ratios > 1 in the SDK÷specactor column mean specactor is smaller/faster, except for the "
        "calls/s rows, where < 1 does. See bench/README.md.",
    ]
    return "\n".join(lines) + "\n"


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
