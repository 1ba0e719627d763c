"""The HTTP floor: the least a hypercorn (trio worker) + msgspec Streamable HTTP server can do.

    python -m bench.peers.floor_http --port 0

The same web server specactor embeds (hypercorn's trio worker, h11), with a bare ASGI app on
`/mcp`: a POST's body is decoded with msgspec and answered by `bench.peers.floor.handle` as
plain JSON (`initialize` gets a fresh `Mcp-Session-Id`, `tools/call` echo gets specactor's
reply shape, notifications get 202). No header checks, no session table, no dispatcher: it
bounds from below what any hypercorn-on-trio MCP server can do on this machine. The port is
announced on stderr as a JSON line shaped like specactor's (`"urls": [...]`); SIGTERM
or SIGINT stops it cleanly (exit 0).
"""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import sys
from typing import Any

import msgspec
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from bench.peers.floor import decoder, handle


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    headers: list[tuple[bytes, bytes]] = []
    status, body = 202, b""
    if scope["method"] == "POST":
        try:
            req = decoder.decode(b"".join(chunks))
        except msgspec.DecodeError:
            req = None
        if req is None:
            status, body = 400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
        elif req.id is not None:
            status, body = 200, handle(req)
            headers.append((b"content-type", b"application/json"))
            if req.method == "initialize":
                headers.append((b"mcp-session-id", secrets.token_hex(16).encode()))
    elif scope["method"] != "DELETE":
        status = 405
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _terminated() -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            return


async def main_async(host: str, port: int) -> None:
    asgi: Any = app
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 1.0
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(lambda task_status: serve(asgi, config, shutdown_trigger=_terminated,
                                                              task_status=task_status))
        print(json.dumps({"msg": "floor started", "urls": [f"{b}/mcp" for b in binds]}), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.floor_http")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    trio.run(main_async, args.host, args.port)


if __name__ == "__main__":
    main()
