"""The toolset part of `python -m bench`: the three workloads of bench/workloads, side by side.

Each workload runs as its own subprocess (`python -m bench.workloads.<name> [--quick] --json F`),
one after the other, bounded by a timeout: the memory workload sets environment variables and
every workload starts its own in-memory server, so a process apiece keeps them apart and lets a
hung one be killed. A workload's own exit code 1 (a target missed) is not an error; a crash, a
timeout or a missing JSON file is (`error`, and `python -m bench` exits 2).

`run` returns the `toolsets` section of the results document: per toolset the command, exit
code, wall time, sizes, the raw figures and one row per operation (median, P95, the statistic
judged, its target from `bench.gates.TOOLSET_TARGETS`, the verdict). `table` renders it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.gates import TOOLSET_FULL_SIZES, TOOLSET_TARGETS, GateResult, judge_op

NAMES = ("airsspec", "openspec", "memory")
TIMEOUT_S = {True: 300.0, False: 900.0}  # per workload: quick, full
ROOT = Path(__file__).resolve().parents[1]
INFO = {  # figures shown under a table, not judged
    "airsspec": (("first_list_ms", "first spec_list, cold caches (ms)"), ("generate_s", "workspace written (s)")),
    "openspec": (("validate_all_cold_ms", "first validate {all: true}, cold caches (ms)"),
                 ("validated", "items validated"), ("generate_s", "workspace written (s)")),
    "memory": (("recall_at_5_threshold_0_7", "recall@5, default mode (lexical, threshold 0.7)"),
               ("recall_at_5", "recall@5, ranking alone (threshold 0)"), ("load_seconds", "bulk load (s)"),
               ("sync_now_full_ms", "first full sync_now (ms)"), ("sync_now_delta_10_ms", "delta sync_now of 10 (ms)"),
               ("search_hits_median", "memory_search hits, median"), ("violations", "knowledge_check violations")),
}
UNITS = {"specs": "specs", "changes": "changes", "memories": "memories", "files": "files", "items": "items"}


def parse(value: str) -> list[str]:
    """`--toolsets`: all, none, or a comma-separated subset of NAMES."""
    if value == "all":
        return list(NAMES)
    if value == "none":
        return []
    keys = [k.strip() for k in value.split(",") if k.strip()]
    unknown = sorted(set(keys) - set(NAMES))
    if unknown or not keys:
        raise ValueError(f"unknown {unknown}; choose all, none or from {','.join(NAMES)}")
    return [k for k in NAMES if k in keys]


def _sizes(name: str, figures: dict[str, Any]) -> dict[str, int]:
    return {k: figures[k] for k in TOOLSET_FULL_SIZES[name] if isinstance(figures.get(k), int)}


def _operations(name: str, figures: dict[str, Any], smoke: bool) -> list[dict[str, Any]]:
    targets = TOOLSET_TARGETS[name]
    keys = list(targets) if "*" not in targets else [k for k, v in figures.items() if isinstance(v, dict)
                                                     and ("p95" in v or v.get("n") == 0)]
    rows = []
    for op in keys:
        stats = figures.get(op)
        if not isinstance(stats, dict):
            continue
        stat, target = targets.get(op, targets.get("*", ("p95", 0.0)))
        value = stats.get(stat)
        rows.append({"op": op, "n": stats.get("n", 1), "median_ms": stats.get("median"), "p95_ms": stats.get("p95"),
                     "stat": stat, "value_ms": value, "target_ms": target,
                     "verdict": judge_op(value, target, smoke)})
    return rows


def _one(name: str, quick: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"specactor-bench-{name}-") as tmp:
        out = Path(tmp) / "figures.json"
        argv = [sys.executable, "-m", f"bench.workloads.{name}", *(["--quick"] if quick else []), "--json", str(out)]
        entry: dict[str, Any] = {"command": " ".join(["python", *argv[1:-1], "<tmp>.json"]), "quick": quick,
                                 "exit_code": None, "error": None, "operations": [], "figures": {}}
        started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=TIMEOUT_S[quick])
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the workload and anything it started (git)
            stdout, stderr = proc.communicate()
            entry["error"] = f"timed out after {TIMEOUT_S[quick]:g} s"
        entry["duration_s"] = round(time.monotonic() - started, 1)
        entry["exit_code"] = proc.returncode
        entry["stdout"] = stdout.splitlines()[-40:]
        if entry["error"] is None and (proc.returncode not in (0, 1) or not out.exists()):
            tail = " | ".join(stderr.strip().splitlines()[-3:])
            entry["error"] = f"exit code {proc.returncode}, no figures: {tail}"[:500]
        if entry["error"] is None:
            figures = json.loads(out.read_text())
            figures.pop("gates", None)  # the memory workload's own verdicts: judged here instead
            sizes = _sizes(name, figures)
            smoke = any(sizes.get(k, 0) < full for k, full in TOOLSET_FULL_SIZES[name].items())
            entry.update(figures=figures, sizes=sizes, smoke=smoke,
                         size_text=", ".join(f"{v:,} {UNITS[k]}" for k, v in sizes.items()),
                         operations=_operations(name, figures, smoke))
    progress(f"toolset {name}: {entry['duration_s']} s" + (f", ERROR {entry['error']}" if entry["error"] else ""))
    return entry


def run(names: list[str], quick: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    section = {}
    for name in names:
        progress(f"toolset {name} workload{' (quick)' if quick else ''}")
        section[name] = _one(name, quick, progress)
    return section


def _show(value: Any, num: Callable[[float | None], str]) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_show(v, num)}" for k, v in value.items())
    return num(value) if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else str(value)


def table(section: dict[str, Any], gates: list[GateResult], num: Callable[[float | None], str]) -> list[str]:
    """The markdown lines: one table per toolset (operation, n, median, P95, target, verdict)."""
    lines = ["## Toolsets: every tool and resource read, in-memory server (the full stack but the pipe)", "",
             "Each workload builds its workspace or store in a fresh temporary directory and runs as its own "
             "process (`python -m bench.workloads.<name>`); latencies are per request, caches warm, in ms. "
             "Smaller than the issue's sizes (`--quick`): verdict SMOKE, never failed."]
    for name, entry in section.items():
        head = f"### {name}" + (f" ({entry['size_text']})" if entry.get("size_text") else "")
        lines += ["", head + f" — {entry['duration_s']} s" + (" — smoke (quick)" if entry.get("smoke") else ""), ""]
        if entry["error"]:
            lines.append(f"**Workload broke**: {entry['error']}")
            continue
        lines += ["| operation | n | median (ms) | P95 (ms) | target | verdict |", "|---|---:|---:|---:|---|---|"]
        for op in entry["operations"]:
            verdict = op["verdict"].upper()
            if verdict == "SMOKE":
                over = op["value_ms"] is not None and op["value_ms"] >= op["target_ms"]
                verdict = "SMOKE (over target)" if over else "SMOKE (within)"
            lines.append(f"| {op['op']} | {op['n']} | {num(op['median_ms'])} | {num(op['p95_ms'])} | "
                         f"{op['stat']} < {op['target_ms']:g} ms | "
                         + (f"**{verdict}**" if verdict == "FAIL" else verdict) + " |")
        info = [(label, entry["figures"].get(key)) for key, label in INFO[name]]
        shown = [f"{label} {_show(v, num)}" for label, v in info if v is not None]
        if shown:
            lines += ["", "; ".join(shown) + "."]
    judged = [g for g in gates if any(m.startswith("toolset:") for m in g.measures)]
    if judged:
        lines += ["", "Toolset gates: " + "; ".join(f"{g.name} **{g.verdict.upper()}**" for g in judged) + "."]
    return lines
