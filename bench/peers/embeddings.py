"""A fake OpenAI-compatible embeddings endpoint that answers after a fixed, asynchronous delay.

    python -m bench.peers.embeddings [--delay-ms 20] [--dims 256] [--port 0]

`POST <anything>/embeddings` with `{"model": ..., "input": str | [str, ...]}` is answered `--delay-ms`
after it arrived (`trio.sleep_until`, so any number of requests wait at once, none serialised; the
answer is computed within that delay, so a batch of 100 is not answered later than one input), with
`{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]}], "model", "usage"}`
(with `"encoding_format": "base64"`, each embedding is its float32 numbers in base64, as OpenAI answers):
one deterministic unit vector per input, a hashed bag of words (`--dims` buckets, word counts,
normalised). Raw HTTP/1.1 on trio sockets, keep-alive, one task per connection; the port (0:
any free one) is announced as one JSON line on stdout, `{"url": "http://127.0.0.1:<port>/v1"}`.
It counts requests and inputs; `GET /stats` answers them as JSON.
"""

from __future__ import annotations

import argparse
import base64
import math
import re
import struct
import sys
import zlib
from typing import Any

import msgspec
import trio

_WORD = re.compile(r"[^\W_]+")
MAX_HEAD = 64 * 1024


class _Request(msgspec.Struct):
    input: str | list[str]
    model: str = "fake"
    encoding_format: str = "float"


_decode = msgspec.json.Decoder(_Request).decode
_encode = msgspec.json.Encoder().encode


def embed(text: str, dims: int) -> list[float]:
    """A unit vector: word counts hashed (crc32) into `dims` buckets; a text without words gets bucket 0."""
    vec = [0.0] * dims
    for word in _WORD.findall(text.casefold()) or [""]:
        vec[zlib.crc32(word.encode()) % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec]


def as_base64(vector: list[float]) -> str:
    """As OpenAI answers `encoding_format: base64`: the float32 numbers, little-endian, in base64."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


class Endpoint:
    def __init__(self, delay_s: float, dims: int) -> None:
        self.delay_s = delay_s
        self.dims = dims
        self.requests = 0
        self.inputs = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def stats(self) -> dict[str, int]:
        return {"requests": self.requests, "inputs": self.inputs, "max_in_flight": self.max_in_flight}

    async def answer(self, method: bytes, path: bytes, body: bytes) -> tuple[int, bytes]:
        if method == b"GET" and path.endswith(b"/stats"):
            return 200, _encode(self.stats())
        if method != b"POST" or not path.rstrip(b"/").endswith(b"/embeddings"):
            return 404, b'{"error": {"message": "not found"}}'
        try:
            req = _decode(body)
        except msgspec.DecodeError as err:
            return 400, _encode({"error": {"message": str(err)}})
        texts = [req.input] if isinstance(req.input, str) else req.input
        self.requests += 1
        self.inputs += len(texts)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        due = trio.current_time() + self.delay_s
        try:
            # The answer is made within the delay, and sent when it is up: the endpoint answers `delay`
            # after the request, whatever the batch (computed after it, 100 inputs added ~2 ms).
            vectors = [embed(t, self.dims) for t in texts]
            encoded = req.encoding_format == "base64"
            data = [{"object": "embedding", "index": i, "embedding": as_base64(v) if encoded else v}
                    for i, v in enumerate(vectors)]
            tokens = sum(len(t.split()) for t in texts)
            payload = _encode({"object": "list", "data": data, "model": req.model,
                               "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
            await trio.sleep_until(due)
        finally:
            self.in_flight -= 1
        return 200, payload

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        buf = b""
        async with stream:
            while True:
                end = buf.find(b"\r\n\r\n")
                while end < 0:
                    if len(buf) > MAX_HEAD:
                        return
                    data = await stream.receive_some(1 << 16)
                    if not data:
                        return
                    buf += data
                    end = buf.find(b"\r\n\r\n")
                lines = buf[:end].split(b"\r\n")
                method, path, _ = ([*lines[0].split(b" ", 2), b"", b""])[:3]
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get(b"content-length", b"0"))
                buf = buf[end + 4:]
                while len(buf) < length:
                    data = await stream.receive_some(1 << 16)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:length], buf[length:]
                status, payload = await self.answer(method, path, body)
                reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}[status]
                await stream.send_all(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                                      % (status, reason, len(payload)) + payload)
                if headers.get(b"connection", b"").lower() == b"close":
                    return


async def serve(endpoint: Endpoint, host: str, port: int,
                task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(port, host=host, backlog=1024)
    bound = listeners[0].socket.getsockname()[1]
    task_status.started(bound)

    async def handler(stream: trio.SocketStream) -> None:
        try:
            await endpoint.serve_connection(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass

    await trio.serve_listeners(handler, listeners)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.embeddings", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    endpoint = Endpoint(args.delay_ms / 1000, args.dims)

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            port: Any = await nursery.start(serve, endpoint, args.host, args.port)
            sys.stdout.write(_encode({"url": f"http://{args.host}:{port}/v1"}).decode() + "\n")
            sys.stdout.flush()

    try:
        trio.run(run)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
