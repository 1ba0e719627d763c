"""`specactor context [--root DIR] [--budget N] [--format text|json]`: print the session context.

Prints the workspace's session context (`domain/context.py`) on stdout: nothing when there is
none. Exit status 0; 2 for invalid settings, with one line on stderr. A store that cannot be read
is named on stderr, and the context is built from the other.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import msgspec

from specactor.config import ConfigError
from specactor.context.reader import Deadline, Sources, gather
from specactor.domain import context as text


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specactor context", description="Print the session context of a workspace: "
                                "the accepted knowledge constraints that bind it, then its newest memories, inside "
                                "<specactor-context> tags.")
    p.add_argument("--root", default=".", help="the workspace (default: the current directory)")
    p.add_argument("--budget", type=int, help="most characters printed (default: the context.budget setting, "
                   f"{text.DEFAULT_BUDGET} unless set)")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text, or JSON {context, constraints, memories, problems}")
    p.add_argument("--session", help="the client's session id (accepted for plugins; the context is the same)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.budget is not None and args.budget < 1:
        print("specactor: --budget must be at least 1", file=sys.stderr)
        return 2
    try:
        sources = Sources.at(args.root)
    except ConfigError as err:
        print(f"specactor: {err}", file=sys.stderr)
        return 2
    found = gather(sources, Deadline(30.0))
    for problem in found.problems:
        print(f"specactor: {problem}", file=sys.stderr)
    budget = sources.budget if args.budget is None else args.budget
    context = text.session_context(found.items, found.notes, budget, project=sources.ids.project_id)
    if args.format == "json":
        doc = {"context": context, "constraints": len(text.constraint_lines(found.items)),
               "memories": len(found.notes), "problems": found.problems}
        sys.stdout.write(msgspec.json.encode(doc).decode() + "\n")
    elif context:
        sys.stdout.write(context + "\n")
    return 0

