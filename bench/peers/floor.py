"""The floor: the least a trio + msgspec stdio MCP server can do, and nothing more.

    python -m bench.peers.floor

Newline-delimited JSON-RPC on stdin/stdout through `trio.lowlevel.FdStream`, decoded and
encoded with msgspec. It answers `initialize` with a valid InitializeResult and `tools/call`
for `echo` with the same result shape as specactor (`{success, data}` as text and as
structured content); any other request gets "method not found", notifications are ignored.
Each request runs in its own task (as a real server's would), and replies share one lock on
stdout, so pipelined requests are served concurrently, like specactor's. No validation, no
logging, no session state: a lower bound, not a server.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
import trio
import trio.lowlevel

PROTOCOL_VERSION = "2025-11-25"


class Params(msgspec.Struct):
    name: str = ""
    arguments: dict[str, Any] = {}
    protocolVersion: str = PROTOCOL_VERSION


class Request(msgspec.Struct):
    method: str
    id: int | str | None = None
    params: Params | None = None


class EchoData(msgspec.Struct):
    text: str


class Envelope(msgspec.Struct):
    success: bool
    data: EchoData


decoder = msgspec.json.Decoder(Request)
encoder = msgspec.json.Encoder()


def initialize_result(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "floor", "version": "0.0.0"},
    }


def handle(req: Request) -> bytes:
    """The encoded reply to one request."""
    params = req.params or Params()
    if req.method == "tools/call" and params.name == "echo":
        envelope = Envelope(success=True, data=EchoData(text=str(params.arguments.get("text", ""))))
        text = encoder.encode(envelope).decode()
        result: Any = {"content": [{"type": "text", "text": text}], "structuredContent": envelope}
        return encoder.encode({"jsonrpc": "2.0", "id": req.id, "result": result})
    if req.method == "initialize":
        return encoder.encode({"jsonrpc": "2.0", "id": req.id,
                               "result": initialize_result(params.protocolVersion)})
    what = f"tool {params.name!r}" if req.method == "tools/call" else f"method {req.method!r}"
    error = {"code": -32601, "message": f"Not served by the floor: {what}"}
    return encoder.encode({"jsonrpc": "2.0", "id": req.id, "error": error})


async def serve() -> None:
    reader = trio.lowlevel.FdStream(os.dup(0))
    writer = trio.lowlevel.FdStream(os.dup(1))
    lock = trio.Lock()

    async def respond(line: bytes) -> None:
        try:
            req = decoder.decode(line)
        except msgspec.DecodeError:
            return
        if req.id is None:
            return
        reply = handle(req)
        async with lock:
            await writer.send_all(reply + b"\n")

    buf = b""
    async with trio.open_nursery() as nursery:
        while True:
            data = await reader.receive_some(65536)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    nursery.start_soon(respond, line)


def main() -> None:
    trio.run(serve)


if __name__ == "__main__":
    main()
