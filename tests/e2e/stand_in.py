"""Stand-in model APIs on 127.0.0.1 for the real clients: Anthropic Messages and OpenAI chat completions.

A `StandIn` is a threaded HTTP server that records every request it gets (method, path, JSON body)
and answers each POST with what its `responder` returns for the body: a `Reply` (text, or one tool
call). Streaming requests get the API's server-sent events, others one JSON document. Any other
path (telemetry, model lists) is recorded and answered with an empty JSON object or 404, so a
client never waits on the network. Nothing here knows about specactor.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """What the model says: `text`, or a call of `tool` with `arguments` (then `text` is ignored)."""

    text: str = "ok"
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    body: Any  # the decoded JSON body, or None


Responder = Callable[[Any], Reply]


class StandIn:
    """A model API on an ephemeral port; `with StandIn("anthropic", responder) as api: api.url`."""

    def __init__(self, dialect: str, responder: Responder) -> None:
        if dialect not in ("anthropic", "openai"):
            raise ValueError(dialect)
        self.dialect = dialect
        self.responder = responder
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"stand-in-{dialect}", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def record(self, entry: Recorded) -> None:
        with self._lock:
            self.requests.append(entry)

    def posts(self, suffix: str) -> list[Any]:
        """The JSON bodies of the POSTs whose path (without query) ends with `suffix`, in order."""
        with self._lock:
            return [r.body for r in self.requests if r.method == "POST" and r.path.split("?")[0].endswith(suffix)]

    def answer(self, body: Any) -> tuple[str, bytes]:
        """The content type and bytes answering a model request."""
        reply = self.responder(body)
        stream = isinstance(body, dict) and body.get("stream") is True
        model = body.get("model", "stand-in") if isinstance(body, dict) else "stand-in"
        if self.dialect == "anthropic":
            if stream:
                return "text/event-stream", b"".join(anthropic_events(reply, model))
            return "application/json", json.dumps(anthropic_message(reply, model)).encode()
        if stream:
            return "text/event-stream", b"".join(openai_chunks(reply, model))
        return "application/json", json.dumps(openai_completion(reply, model)).encode()


def _handler(api: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> Any:
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size) if size else b""
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return None

        def _send(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = self._body()
            api.record(Recorded("POST", self.path, body))
            path = self.path.split("?")[0]
            if path.endswith(("/messages", "/chat/completions")):
                self._send(200, *api.answer(body))
            elif path.endswith("/count_tokens"):
                self._send(200, "application/json", b'{"input_tokens": 100}')
            else:
                self._send(200, "application/json", b"{}")

        def do_GET(self) -> None:
            api.record(Recorded("GET", self.path, None))
            self._send(404, "application/json", b'{"error": "not here"}')

    return Handler


# ---------------------------------------------------------------------------- Anthropic Messages


def _usage() -> dict[str, int]:
    return {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def _anthropic_block(reply: Reply) -> dict[str, Any]:
    if reply.tool:
        return {"type": "tool_use", "id": "toolu_standin_1", "name": reply.tool, "input": reply.arguments}
    return {"type": "text", "text": reply.text}


def anthropic_message(reply: Reply, model: str) -> dict[str, Any]:
    return {"id": "msg_standin", "type": "message", "role": "assistant", "model": model,
            "content": [_anthropic_block(reply)], "stop_reason": "tool_use" if reply.tool else "end_turn",
            "stop_sequence": None, "usage": _usage()}


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def anthropic_events(reply: Reply, model: str) -> Iterator[bytes]:
    start = anthropic_message(reply, model) | {"content": [], "stop_reason": None}
    yield _sse("message_start", {"type": "message_start", "message": start})
    if reply.tool:
        block = _anthropic_block(reply) | {"input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(reply.arguments)}
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": reply.text}
    yield _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
    yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta", "usage": {"output_tokens": 5},
                                 "delta": {"stop_reason": "tool_use" if reply.tool else "end_turn",
                                           "stop_sequence": None}})
    yield _sse("message_stop", {"type": "message_stop"})


# ---------------------------------------------------------------------------- OpenAI chat completions


def _openai_message(reply: Reply) -> dict[str, Any]:
    if reply.tool:
        call = {"id": "call_standin_1", "type": "function",
                "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": reply.text}


def openai_completion(reply: Reply, model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": _openai_message(reply),
                         "finish_reason": "tool_calls" if reply.tool else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def openai_chunks(reply: Reply, model: str) -> Iterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    if reply.tool:
        call = {"index": 0, "id": "call_standin_1", "type": "function",
                "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)}}
        yield _sse(None, chunk({"role": "assistant", "content": None, "tool_calls": [call]}, None))
        yield _sse(None, chunk({}, "tool_calls"))
    else:
        yield _sse(None, chunk({"role": "assistant", "content": reply.text}, None))
        yield _sse(None, chunk({}, "stop"))
    yield _sse(None, {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0, "model": model,
                      "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    yield b"data: [DONE]\n\n"
