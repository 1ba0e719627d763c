"""`python -m bench` (`just bench`): specactor, the SDK peers (Python, TypeScript) and the floor, side by side.

    python -m bench                     # every stage, gates enforced (about 12 min on 2 cores)
    python -m bench --transport http    # only Streamable HTTP (~55 s)
    python -m bench --quick --no-gates  # the CI smoke test: small samples, always exit 0
    python -m bench --transport none    # only the toolset workloads (--toolsets all|none|airsspec,...)
    python -m bench --no-pertool        # without the per-tool stage (every tool, resource, prompt at c=1, c=100)
    python -m bench --no-iowait --no-openloop  # without the I/O-waiting (stdio) and open-loop (HTTP) stages
    python -m bench --no-vectors        # without the vector stage (semantic search scoring, no server)

The TS SDK peer (`--servers` ts, ts-stateless; on by default) is installed with Node 22 from npm
into `.bench/ts-peer` the first time (about 10 s); when npm or its registry cannot be reached, or
the install outlasts 600 s (`--quick`: 120 s; TS_INSTALL_TIMEOUT), its rows are left
out with one line saying why (`TS SDK peer: SKIPPED — ...`, also in latest.md).

Exit codes: 0 every gate passed (or `--no-gates`); 1 a gate failed (named on stderr); reported
targets (verdict MET / MISSED; SMOKE with --quick) never fail the run; 2 the harness itself broke (a server died, hung,
or answered wrongly; a toolset workload crashed or timed out).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import Config, ServerRun, measure
from bench.hook_stage import run as run_hooks
from bench.http_harness import HttpConfig, HttpRun, measure_http
from bench.iowait import run as run_iowait
from bench.openloop import run as run_openloop
from bench.pertool import run as run_pertool
from bench.report import build, utc_now, write
from bench.servers import ORDER, TS, compile_bytecode, server_specs
from bench.toolsets import NAMES as TOOLSETS
from bench.toolsets import parse as parse_toolsets
from bench.toolsets import run as run_toolsets
from bench.transport import TRANSPORTS, HarnessError
from bench.vector_stage import run as run_vectors

QUICK = Config(samples=200, rounds=5, spawns=2, warmup=50, idle=0.3)
FULL = Config()
HTTP_QUICK = HttpConfig(rounds=1, slice_s=0.25, warmup_s=0.1, idle=0.3)
HTTP_FULL = HttpConfig()
CHOICES = (*sorted(TRANSPORTS), "http", "all", "none")
TS_INSTALL_TIMEOUT, TS_INSTALL_TIMEOUT_QUICK = 600.0, 120.0  # seconds for `npm ci` of the TS peer


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small samples (well under a minute)")
    parser.add_argument("--no-gates", action="store_true", help="report the gates but always exit 0")
    parser.add_argument("--samples", type=int, help=f"sequential calls per server (default {FULL.samples})")
    parser.add_argument("--rounds", type=int, help=f"burst rounds per server (default {FULL.rounds})")
    parser.add_argument("--spawns", type=int, help=f"fresh processes for first reply (default {FULL.spawns})")
    parser.add_argument("--transport", choices=CHOICES, default="all",
                        help="stdio, http (Streamable HTTP), all (both, one after the other; default) "
                        "or none (only the toolsets)")
    parser.add_argument("--toolsets", default="all",
                        help=f"toolset workloads after the transports: all (default), none, or a "
                        f"comma-separated subset of {','.join(TOOLSETS)}")
    parser.add_argument("--pertool-samples", type=int,
                        help="per-tool stage: calls at c=1 per operation (default 200; --quick 20)")
    parser.add_argument("--pertool-bursts", type=int,
                        help="per-tool stage: bursts of 100 per operation (default 3; --quick 1)")
    parser.add_argument("--iowait", action=argparse.BooleanOptionalAction, default=True,
                        help="the I/O-waiting stage with stdio: memory_search against a 20 ms embeddings endpoint, "
                        "sync_now on git, write tools with graph sync into a 20 ms Emergent double, at c=1 and "
                        "c=100; the first sync and an outage's catch-up (default on; see bench/iowait.py)")
    parser.add_argument("--openloop", action=argparse.BooleanOptionalAction, default=True,
                        help="the open-loop stage with HTTP: 100 clients x 10 calls/s against one client at that "
                        "pace (default on; see bench/openloop.py)")
    parser.add_argument("--vectors", action=argparse.BooleanOptionalAction, default=True,
                        help="the vector stage: semantic memory_search scoring with numpy at 2,000 x 256 and "
                        "100,000 x 384 against the pure-Python path, no server (default on, ~50 s; see "
                        "bench/vector_stage.py)")
    parser.add_argument("--hooks", action=argparse.BooleanOptionalAction, default=True,
                        help="the hook stage: `specactor hook session-start` and `prompt` as fresh processes on "
                        "1,000 knowledge items and 100,000 project memories (default on, ~60 s; see "
                        "bench/hook_stage.py)")
    parser.add_argument("--pertool", action=argparse.BooleanOptionalAction, default=True,
                        help="per-tool latency of every tool, resource and prompt of `specactor serve`, c=1 and "
                        "c=100, over the transports chosen (default on; see bench/pertool.py)")
    parser.add_argument("--http-rounds", type=int,
                        help=f"HTTP rounds per target and concurrency (default {HTTP_FULL.rounds})")
    parser.add_argument("--http-slice", type=float,
                        help=f"seconds of one HTTP closed loop (default {HTTP_FULL.slice_s:g})")
    parser.add_argument("--levels", help="HTTP concurrencies, comma-separated (default "
                        + ",".join(map(str, HTTP_FULL.levels)) + ")")
    parser.add_argument("--servers", default=",".join(ORDER),
                        help=f"comma-separated subset of {','.join(ORDER)} (ts: the TypeScript SDK over stdio and "
                        "HTTP with sessions; ts-stateless: HTTP, a server per request; specactor-1w: HTTP only, "
                        "specactor --workers 1, for the gates against the floor and against one worker)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results",
                        help="where results go (default bench/results)")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.servers.split(",") if k.strip()]
    unknown = sorted(set(keys) - set(ORDER))
    if unknown or not keys:
        parser.error(f"--servers: unknown {unknown}; choose from {','.join(ORDER)}")
    args.servers = [k for k in ORDER if k in keys]
    try:
        args.toolsets = parse_toolsets(args.toolsets)
    except ValueError as err:
        parser.error(f"--toolsets: {err}")
    for name in ("samples", "rounds", "spawns", "http_rounds", "pertool_samples", "pertool_bursts"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.http_slice is not None and args.http_slice <= 0:
        parser.error("--http-slice must be positive")
    try:
        args.levels = tuple(int(c) for c in args.levels.split(",")) if args.levels else None
    except ValueError:
        parser.error("--levels: comma-separated integers, e.g. 1,10,100")
    if args.levels is not None and (not args.levels or min(args.levels) < 1):
        parser.error("--levels: every concurrency must be at least 1")
    return args


def config(args: argparse.Namespace) -> Config:
    base = QUICK if args.quick else FULL
    return Config(**{
        **base.__dict__,
        **{k: getattr(args, k) for k in ("samples", "rounds", "spawns") if getattr(args, k) is not None},
    })


def http_config(args: argparse.Namespace) -> HttpConfig:
    base = HTTP_QUICK if args.quick else HTTP_FULL
    given = {"rounds": args.http_rounds, "slice_s": args.http_slice, "levels": args.levels}
    return HttpConfig(**{**base.__dict__, **{k: v for k, v in given.items() if v is not None}})


def progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def _stage(name: str, run: Callable[[bool, Callable[[str], None]], dict[str, Any]], quick: bool) -> dict[str, Any]:
    """Run one stage; a harness failure becomes its `error` (and exit code 2), the other stages still run."""
    try:
        return run(quick, progress)
    except (HarnessError, OSError, subprocess.SubprocessError) as err:
        progress(f"{name}: HARNESS ERROR {err}")
        return {"quick": quick, "error": str(err)[:1000]}


def ts_peer(keys: list[str], quick: bool) -> dict[str, str]:
    """Install the TS SDK peer if `keys` (the --servers) ask for it; {key: why} for each one left out.

    Raises:
        HarnessError: npm failed for a reason other than the network (bench.peers.ts.project).
    """
    wanted = [k for k in keys if k in TS]
    if not wanted:
        return {}
    from bench.peers.ts.project import Unreachable, ensure

    try:
        ensure(TS_INSTALL_TIMEOUT_QUICK if quick else TS_INSTALL_TIMEOUT)
    except Unreachable as err:
        progress(f"TS SDK peer: SKIPPED — {err}")
        return dict.fromkeys(wanted, str(err))
    return {}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    compile_bytecode()  # process starts are timed: measure the server, not the compiler
    cfg = config(args)
    hcfg = http_config(args)
    loadavg_start = list(os.getloadavg())
    started = utc_now()
    t0 = time.monotonic()
    runs: dict[str, ServerRun] = {}
    http_runs: dict[str, HttpRun] | None = None
    try:
        skipped = ts_peer(args.servers, args.quick) if args.transport != "none" else {}
        specs = [server_specs()[k] for k in args.servers if k not in skipped]
        if args.transport in ("stdio", "all"):
            transport = TRANSPORTS["stdio"]()
            stdio_specs = [s for s in specs if s.argv]  # ts-stateless serves HTTP only
            progress(f"{', '.join(s.label for s in stdio_specs)} over {transport.name}")
            runs = measure(transport, stdio_specs, cfg, progress)
        if args.transport in ("http", "all"):
            progress(f"{', '.join(s.label for s in specs)} over Streamable HTTP")
            http_runs = measure_http(specs, hcfg, progress)
    except HarnessError as err:
        print(f"bench: HARNESS ERROR: {err}", file=sys.stderr)
        return 2
    pertool_transports = {"stdio": ["stdio"], "http": ["http"], "all": ["stdio", "http"]}.get(args.transport, [])
    pertool = (run_pertool(args.quick, progress, pertool_transports, samples=args.pertool_samples,
                           bursts=args.pertool_bursts) if args.pertool and pertool_transports else None)
    iowait = _stage("iowait", run_iowait, args.quick) if args.iowait and args.transport in ("stdio", "all") else None
    openloop = (_stage("openloop", run_openloop, args.quick) if args.openloop and args.transport in ("http", "all")
                else None)
    vectors = _stage("vectors", run_vectors, args.quick) if args.vectors and args.transport != "none" else None
    hooks = _stage("hooks", run_hooks, args.quick) if args.hooks and args.transport != "none" else None
    toolsets = run_toolsets(args.toolsets, args.quick, progress) if args.toolsets else None
    name = {"all": "stdio + Streamable HTTP", "http": "Streamable HTTP"}.get(args.transport, args.transport)
    doc = build(runs, cfg, transport=name, started=started, duration_s=time.monotonic() - t0,
                gates_enforced=not args.no_gates, argv=argv, http_runs=http_runs, http_cfg=hcfg,
                loadavg_start=loadavg_start, toolsets=toolsets, pertool=pertool, iowait=iowait,
                openloop=openloop, vectors=vectors, hooks=hooks, skipped=skipped, quick=args.quick)
    stamped = write(doc, args.out, started)
    try:
        from bench.plot import plot

        plot(doc, args.out / "latest.png")
    except ImportError as err:
        progress(f"no plot ({err})")
    for server in doc["servers"].values():
        bad = [c for c in server["exit_codes"] if c != 0]
        if bad:
            progress(f"warning: {server['label']} exited with {bad} on EOF")
    for target in (doc["http"] or {}).get("targets", {}).values():
        if target["exit_code"] not in (0, -signal.SIGTERM):  # uvicorn re-raises the SIGTERM it handled
            progress(f"warning: {target['label']} (HTTP) exited with {target['exit_code']} on SIGTERM")

    print((args.out / "latest.md").read_text())
    print(f"results: {stamped}  ({args.out / 'latest.md'}, latest.png)")
    broken = {k: v["error"] for k, v in (toolsets or {}).items() if v["error"]}
    broken.update({f"per-tool {k}": v["error"] for k, v in (pertool or {}).get("transports", {}).items()
                   if v["error"]})
    broken.update({name: stage["error"] for name, stage in (("iowait", iowait), ("openloop", openloop),
                                                            ("vectors", vectors), ("hooks", hooks))
                   if stage is not None and stage.get("error")})
    if iowait is not None and (iowait.get("graph") or {}).get("error"):
        broken["iowait graph sync"] = iowait["graph"]["error"]
    for key, error in broken.items():
        staged = key.startswith(("per-tool", "iowait")) or key in ("openloop", "vectors", "hooks")
        what = key if staged else f"toolset {key}"
        print(f"bench: HARNESS ERROR: {what}: {error}",
              file=sys.stderr)
    failed = [g for g in doc["gates"] if g["verdict"] == "fail"]
    for g in doc["gates"]:
        print(f"{g['verdict'].upper():4}  {g['name']}: {g['detail'] or g['target']}")
    if failed:
        names = ", ".join(g["name"] for g in failed)
        suffix = " (not enforced: --no-gates)" if args.no_gates else ""
        print(f"FAIL: {len(failed)} gate(s) failed: {names}{suffix}", file=sys.stderr)
        return 2 if broken else 0 if args.no_gates else 1
    print(f"{doc['verdict']}: no gate failed")
    return 2 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
