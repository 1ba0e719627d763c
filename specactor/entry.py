"""The `specactor` console script and `python -m specactor`: the session commands a client runs per
event (`hook`, `context`) start here without importing the command line's settings and logging
(~50 ms a hook would otherwise pay); every other command goes to `specactor.cli`."""

from __future__ import annotations

import sys
from collections.abc import Sequence

LIGHT = {"hook": ("specactor.hooks.run", "hook_main"), "context": ("specactor.context.command", "main")}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] and args[0] in LIGHT:
        import importlib

        module, name = LIGHT[args[0]]
        run = getattr(importlib.import_module(module), name)
        status: int = run(args[1:])
        return status
    from specactor.cli import main as cli_main

    return cli_main(args)
