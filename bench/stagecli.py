"""The command line every standalone bench stage shares (`python -m bench.iowait`, `bench.openloop`):
run it, judge it, print its table and gates, optionally write its section as JSON; exit 1 when a
gate failed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from bench.gates import GateResult
from bench.servers import compile_bytecode

Section = dict[str, Any]


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"


def main(argv: list[str] | None, *, prog: str, doc: str | None, quick_help: str,
         run: Callable[[bool, Callable[[str], None]], Section], gates: Callable[[Section], list[GateResult]],
         table: Callable[[Section, Callable[[float | None], str]], list[str]]) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--json", type=Path, help="also write the section as JSON")
    args = parser.parse_args(argv)
    compile_bytecode()  # process starts are timed: measure the server, not the compiler
    section = run(args.quick, lambda msg: print(msg, file=sys.stderr, flush=True))
    verdicts = gates(section)
    section["gates"] = [g.as_dict() for g in verdicts]
    if args.json:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(section), indent=2))
    print("\n".join(table(section, num)))
    print()
    for g in verdicts:
        print(f"{g.verdict.upper():5} {g.name}: {g.target}: {g.detail}")
    return 1 if any(g.verdict == "fail" for g in verdicts) else 0
