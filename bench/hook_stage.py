"""The hook stage: `specactor hook` as a client runs it, a fresh process per event (issue 16).

    python -m bench.hook_stage [--quick] [--json F]

Builds the issue's workspace for it: a knowledge repository of 1,000 items (every tenth with
constraints) and 100,000 memories in this project's layer (the layer the hooks read; English-like
text, `bench.workloads.memory.Corpus`). Then times, from process start to exit (wall clock, the
console script `specactor` as a client starts it):

- `hook session-start --client claude`: P95 < 250 ms;
- `hook prompt --client claude` within a session that already got its context (a prompt as most
  are: the memories relevant to it): P95 < 150 ms. A session's first prompt (which also carries the
  whole context, the fallback for clients without SessionStart) is reported beside it.

Every answer is checked: session-start prints the context, prompts exit 0. `--quick` (the CI
smoke) uses 2,000 memories, 200 items and fewer runs; its verdicts are smoke.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import stagecli
from bench.catalog import memories
from bench.gates import GateResult
from bench.stats import percentile
from bench.transport import HarnessError
from bench.workloads.memory import knowledge_repo

SESSION_START_P95_MS = 250.0
PROMPT_P95_MS = 150.0
PROJECT = "bench-hooks"
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Plan:
    memories: int
    items: int
    runs: int


QUICK = Plan(2_000, 200, 8)
FULL = Plan(100_000, 1_000, 40)


def _program() -> list[str]:
    found = shutil.which("specactor", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return [found] if found else [sys.executable, "-m", "specactor"]


def _time(argv: list[str], stdin: dict[str, Any], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, input=json.dumps(stdin).encode(), capture_output=True, env=env, cwd=cwd,
                          timeout=TIMEOUT_S, check=False)
    ms = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise HarnessError(f"{' '.join(argv[-4:])} exited {done.returncode}: {done.stderr.decode()[-300:]}")
    return ms, done.stdout.decode()


def _quantiles(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"n": len(ms), "p50_ms": round(percentile(ms, 50), 1), "p95_ms": round(percentile(ms, 95), 1),
            "max_ms": round(ms[-1], 1)}


def run(quick: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    plan = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="specactor-bench-hooks-") as tmp:
        root = Path(tmp) / PROJECT
        root.mkdir()
        progress(f"hooks: building {plan.items} knowledge items and {plan.memories:,} project memories")
        built = time.monotonic()
        knowledge_repo(root / "knowledge", plan.items)
        queries = memories(root / ".bench" / "memory.db", plan.memories, project=PROJECT)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPECACTOR_")}
        env |= {"SPECACTOR_MEMORY_DB": str(root / ".bench" / "memory.db"),
                "SPECACTOR_KNOWLEDGE_REPO": str(root / "knowledge"), "SPECACTOR_MEMORY_PROJECT_ID": PROJECT}
        program = _program()
        hook = [*program, "hook"]
        base = {"cwd": str(root), "transcript_path": "/dev/null"}
        # the first run parses the knowledge tree and caches it: the next runs are what sessions see
        _, first = _time([*hook, "session-start", "--client", "claude"], {**base, "session_id": "warm",
                         "hook_event_name": "SessionStart", "source": "startup"}, env, root)
        if "<specactor-context>" not in first:
            raise HarnessError(f"session-start printed no context: {first[:300]!r}")
        progress(f"hooks: {plan.runs} runs of each event")
        starts, firsts, prompts = [], [], []
        for k in range(plan.runs):
            ms, out = _time([*hook, "session-start", "--client", "claude"], {**base, "session_id": f"s{k}",
                            "hook_event_name": "SessionStart", "source": "startup"}, env, root)
            if "<specactor-context>" not in out:
                raise HarnessError("session-start printed no context")
            starts.append(ms)
            prompt = {**base, "hook_event_name": "UserPromptSubmit", "prompt": queries[k % len(queries)]}
            firsts.append(_time([*hook, "prompt", "--client", "claude"], {**prompt, "session_id": f"p{k}"},
                                env, root)[0])
            prompts.append(_time([*hook, "prompt", "--client", "claude"], {**prompt, "session_id": "s0"},
                                 env, root)[0])
        return {"quick": quick, "memories": plan.memories, "items": plan.items, "runs": plan.runs,
                "program": " ".join(program), "build_s": round(time.monotonic() - built, 1),
                "session_start": _quantiles(starts), "prompt": _quantiles(prompts),
                "first_prompt": _quantiles(firsts)}


def gates(section: dict[str, Any]) -> list[GateResult]:
    quick = bool(section.get("quick"))
    out = []
    for key, name, limit in (("session_start", "hook session-start", SESSION_START_P95_MS),
                             ("prompt", "hook prompt", PROMPT_P95_MS)):
        fig = section.get(key)
        target = f"p95 < {limit:g} ms, process start to exit"
        if not fig:
            out.append(GateResult(f"{name}: wall time", target, "skip", section.get("error") or "not measured",
                                  (f"hooks:{key}",)))
            continue
        detail = f"p95 {fig['p95_ms']:g} ms (p50 {fig['p50_ms']:g}, n={fig['n']})"
        verdict = "smoke" if quick else "pass" if fig["p95_ms"] < limit else "fail"
        out.append(GateResult(f"{name}: wall time", target, verdict,
                              f"smoke (quick): {detail}" if quick else detail, (f"hooks:{key}",)))
    return out


def table(section: dict[str, Any], num: Callable[[float | None], str]) -> list[str]:
    lines = ["## Session hooks: `specactor hook`, a fresh process per event", ""]
    if section.get("error"):
        return [*lines, f"Harness error: {section['error']}"]
    lines += [f"`{section['program']} hook …` on a workspace of {section['items']:,} knowledge items and "
              f"{section['memories']:,} project memories; {section['runs']} runs each; wall clock from process "
              f"start to exit, ms; built in {section['build_s']} s.", "",
              "| event | p50 | p95 | max | target |", "|---|---:|---:|---:|---|"]
    for key, label, target in (("session_start", "session-start", f"p95 < {SESSION_START_P95_MS:g}"),
                               ("prompt", "prompt (a session's later prompts)", f"p95 < {PROMPT_P95_MS:g}"),
                               ("first_prompt", "prompt, a session's first (with the whole context)", "")):
        f = section[key]
        lines.append(f"| {label} | {num(f['p50_ms'])} | {num(f['p95_ms'])} | {num(f['max_ms'])} | {target} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    return stagecli.main(argv, prog="python -m bench.hook_stage", doc=__doc__,
                         quick_help="2,000 memories, 200 items, 8 runs", run=run, gates=gates, table=table)


if __name__ == "__main__":
    sys.exit(main())
