"""The SDK peer: the official MCP Python SDK serving the bench's `echo` and `add` tools.

    python -m bench.peers.sdk_server                       # stdio
    python -m bench.peers.sdk_server --http --port 0       # Streamable HTTP at /mcp (uvicorn)

It mirrors the typed fixtures of `specactor.testing.everything` (`echo {text}`, `add {a, b}`)
so that `bench` compares like with like: same JSON-RPC requests, same framing, same tool work.

Over HTTP the app is the SDK's own `streamable_http_app()` (stateful sessions for the
2025 era; the SDK routes 2026-07-28 stateless POSTs itself) under uvicorn, exactly what
`MCPServer.run("streamable-http")` does, except that the socket is bound here so that
`--port 0` works: the port is announced on stderr as a JSON line shaped like specactor's
(`{"msg": "sdk-peer started", "urls": ["http://127.0.0.1:PORT/mcp"]}`). Replies are plain
JSON (`json_response=True`, as specactor sends a ready reply) unless `--sse` is given.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-peer", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


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
    args = parser.parse_args(argv)
    if args.http:
        serve_http(args.host, args.port, sse=args.sse)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
