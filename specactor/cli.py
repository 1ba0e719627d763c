"""The command line: argv -> Config -> trio.run(app).

`specactor serve` serves MCP over stdio (`--http` once the HTTP transport is installed),
`specactor demo` shows the server at work, `specactor --version` prints the version.
Exit status: 0 on a clean stop, 2 for a configuration error, 1 when the server failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import trio

from specactor import __version__, logsetup
from specactor.config import TOOLSETS, Config, ConfigError, load
from specactor.logsetup import get_logger

log = get_logger("specactor.cli")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specactor", description="An MCP server for spec-driven development.")
    parser.add_argument("--version", action="version", version=f"specactor {__version__}")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve MCP on stdio (the default) or HTTP")
    add_server_flags(serve)
    sub.add_parser("demo", help="start a server on a temporary workspace and drive it with the official client")
    return parser


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", help="workspace root (default: the current directory)")
    parser.add_argument("--config", help="a TOML or YAML settings file (default: <root>/.specactor/config.toml)")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error", "critical"])
    parser.add_argument("--debug", action="store_true", default=None, help="debug logs and the resolved settings")
    parser.add_argument("--toolsets", help=f"comma-separated toolsets to enable ({', '.join(TOOLSETS)})")
    parser.add_argument("--no-session-log", action="store_true", default=None, help="do not write JSONL session logs")
    parser.add_argument("--session-log-dir", help="where session logs go (default: <root>/.specactor/logs)")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="HTTP port (default 8765)")


def flags_of(args: argparse.Namespace) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    pairs = {"root": "root", "log_level": "log_level", "session_log_dir": "session_log.dir",
             "host": "http.host", "port": "http.port"}
    for attr, key in pairs.items():
        if getattr(args, attr, None) is not None:
            flags[key] = getattr(args, attr)
    if getattr(args, "toolsets", None):
        flags["toolsets"] = [t.strip() for t in args.toolsets.split(",") if t.strip()]
    if getattr(args, "no_session_log", None):
        flags["session_log.enabled"] = False
    if getattr(args, "debug", None):
        flags["debug"] = True
        flags.setdefault("log_level", "debug")
    return flags


def resolve(args: argparse.Namespace) -> Config | None:
    """Load and announce the settings; None (after printing why) when they are invalid."""
    try:
        config = load(flags_of(args), config_file=getattr(args, "config", None))
    except ConfigError as err:
        print(f"specactor: {err}", file=sys.stderr)
        return None
    logsetup.configure(config.log_level)
    if config.debug:
        log.debug("resolved configuration", config=config.redacted())
    return config


def run_server(config: Config, http: bool, extra: Callable[..., None] | None = None, *,
               name: str | None = None) -> int:
    """Build the app and serve it on stdio or HTTP; the process's exit status."""
    from specactor import app as application

    kwargs = {"name": name} if name else {}
    built = application.build(config, extra, defer=not http, **kwargs)
    try:
        if http:
            try:
                import hypercorn  # noqa: F401
                import prometheus_client  # noqa: F401
            except ModuleNotFoundError as err:
                print(f"specactor: the HTTP transport needs the [http] extra ({err.name} is missing): "
                      "pip install 'specactor[http]'", file=sys.stderr)
                return 2
            status: int = trio.run(application.serve_http, built)
            return status
        from specactor.actors.stdio import StdioFds

        fds = StdioFds.claim()
        return trio.run(application.serve_stdio, built, fds)
    except KeyboardInterrupt:  # pragma: no cover - a second Ctrl-C during shutdown
        return 0
    except BaseException as exc:
        from specactor.actors.supervisor import describe, root_cause

        cause = root_cause(exc)
        log.critical("specactor failed", error=describe(cause))
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        config = resolve(args)
        return 2 if config is None else run_server(config, bool(args.http))
    if args.command == "demo":
        from specactor.demo import main as demo_main

        return demo_main()
    _parser().print_help(sys.stderr)
    return 2
