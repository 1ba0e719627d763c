"""Workloads for the openspec toolset's performance targets.

    python -m bench.workloads.openspec                  # 500 specs, 200 changes (about half a minute)
    python -m bench.workloads.openspec --quick          # small sizes, a smoke test
    python -m bench.workloads.openspec --json out.json  # also write the figures as JSON
    python -m bench.workloads.openspec --stat-only      # without inotify: every answer checked by stat

| workload | target |
|---|---|
| validate {all: true} over 500 specs and 200 changes (tools/call through the in-memory server) | < 1 s |
| list, list {specs: true}, show (a spec, a change) on the same workspace, cache warm | P95 < 5 ms |
| resources/read of openspec://specs/<cap> and openspec://changes/<id>, cache warm | P95 < 5 ms |

The workspace is written by `workspace()` into a fresh temporary directory: capabilities with
one to six requirements (a fifth of them nested under an area), changes with a proposal, tasks,
sometimes a design, and one to three delta specs that add, modify, remove and rename.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import trio

from bench.stats import summarize
from bench.workloads.airsspec import settle_on_disk
from specactor.domain.openspec.render import DeltaDoc, RequirementDoc, ScenarioDoc, render_delta, render_spec
from specactor.domain.openspec.templates import CONFIG_YAML

TARGETS_MS = {"validate_all": 1000.0, "list": 5.0, "list_specs": 5.0, "show_spec": 5.0, "show_change": 5.0,
              "read_spec": 5.0, "read_change": 5.0}
PURPOSE = "Keep the {cap} capability of the product described, testable and stable across releases."
WORDS = ["user", "invoice", "token", "session", "record", "report", "member", "queue", "limit", "order", "account"]


def _text(rng: random.Random, n: int = 8) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, n)))


def _requirement(rng: random.Random, name: str, scenarios: int) -> RequirementDoc:
    return RequirementDoc(name, [f"The system SHALL {_text(rng)}.", _text(rng, 12)],
                          [ScenarioDoc(f"Case {k}", [f"- **WHEN** {_text(rng)}", f"- **THEN** {_text(rng)}"])
                           for k in range(scenarios)])


def workspace(root: Path, specs: int = 500, changes: int = 200, seed: int = 11) -> tuple[list[str], list[str]]:
    """Write an OpenSpec workspace under `root`; return its capability ids and change ids."""
    rng = random.Random(seed)
    base = root / "openspec"
    (base / "changes" / "archive").mkdir(parents=True)
    (base / "config.yaml").write_text(CONFIG_YAML)
    catalogue: dict[str, list[tuple[str, int]]] = {}
    for i in range(specs):
        cap = f"area-{i % 20}/cap-{i}" if i % 5 == 0 else f"cap-{i}"
        reqs = [(f"Requirement {i}-{j}", rng.randint(1, 3)) for j in range(rng.randint(1, 6))]
        catalogue[cap] = reqs
        path = base / "specs" / cap / "spec.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_spec(cap, PURPOSE.format(cap=cap), [_requirement(rng, n, s) for n, s in reqs]))
    caps = list(catalogue)
    ids = []
    for c in range(changes):
        change = f"change-{c:03d}"
        ids.append(change)
        folder = base / "changes" / change
        (folder / "specs").mkdir(parents=True)
        (folder / "proposal.md").write_text(f"# Change: {change}\n\n## Why\n{_text(rng, 30)} " * 2 +
                                            f"\n\n## What Changes\n- {_text(rng)}\n\n## Impact\n- {_text(rng)}\n")
        (folder / "tasks.md").write_text("## 1. Work\n" + "".join(
            f"- [{'x' if rng.random() < 0.6 else ' '}] 1.{t + 1} {_text(rng)}\n" for t in range(rng.randint(2, 8))))
        if rng.random() < 0.3:
            (folder / "design.md").write_text(f"# Design\n\n{_text(rng, 40)}\n")
        for cap in rng.sample(caps, rng.randint(1, 3)):
            reqs = catalogue[cap]
            name, scenarios = rng.choice(reqs)
            delta = DeltaDoc(added=[_requirement(rng, f"Added by {change}", 2)],
                             modified=[_requirement(rng, name, scenarios)] if rng.random() < 0.5 else [],
                             removed=[reqs[-1][0]] if len(reqs) > 2 and rng.random() < 0.3 else [],
                             renamed=[(reqs[0][0], f"{reqs[0][0]} renamed")] if len(reqs) > 3 and rng.random() < 0.2
                             else [])
            path = folder / "specs" / cap / "spec.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render_delta(delta))
    settle_on_disk()
    return caps, ids


async def _timed(client: Any, method: str, params: dict[str, Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    reply = await client.request(method, params, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    if "error" in reply or (method == "tools/call" and not reply["result"]["structuredContent"]["success"]):
        raise RuntimeError(f"{method} {params} failed: {reply}")
    return elapsed, reply["result"]


def run(root: Path, caps: list[str], changes: list[str], samples: int) -> dict[str, Any]:
    from specactor.config import Config, SessionLogConfig
    from specactor.testing import open_memory_server

    config = Config(root=str(root), toolsets=["openspec"], session_log=SessionLogConfig(enabled=False))
    rng = random.Random(5)

    async def go() -> dict[str, Any]:
        async with open_memory_server(config) as client:
            await client.initialize()
            cold, result = await _timed(client, "tools/call", {"name": "validate", "arguments": {"all": True}})
            items = result["structuredContent"]["data"]["summary"]["totals"]
            validate = [(await _timed(client, "tools/call", {"name": "validate", "arguments": {"all": True}}))[0]
                        for _ in range(5)]
            calls: dict[str, tuple[str, Any]] = {
                "list": ("tools/call", lambda: {"name": "list", "arguments": {}}),
                "list_specs": ("tools/call", lambda: {"name": "list", "arguments": {"specs": True}}),
                "show_spec": ("tools/call", lambda: {"name": "show", "arguments": {"item": rng.choice(caps)}}),
                "show_change": ("tools/call", lambda: {"name": "show", "arguments": {"item": rng.choice(changes)}}),
                "read_spec": ("resources/read", lambda: {"uri": f"openspec://specs/{rng.choice(caps)}"}),
                "read_change": ("resources/read", lambda: {"uri": f"openspec://changes/{rng.choice(changes)}"}),
            }
            out: dict[str, Any] = {"validate_all_cold_ms": round(cold, 1), "validate_all": summarize(validate),
                                   "validated": items}
            for name, (method, params) in calls.items():
                for _ in range(20):  # warm the caches
                    await _timed(client, method, params())
                out[name] = summarize([(await _timed(client, method, params()))[0] for _ in range(samples)])
            return out

    return trio.run(go)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workloads.openspec", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="50 specs, 20 changes, few samples")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--stat-only", action="store_true", help="disable inotify (the non-Linux path)")
    args = parser.parse_args(argv)
    if args.stat_only:
        from specactor.toolsets import openspec as toolset

        toolset.Inotify._open = lambda self: False  # type: ignore[method-assign]
    specs, changes, samples = (50, 20, 50) if args.quick else (500, 200, 300)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        caps, ids = workspace(Path(tmp), specs, changes)
        figures = {"specs": specs, "changes": changes, "generate_s": round(time.perf_counter() - started, 2),
                   **run(Path(tmp), caps, ids, samples)}
    failed = []
    for name, target in TARGETS_MS.items():
        stats = figures[name]
        value = stats["median"] if name == "validate_all" else stats["p95"]
        verdict = "ok" if value < target else "MISSED"
        if verdict != "ok":
            failed.append(name)
        label = "median" if name == "validate_all" else "p95"
        print(f"{name:<14} {label} {value:8.2f} ms   target < {target:g} ms   {verdict}")
    print(f"validate_all (first call, cold caches) {figures['validate_all_cold_ms']} ms")
    if args.json:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(figures), indent=2))
    return 1 if failed and not args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
