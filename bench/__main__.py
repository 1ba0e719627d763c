"""`python -m bench` (`just bench`): specactor, the SDK peer and the floor, side by side.

    python -m bench                     # the full run, gates enforced (~35 s on 2 cores)
    python -m bench --quick --no-gates  # the CI smoke test: small samples, always exit 0

Exit codes: 0 every gate passed (or `--no-gates`); 1 a gate failed (named on stderr);
2 the harness itself broke (a server died, hung, or answered wrongly).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.harness import Config, measure
from bench.report import build, utc_now, write
from bench.servers import ORDER, server_specs
from bench.transport import TRANSPORTS, HarnessError

QUICK = Config(samples=200, rounds=5, spawns=2, warmup=50, idle=0.3)
FULL = Config()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small samples (well under a minute)")
    parser.add_argument("--no-gates", action="store_true", help="report the gates but always exit 0")
    parser.add_argument("--samples", type=int, help=f"sequential calls per server (default {FULL.samples})")
    parser.add_argument("--rounds", type=int, help=f"burst rounds per server (default {FULL.rounds})")
    parser.add_argument("--spawns", type=int, help=f"fresh processes for first reply (default {FULL.spawns})")
    parser.add_argument("--transport", choices=sorted(TRANSPORTS), default="stdio")
    parser.add_argument("--servers", default=",".join(ORDER),
                        help=f"comma-separated subset of {','.join(ORDER)}")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results",
                        help="where results go (default bench/results)")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.servers.split(",") if k.strip()]
    unknown = sorted(set(keys) - set(ORDER))
    if unknown or not keys:
        parser.error(f"--servers: unknown {unknown}; choose from {','.join(ORDER)}")
    args.servers = [k for k in ORDER if k in keys]
    for name in ("samples", "rounds", "spawns"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1")
    return args


def config(args: argparse.Namespace) -> Config:
    base = QUICK if args.quick else FULL
    return Config(**{
        **base.__dict__,
        **{k: getattr(args, k) for k in ("samples", "rounds", "spawns") if getattr(args, k) is not None},
    })


def progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    cfg = config(args)
    specs = [server_specs()[k] for k in args.servers]
    transport = TRANSPORTS[args.transport]()
    started = utc_now()
    t0 = time.monotonic()
    progress(f"{', '.join(s.label for s in specs)} over {transport.name}")
    try:
        runs = measure(transport, specs, cfg, progress)
    except HarnessError as err:
        print(f"bench: HARNESS ERROR: {err}", file=sys.stderr)
        return 2
    doc = build(runs, cfg, transport=transport.name, started=started, duration_s=time.monotonic() - t0,
                gates_enforced=not args.no_gates, argv=argv)
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

    print((args.out / "latest.md").read_text())
    print(f"results: {stamped}  ({args.out / 'latest.md'}, latest.png)")
    failed = [g for g in doc["gates"] if g["verdict"] == "fail"]
    for g in doc["gates"]:
        print(f"{g['verdict'].upper():4}  {g['name']}: {g['detail'] or g['target']}")
    if failed:
        names = ", ".join(g["name"] for g in failed)
        suffix = " (not enforced: --no-gates)" if args.no_gates else ""
        print(f"FAIL: {len(failed)} gate(s) failed: {names}{suffix}", file=sys.stderr)
        return 0 if args.no_gates else 1
    print(f"{doc['verdict']}: no gate failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
