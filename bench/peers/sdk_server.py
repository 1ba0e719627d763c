"""The SDK peer: the official MCP Python SDK serving the bench's `echo` and `add` tools over stdio.

    python -m bench.peers.sdk_server

It mirrors the typed fixtures of `specactor.testing.everything` (`echo {text}`, `add {a, b}`)
so that `bench` compares like with like: same JSON-RPC requests, same framing, same tool work.
"""

from __future__ import annotations

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


def main() -> None:
    server.run("stdio")


if __name__ == "__main__":
    main()
