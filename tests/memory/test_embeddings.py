"""Semantic scores from an OpenAI-compatible /v1/embeddings endpoint, played by a local HTTP server
started here: cosine ranking, and how failures map to PROVIDER_ERROR and RATE_LIMITED."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

from bench.peers.embeddings import as_base64
from specactor.actors.runtime import TrioRuntime
from specactor.domain.memory import embeddings as emb
from specactor.domain.retry_after import DEFAULT_RETRY_AFTER
from specactor.testing import MemoryClient, open_memory_server
from tests.memory.conftest import call, ok, server_config

CONCEPTS = {"cat": 0, "kitten": 0, "feline": 0, "dog": 1, "puppy": 1, "car": 2, "automobile": 2}


def vector(text: str) -> list[float]:
    """A toy embedding: one dimension per concept; other words carry no meaning."""
    out = [0.01] * 4
    for word in text.lower().split():
        if word.strip(".,") in CONCEPTS:
            out[CONCEPTS[word.strip(".,")]] += 1.0
    return out


@dataclass
class Endpoint:
    """What the fake endpoint answers, one scripted reply per request, then `default`. It ignores
    `encoding_format` (JSON numbers whatever was asked) unless `base64` (then it answers as asked)
    or `strict` (then base64 is refused with a 400 naming the field, as a strict validator would)."""

    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    default: tuple[int, dict[str, str]] = (200, {})
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    base64: bool = False
    strict: bool = False


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            state.requests.append({"path": self.path, "body": body, "auth": self.headers.get("authorization")})
            status, headers = state.script.pop(0) if state.script else state.default
            asked = body.get("encoding_format", "float")
            if state.strict and asked != "float":
                status, headers = 400, {}
            encoded = state.base64 and asked == "base64"
            payload = (json.dumps({"data": [{"index": i, "embedding": as_base64(vector(t)) if encoded else vector(t)}
                                            for i, t in enumerate(body["input"])]}) if status == 200
                       else json.dumps({"error": {"message": f"encoding_format: unexpected value {asked!r}"}})
                       if state.strict and asked != "float" else "nope").encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=lambda: server.serve_forever(poll_interval=0.05), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()
    thread.join(10)


class RecordingRuntime(TrioRuntime):
    """The real worker pool; `sleep` records how long the retry logic asked to wait, and returns."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await trio.lowlevel.checkpoint()


@pytest.fixture
async def semantic(env: Path, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[MemoryClient]:
    monkeypatch.setenv("SPECACTOR_EMBEDDINGS_URL", endpoint.url)
    monkeypatch.setenv("SPECACTOR_EMBEDDINGS_API_KEY", "sk-test")
    monkeypatch.setenv("SPECACTOR_MEMORY_MODE", "semantic")
    async with open_memory_server(server_config(env)) as client:
        client.app.dispatcher.runtime = RecordingRuntime()
        await client.initialize()
        yield client


def sleeps(client: MemoryClient) -> list[float]:
    runtime = client.app.dispatcher.runtime
    assert isinstance(runtime, RecordingRuntime)
    return runtime.sleeps


async def test_semantic_search_ranks_by_cosine_of_the_endpoints_vectors(semantic: MemoryClient,
                                                                        endpoint: Endpoint) -> None:
    cat = await ok(semantic, "memory_add", {"content": "the cat sleeps"})
    await ok(semantic, "memory_add", {"content": "the dog barks"})
    found = await ok(semantic, "memory_search", {"query": "kitten"})
    assert [r["memoryId"] for r in found["results"]] == [cat["memoryId"]] and found["results"][0]["score"] > 0.7
    assert endpoint.requests[0] == {"path": "/v1/embeddings", "auth": "Bearer sk-test",
                                    "body": {"model": "text-embedding-3-small", "input": ["the cat sleeps"],
                                             "encoding_format": "base64"}}


async def test_vectors_sent_as_base64_rank_as_the_same_vectors_sent_as_numbers(semantic: MemoryClient,
                                                                            endpoint: Endpoint) -> None:
    endpoint.base64 = True
    cat = await ok(semantic, "memory_add", {"content": "the cat sleeps"})
    await ok(semantic, "memory_add", {"content": "the dog barks"})
    found = await ok(semantic, "memory_search", {"query": "kitten"})
    endpoint.base64 = False
    again = await ok(semantic, "memory_search", {"query": "kitten"})
    assert [r["memoryId"] for r in found["results"]] == [r["memoryId"] for r in again["results"]] == [cat["memoryId"]]
    assert abs(found["results"][0]["score"] - again["results"][0]["score"]) < 1e-6


async def test_an_endpoint_that_refuses_base64_is_asked_for_numbers_from_then_on(semantic: MemoryClient,
                                                                               endpoint: Endpoint) -> None:
    endpoint.strict = True
    cat = await ok(semantic, "memory_add", {"content": "the cat sleeps"})
    found = await ok(semantic, "memory_search", {"query": "kitten"})
    assert [r["memoryId"] for r in found["results"]] == [cat["memoryId"]]
    assert [r["body"]["encoding_format"] for r in endpoint.requests] == ["base64", "float", "float"]
    assert not sleeps(semantic)  # not a retry of the tool: the same request, asked again at once


async def test_the_encoding_setting_asks_for_numbers_from_the_first_request(env: Path, endpoint: Endpoint,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECACTOR_EMBEDDINGS_URL", endpoint.url)
    monkeypatch.setenv("SPECACTOR_EMBEDDINGS_ENCODING", "float")
    async with open_memory_server(server_config(env)) as client:
        await client.initialize()
        await ok(client, "memory_add", {"content": "the cat sleeps"})
    assert [r["body"]["encoding_format"] for r in endpoint.requests] == ["float"]


async def test_hybrid_search_averages_both_scores(env: Path, endpoint: Endpoint,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECACTOR_EMBEDDINGS_URL", endpoint.url)  # hybrid is the default with an endpoint
    async with open_memory_server(server_config(env)) as client:
        await client.initialize()
        cat = await ok(client, "memory_add", {"content": "the cat sleeps"})
        await ok(client, "memory_add", {"content": "a feline naps"})
        found = await ok(client, "memory_search", {"query": "cat", "threshold": 0.0})
        assert found["results"][0]["memoryId"] == cat["memoryId"]
        assert found["results"][0]["score"] > 0.9 and 0.45 < found["results"][1]["score"] < 0.55


async def test_transient_failures_are_retried_with_backoff_until_one_succeeds(semantic: MemoryClient,
                                                                               endpoint: Endpoint) -> None:
    endpoint.script = [(500, {}), (503, {})]
    entry = await ok(semantic, "memory_add", {"content": "the cat sleeps"})
    assert entry["memoryId"] and len(endpoint.requests) == 3
    assert len(sleeps(semantic)) == 2 and all(0 < s <= 2.0 for s in sleeps(semantic))


async def test_an_endpoint_that_keeps_failing_is_provider_error_after_three_retries(semantic: MemoryClient,
                                                                                    endpoint: Endpoint) -> None:
    endpoint.default = (502, {})
    envelope = await call(semantic, "memory_add", {"content": "the cat sleeps"})
    assert envelope["error"]["code"] == "PROVIDER_ERROR" and envelope["error"]["retryable"] is True
    assert envelope["error"]["details"]["status"] == 502
    assert len(endpoint.requests) == 4  # the call and three retries


async def test_a_rate_limit_waits_the_retry_after_it_names(semantic: MemoryClient, endpoint: Endpoint) -> None:
    endpoint.script = [(429, {"Retry-After": "7"})]
    await ok(semantic, "memory_search", {"query": "cat"})
    assert sleeps(semantic) == [7.0] and len(endpoint.requests) == 2


async def test_a_retry_after_longer_than_we_wait_is_rate_limited_with_its_delay(semantic: MemoryClient,
                                                                                 endpoint: Endpoint) -> None:
    endpoint.default = (429, {"Retry-After": "120"})
    err = (await call(semantic, "memory_search", {"query": "cat"}))["error"]
    assert err["code"] == "RATE_LIMITED" and err["retryable"] is True and err["details"]["retryAfter"] == 120.0
    assert len(endpoint.requests) == 1 and sleeps(semantic) == []


async def test_a_refusal_is_provider_error_and_not_retried(semantic: MemoryClient, endpoint: Endpoint) -> None:
    endpoint.default = (401, {})
    err = (await call(semantic, "memory_add", {"content": "x"}))["error"]
    assert err["code"] == "PROVIDER_ERROR" and err["retryable"] is False and "401" in err["message"]
    assert len(endpoint.requests) == 1


async def test_an_unreachable_endpoint_is_provider_error(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("SPECACTOR_EMBEDDINGS_URL", f"http://127.0.0.1:{port}/v1")
    async with open_memory_server(server_config(env)) as client:
        client.app.dispatcher.runtime = RecordingRuntime()
        await client.initialize()
        err = (await call(client, "memory_add", {"content": "x"}))["error"]
        assert err["code"] == "PROVIDER_ERROR" and "unreachable" in err["message"]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert emb.retry_after({"retry-after": "3"}, 0.0) == 3.0
    assert emb.retry_after({}, 0.0) == DEFAULT_RETRY_AFTER
    assert emb.retry_after({"retry-after": "soon"}, 0.0) == DEFAULT_RETRY_AFTER
    assert emb.retry_after({"retry-after": formatdate(1000.0, usegmt=True)}, 990.0) == 10.0
    assert emb.classify(408, {}, b"", 0).kind == "transient" and emb.classify(404, {}, b"", 0).kind == "fatal"


def test_an_unreadable_reply_is_a_fatal_failure() -> None:
    assert isinstance(emb.parse_reply(b"{", 1), emb.Failure)
    assert isinstance(emb.parse_reply(b'{"data": []}', 1), emb.Failure)
    assert emb.parse_reply(b'{"data": [{"index": 1, "embedding": [2]}, {"index": 0, "embedding": [1]}]}', 2) == [
        [1.0], [2.0]]
    # base64: whole little-endian float32 numbers, nothing else
    assert emb.parse_reply(b'{"data": [{"embedding": "AACAPwAAAEA="}]}', 1) == [[1.0, 2.0]]
    for bad in ("AACAPw", "AACA", "", "AACAP!==", "AADAfw=="):  # padding, 3 bytes, empty, not base64, NaN
        failure = emb.parse_reply(b'{"data": [{"embedding": "%s"}]}' % bad.encode(), 1)
        assert isinstance(failure, emb.Failure) and "0 usable vectors for 1" in failure.message, bad
    assert emb.refuses_base64(400, b'{"error": "encoding_format must be float"}')
    assert not emb.refuses_base64(429, b"encoding_format") and not emb.refuses_base64(400, b"bad model")
