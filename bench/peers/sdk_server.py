"""The SDK peer: the official MCP Python SDK serving the bench's `echo` and `add` tools, and `spec_list`.

    python -m bench.peers.sdk_server                       # stdio
    python -m bench.peers.sdk_server --http --port 0       # Streamable HTTP at /mcp (uvicorn)
    python -m bench.peers.sdk_server --root WS             # spec_list reads WS/.airsspec (default: cwd)

It mirrors the typed fixtures of `specactor.testing.everything` (`echo {text}`, `add {a, b}`)
so that `bench` compares like with like: same JSON-RPC requests, same framing, same tool work.
`spec_list {state?, category?}` mirrors specactor's AirsSpec tool of that name (`bench.pertool`
times both on the same workspace) the way a straightforward SDK-based server would write it:
on every call, read each `.airsspec/specs/*/spec.md`, parse its YAML front matter (PyYAML's
libyaml loader when present, as python-frontmatter does) and return id, title, state, category
and created_at, no cache.

Over HTTP the app is the SDK's own `streamable_http_app()` (stateful sessions for the
2025 era; the SDK routes 2026-07-28 stateless POSTs itself) under uvicorn, exactly what
`MCPServer.run("streamable-http")` does, except that the socket is bound here so that
`--port 0` works: the port is announced on stderr as a JSON line shaped like specactor's
(`{"msg": "sdk-peer started", "urls": ["http://127.0.0.1:PORT/mcp"]}`). Replies are plain
JSON (`json_response=True`, as specactor sends a ready reply) unless `--sse` is given.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import socket
import sys
from pathlib import Path
from typing import Any

import yaml
from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-peer", log_level="WARNING")
ROOT = [Path.cwd()]  # the workspace spec_list reads (--root)
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def _stamp(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


@server.tool()
def spec_list(state: str | None = None, category: str | None = None) -> dict[str, Any]:
    """List all specs with optional filtering."""
    specs, invalid = [], []
    for path in sorted((ROOT[0] / ".airsspec" / "specs").glob("*/spec.md")):
        try:
            _, head, _ = path.read_text(encoding="utf-8").split("---\n", 2)
            meta = yaml.load(head, Loader=Loader)
        except (OSError, ValueError, yaml.YAMLError) as err:
            invalid.append({"id": path.parent.name, "error": str(err)})
            continue
        if (state is None or meta.get("state") == state) and (category is None or meta.get("category") == category):
            specs.append({"id": path.parent.name, "title": meta.get("title"), "state": meta.get("state"),
                          "category": meta.get("category"), "created_at": _stamp(meta.get("created_at"))})
    out: dict[str, Any] = {"specs": specs, "total": len(specs)}
    if invalid:
        out["invalid"] = invalid
    return out


def serve_http(host: str, port: int, *, sse: bool) -> None:
    import anyio
    import uvicorn

    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
    # and uvicorn writes head and body separately, so without it every keep-alive reply would
    # wait out the client's 40 ms delayed ACK (Nagle). uvicorn's own bind gets this right.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    bound = sock.getsockname()[1]
    app = server.streamable_http_app(json_response=not sse, host=host)
    config = uvicorn.Config(app, log_level="warning", backlog=2048)
    print(json.dumps({"msg": "sdk-peer started", "urls": [f"http://{host}:{bound}/mcp"]}),
          file=sys.stderr, flush=True)
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.sdk_server")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (announced on stderr)")
    parser.add_argument("--sse", action="store_true", help="answer POSTs with SSE streams, the SDK's default")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the workspace spec_list reads (default: cwd)")
    args = parser.parse_args(argv)
    ROOT[0] = args.root.resolve()
    if args.http:
        serve_http(args.host, args.port, sse=args.sse)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
