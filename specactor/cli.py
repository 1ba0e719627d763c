"""The command line: argv -> Config -> trio.run(app).

`specactor serve` serves MCP over stdio (`--http` once the HTTP transport is installed),
`specactor demo` shows the server at work, `specactor --version` prints the version.
Exit status: 0 on a clean stop, 2 for a configuration error (one line on stderr, naming the
setting and where it came from, whether found while reading the settings or while starting),
1 when the server failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specactor import SERVER_NAME, __version__, logsetup
from specactor.config import TOOLSETS, Config, ConfigError, Settings, Sources, available_cores, load_settings
from specactor.logsetup import get_logger

log = get_logger("specactor.cli")


SERVE = """Serve MCP to an assistant. On stdio (the default) the assistant starts this command
itself and speaks JSON-RPC on its stdin and stdout; with --http it serves Streamable HTTP at
http://HOST:PORT/mcp. Flags win over SPECACTOR_* environment variables, which win over the
settings file; docs/configuration.md lists every setting. Exit status: 0 after a clean stop,
2 for a configuration error (one line on stderr), 1 when the server failed."""
DEMO = """Start `specactor serve` on a temporary workspace and drive it with the official MCP client
(the `mcp` package of the [dev] extra): the handshake, the lists, a few tool calls and their
replies, printed as a readable transcript. Its memory store lives in the temporary folder."""
TTY = ("specactor: waiting for an MCP client on stdin/stdout (an assistant starts this command itself). "
       "Ctrl-D or Ctrl-C quits; `specactor demo` (or `just demo` in a clone) shows it at work.")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specactor", description="An MCP server for spec-driven development.")
    parser.add_argument("--version", action="version", version=f"specactor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{serve,demo,context,hook,install,uninstall,tools}")
    serve = sub.add_parser("serve", help="serve MCP on stdio (the default) or HTTP", description=SERVE)
    add_server_flags(serve)
    sub.add_parser("http-worker", description="One process of `specactor serve --http --workers N`, started by "
                   "that server with its settings on stdin; not for direct use.")
    sub.add_parser("demo", help="start a server on a temporary workspace and drive it with the official client",
                   description=DEMO)
    sub.add_parser("context", help="print the session context: binding constraints, then this project's memories",
                   description="Print what a session starts with: the accepted constraints that bind this project "
                   "(block first), then its newest memories, within --budget characters (specactor context --help).")
    sub.add_parser("hook", help="answer an assistant's hook event (its JSON on stdin); fails open",
                   description="specactor hook <session-start|prompt|tool-use|stop|session-end> --client "
                   "<claude|codex|gemini|opencode|text>: reads the client's hook JSON on stdin and answers in its "
                   "output contract; on any error it prints nothing and exits 0 (specactor hook --help).")
    sub.add_parser("install", help="write an assistant's MCP entry, hooks and plugin (specactor install --help)",
                   description="Merge specactor's MCP entry, session hooks and (OpenCode) plugin into an "
                   "assistant's own configuration files; `specactor install --help` lists the clients and flags.")
    sub.add_parser("uninstall", help="remove what `specactor install` wrote (specactor uninstall --help)",
                   description="Remove exactly what `specactor install` added, leaving the user's entries intact.")
    sub.add_parser("tools", help="print the tool definitions (json-schema, openai, langchain) for frameworks "
                   "without MCP", description="specactor tools --format json-schema|openai|langchain [--toolsets A,B]: "
                   "the tools `specactor serve` lists, as draft-07 function definitions (specactor tools --help).")
    return parser


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", help="the workspace: an existing folder, the repository the assistant works "
                        "in (default: the current directory; env SPECACTOR_ROOT)")
    parser.add_argument("--config", metavar="FILE", help="a TOML or YAML settings file (default: "
                        "<root>/.specactor/config.toml, .yaml or .yml; env SPECACTOR_CONFIG)")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error", "critical"],
                        help="the least severe JSON log line written to stderr (default: info; env "
                        "SPECACTOR_LOG_LEVEL)")
    parser.add_argument("--debug", action="store_true", default=None,
                        help="debug logs, and the resolved settings (secrets masked) at start-up")
    parser.add_argument("--toolsets", metavar="A,B", help=f"comma-separated toolsets to enable, at least one of "
                        f"{', '.join(TOOLSETS)} (default: openspec,airsspec,memory; env SPECACTOR_TOOLSETS)")
    parser.add_argument("--no-session-log", action="store_true", default=None,
                        help="write no JSONL session logs (env SPECACTOR_SESSION_LOG=false)")
    parser.add_argument("--session-log-dir", metavar="DIR", help="where session logs go (default: "
                        "<root>/.specactor/logs; env SPECACTOR_SESSION_LOG_DIR)")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP at /mcp instead of stdio "
                        "(needs the [http] extra)")
    parser.add_argument("--host", help="the HTTP bind address (default: 127.0.0.1; a non-loopback one needs "
                        "SPECACTOR_HTTP_TOKEN; env SPECACTOR_HTTP_HOST)")
    parser.add_argument("--port", type=int, help="the HTTP port, 0 for any free one (default: 8765; env "
                        "SPECACTOR_HTTP_PORT)")
    parser.add_argument("--workers", type=int, help="HTTP server processes sharing the port, 1 for a single "
                        "process (default: the number of cores; env SPECACTOR_HTTP_WORKERS)")


def flags_of(args: argparse.Namespace) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    pairs = {"root": "root", "log_level": "log_level", "session_log_dir": "session_log.dir",
             "host": "http.host", "port": "http.port", "workers": "http.workers"}
    for attr, key in pairs.items():
        if getattr(args, attr, None) is not None:
            flags[key] = getattr(args, attr)
    if getattr(args, "toolsets", None) is not None:  # an empty list is an error, not "the default"
        flags["toolsets"] = [t.strip() for t in args.toolsets.split(",") if t.strip()]
    if getattr(args, "no_session_log", None):
        flags["session_log.enabled"] = False
    if getattr(args, "debug", None):
        flags["debug"] = True
        flags.setdefault("log_level", "debug")
    return flags


def resolve(args: argparse.Namespace) -> Config | None:
    """Load and announce the settings; None (after printing why) when they are invalid."""
    settings = resolve_settings(args)
    return None if settings is None else settings.config


def resolve_settings(args: argparse.Namespace) -> Settings | None:
    """`resolve`, keeping where each setting came from for errors found while starting."""
    try:
        settings = load_settings(flags_of(args), config_file=getattr(args, "config", None))
    except ConfigError as err:
        print(f"specactor: {err}", file=sys.stderr)
        return None
    logsetup.configure(settings.config.log_level)
    if settings.config.debug:
        log.debug("resolved configuration", config=settings.config.redacted())
    return settings


def run_server(config: Config, http: bool, extra: Callable[..., None] | None = None, *,
               name: str | None = None, sources: Sources | None = None) -> int:
    """Build the app and serve it on stdio or HTTP; the process's exit status.

    A `ConfigError` found while starting (a port in use, a log folder that cannot be written)
    is printed as one line naming the setting and, given `sources`, where it came from: 2.
    """
    import trio  # here, not at the top: `specactor hook` and `specactor context` must not pay for it

    from specactor import app as application
    from specactor.concurrency.tasks import one_blas_thread

    one_blas_thread()  # before numpy's first import; the HTTP workers and pool workers inherit it
    kwargs = {"name": name} if name else {}
    workers = http and config.http.worker_count > 1
    built = None if workers else application.build(config, extra, defer=not http, **kwargs)
    try:
        if http:
            try:
                import hypercorn  # noqa: F401
                import prometheus_client  # noqa: F401
            except ModuleNotFoundError as err:
                print(f"specactor: the HTTP transport needs the [http] extra ({err.name} is missing): "
                      "from a clone of specactor, pip install '.[http]'", file=sys.stderr)
                return 2
            if built is None:  # several processes on one socket: this one only supervises them
                from specactor.actors.http_workers import HttpWorkers

                status: int = trio.run(HttpWorkers(config, extra, name).serve)
                return status
            status = trio.run(application.serve_http, built)
            return status
        assert built is not None
        from specactor.actors.stdio import StdioFds

        if os.isatty(0):  # a person, not an assistant: say what the silence means (never on stdout)
            print(TTY, file=sys.stderr, flush=True)
        fds = StdioFds.claim()
        return trio.run(application.serve_stdio, built, fds)
    except KeyboardInterrupt:  # pragma: no cover - a second Ctrl-C during shutdown
        return 0
    except BaseException as exc:
        from specactor.actors.supervisor import describe, root_cause

        cause = root_cause(exc)
        if isinstance(cause, ConfigError):
            if cause.source is None and cause.setting is not None and sources is not None:
                cause.source = sources.of(cause.setting)
            print(f"specactor: {cause}", file=sys.stderr, flush=True)
            return 2
        log.critical("specactor failed", error=describe(cause))
        return 1


def worker_main() -> int:
    """One worker of `serve --http --workers N` (`actors.http_workers` starts it): the parent's
    handoff on stdin -> Config -> trio.run(app.serve_http) on the inherited socket, until SIGTERM
    or the parent is gone. A setting it cannot use goes back to the parent, which prints it once."""
    import itertools

    import msgspec
    import trio

    from specactor import app as application
    from specactor.actors import http_workers as hw
    from specactor.concurrency import peer
    from specactor.protocol.input_required import StateSigner

    handoff = hw.read_handoff()
    config = msgspec.convert(handoff.config, Config)
    if config.pool.workers is None:  # the server processes share the cores: each gets its share of pool workers
        share = available_cores() // config.http.worker_count
        config = msgspec.structs.replace(config, pool=msgspec.structs.replace(config.pool, workers=share))
    logsetup.configure(config.log_level)
    # server-to-client request ids must differ between workers: a reply may reach another one
    peer._ids = itertools.count((handoff.index + 1) << 40)
    built = application.build(config, hw.imported(handoff.extra), name=handoff.name or SERVER_NAME)
    built.core.signer = StateSigner(bytes.fromhex(handoff.secret))  # a requestState opens on any worker
    try:
        http = msgspec.structs.replace(config.http, port=handoff.port)
        sock = hw.bind(http, listen=True)  # beside the parent's and the other workers' (SO_REUSEPORT)
        role = application.WorkerRole(sock.fileno(), Path(handoff.run_dir), handoff.index,
                                      lambda tools: hw.answer(hw.Ready(tools=tools)), hw.parent_gone)
        status: int = trio.run(application.serve_http, built, role)
        return status
    except KeyboardInterrupt:  # pragma: no cover
        return 0
    except BaseException as exc:
        from specactor.actors.supervisor import describe, root_cause

        cause = root_cause(exc)
        if isinstance(cause, ConfigError):
            hw.answer(hw.Ready(error=cause.message, setting=cause.setting, source=cause.source))
            return 2
        log.critical("HTTP worker failed", error=describe(cause))
        return 1


# Commands with parsers of their own, imported only when run (a hook must not pay for the server's imports).
DELEGATED: dict[str, tuple[str, str]] = {
    "context": ("specactor.context.command", "main"),
    "hook": ("specactor.hooks.run", "hook_main"),
    "install": ("specactor.install", "install_main"),
    "uninstall": ("specactor.install", "uninstall_main"),
    "tools": ("specactor.adapters.tools_command", "tools_main"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in DELEGATED:
        import importlib

        module, name = DELEGATED[argv[0]]
        run: Callable[[list[str]], int] = getattr(importlib.import_module(module), name)
        return run(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "serve":
        settings = resolve_settings(args)
        if settings is None:
            return 2
        return run_server(settings.config, bool(args.http), sources=settings.sources)
    if args.command == "http-worker":
        return worker_main()
    if args.command == "demo":
        from specactor.demo import main as demo_main

        return demo_main()
    _parser().print_help(sys.stderr)
    return 2
