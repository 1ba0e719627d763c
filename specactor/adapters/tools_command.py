"""`specactor tools --format json-schema|openai|langchain`: the server's tool definitions as JSON on stdout.

For frameworks that take function definitions rather than MCP. The tools are those `specactor
serve` registers with the same settings (root, settings file, environment, `--toolsets`): the
registry is built as `app.build` builds it, without starting an actor. Exit status: 0, or 2 for a
configuration error (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, cast

from specactor.adapters.definitions import FORMATS, Format, definition
from specactor.config import TOOLSETS, Config, ConfigError, load
from specactor.wire.mcp import Tool


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specactor tools", description="Print the tool definitions `specactor serve` "
                                "would list, for frameworks that take function definitions rather than MCP: "
                                "json-schema (one draft-07 document per tool), openai ({type: function, function: "
                                "{name, description, parameters}}) or langchain (StructuredTool's name, "
                                "description and args_schema).")
    p.add_argument("--format", choices=FORMATS, default="json-schema", help="default: json-schema")
    p.add_argument("--toolsets", metavar="A,B", help=f"comma-separated toolsets, of {', '.join(TOOLSETS)} (default: "
                   "the server's: openspec,airsspec,memory; env SPECACTOR_TOOLSETS)")
    p.add_argument("--root", help="the workspace (default: the current directory; env SPECACTOR_ROOT)")
    p.add_argument("--config", metavar="FILE", help="a TOML or YAML settings file (env SPECACTOR_CONFIG)")
    return p


def registered_tools(config: Config) -> list[Tool]:
    """The tools a server with `config` registers, in registration order; no actor is started."""
    from specactor import app  # the toolsets' imports: only when asked

    return [entry.tool for entry in app.build(config).registry.tools.values()]


def definitions(fmt: Format, tools: list[Tool]) -> list[dict[str, Any]]:
    return [definition(fmt, t.name, t.description if isinstance(t.description, str) else "", t.inputSchema)
            for t in tools]


def tools_main(argv: list[str]) -> int:
    """Print the definitions; the exit status."""
    args = parser().parse_args(argv)
    flags: dict[str, Any] = {"log_level": "warning"}
    if args.root is not None:
        flags["root"] = args.root
    if args.toolsets is not None:
        flags["toolsets"] = [t.strip() for t in args.toolsets.split(",") if t.strip()]
    try:
        config = load(flags, config_file=args.config)
        from specactor import logsetup

        logsetup.configure(config.log_level)
        tools = registered_tools(config)
    except ConfigError as err:
        print(f"specactor: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(definitions(cast(Format, args.format), tools), indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - `python -m specactor.adapters.tools_command`
    raise SystemExit(tools_main(sys.argv[1:]))
