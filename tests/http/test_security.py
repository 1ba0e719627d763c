"""Streamable HTTP security: DNS-rebinding guards (Host, Origin), the bearer token, refusing a
public bind without one, the body size limit, and error bodies that reveal nothing internal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

from tests.http.support import (
    BASE_HEADERS,
    ROOT,
    http_server,
    init_request,
    initialize,
    modern_headers,
    modern_params,
    request,
    server_env,
    session_headers,
    subprocess_server,
)

TOKEN = "s3cret-token-for-tests"


async def post_init(client: httpx.AsyncClient, **headers: str) -> httpx.Response:
    with trio.fail_after(10):
        return await client.post("/mcp", json=init_request(), headers={**BASE_HEADERS, **headers})


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:80", "localhost.evil.example.com",
                                  "127.0.0.1.nip.io", ""])
async def test_a_foreign_host_header_is_421(tmp_path: Path, host: str) -> None:
    async with http_server(tmp_path) as srv:
        resp = await post_init(srv.client, host=host)
        assert resp.status_code == 421
        assert "mcp-session-id" not in resp.headers
        assert srv.transport.sessions == {}


@pytest.mark.parametrize("origin", ["http://evil.example.com", "https://localhost.evil.example.com", "null",
                                    "file://", "http://127.0.0.1.nip.io"])
async def test_a_foreign_origin_is_403(tmp_path: Path, origin: str) -> None:
    async with http_server(tmp_path) as srv:
        resp = await post_init(srv.client, origin=origin)
        assert resp.status_code == 403
        assert srv.transport.sessions == {}


async def test_the_conformance_rebinding_probe_is_refused(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        resp = await post_init(srv.client, host="evil.example.com", origin="http://evil.example.com")
        assert 400 <= resp.status_code < 500


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1", "[::1]"])
async def test_loopback_host_and_origin_headers_are_accepted(tmp_path: Path, name: str) -> None:
    async with http_server(tmp_path) as srv:
        with_port = await post_init(srv.client, host=f"{name}:{srv.port}", origin=f"http://{name}:{srv.port}")
        bare = await post_init(srv.client, host=name, origin=f"https://{name}")
        assert with_port.status_code == 200, with_port.text
        assert bare.status_code == 200, bare.text


async def test_configured_hosts_and_origins_are_accepted(tmp_path: Path) -> None:
    async with http_server(tmp_path, allowed_hosts=["mcp.example.com"],
                           allowed_origins=["https://app.example.com"]) as srv:
        resp = await post_init(srv.client, host="mcp.example.com", origin="https://app.example.com")
        assert resp.status_code == 200, resp.text
        other = await post_init(srv.client, host="mcp.example.com", origin="https://other.example.com")
        assert other.status_code == 403


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", f"Basic {TOKEN}", "Bearer", f"bearer{TOKEN}"])
async def test_without_the_right_bearer_token_the_answer_is_401_with_www_authenticate(
        tmp_path: Path, authorization: str | None) -> None:
    async with http_server(tmp_path, token=TOKEN) as srv:
        headers = {} if authorization is None else {"authorization": authorization}
        resp = await post_init(srv.client, **headers)
        assert resp.status_code == 401
        assert resp.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in resp.text
        with trio.fail_after(10):
            assert (await srv.client.get("/metrics", headers=headers)).status_code == 401


async def test_the_right_bearer_token_is_admitted(tmp_path: Path) -> None:
    async with http_server(tmp_path, token=TOKEN) as srv:
        srv.client.headers["authorization"] = f"Bearer {TOKEN}"
        resp = await post_init(srv.client)
        assert resp.status_code == 200
        sid = resp.headers["mcp-session-id"]
        with trio.fail_after(10):
            listed = await srv.client.post("/mcp", json=request("tools/list"), headers=session_headers(sid))
            assert listed.status_code == 200
            assert (await srv.client.get("/metrics")).status_code == 200
        # health checks stay open: load balancers carry no token
        del srv.client.headers["authorization"]
        with trio.fail_after(10):
            assert (await srv.client.get("/healthz")).status_code == 200


@pytest.mark.slow
async def test_serve_refuses_a_public_bind_without_a_token(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "specactor", "serve", "--http", "--host", "0.0.0.0", "--port", "0",
            "--root", str(tmp_path), "--no-session-log"]
    with trio.fail_after(20):
        done = await trio.run_process(args, cwd=tmp_path, env=server_env(), stdin=subprocess.DEVNULL,
                                      capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode != 0
    assert b"SPECACTOR_HTTP_TOKEN" in done.stderr
    assert done.stdout == b""


@pytest.mark.slow
async def test_serve_binds_a_public_address_when_a_token_is_set(tmp_path: Path) -> None:
    args = ["-m", "specactor", "serve", "--http", "--host", "0.0.0.0", "--port", "0", "--root", str(tmp_path),
            "--no-session-log"]
    async with subprocess_server(args, server_env(SPECACTOR_HTTP_TOKEN=TOKEN), tmp_path) as server:
        started = await server.record(lambda r: r.get("msg") == "specactor started")
        port = int(re.findall(r":(\d+)/mcp", started["urls"][0])[0])
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            with trio.fail_after(10):
                assert (await client.post("/mcp", json=init_request(), headers=BASE_HEADERS)).status_code == 401
        server.proc.terminate()
        with trio.fail_after(15):
            assert await server.proc.wait() == 0


def big_echo(size: int) -> bytes:
    return json.dumps(request("tools/call", {"name": "echo", "arguments": {"text": "x" * size}})).encode()


async def test_a_body_over_max_body_bytes_is_413(tmp_path: Path) -> None:
    async with http_server(tmp_path, max_body_bytes=1024) as srv:
        sid = await initialize(srv.client)
        with trio.fail_after(10):
            small = await srv.client.post("/mcp", content=big_echo(100), headers=session_headers(sid))
            declared = await srv.client.post("/mcp", content=big_echo(4000), headers=session_headers(sid))
        assert small.status_code == 200
        assert declared.status_code == 413
        assert declared.json()["error"]["code"] == -32600


async def test_a_chunked_body_that_grows_past_max_body_bytes_is_413(tmp_path: Path) -> None:
    async with http_server(tmp_path, max_body_bytes=1024) as srv:
        sid = await initialize(srv.client)
        body = big_echo(4000)

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the server must count
            for i in range(0, len(body), 512):
                yield body[i:i + 512]

        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", content=chunks(), headers=session_headers(sid))
        assert "content-length" not in resp.request.headers
        assert resp.status_code == 413


BAD_POSTS: list[tuple[bytes, dict[str, str]]] = [
    (b"{not json", BASE_HEADERS),
    (b"null", BASE_HEADERS),
    (b"[]", BASE_HEADERS),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', BASE_HEADERS),
    (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', BASE_HEADERS),
    (b"{}", {**BASE_HEADERS, "content-type": "text/plain"}),
    (b"{}", {**BASE_HEADERS, "accept": "text/event-stream"}),
    (json.dumps(request("tools/list")).encode(), session_headers("no-such-session")),
    (json.dumps(request("tools/list")).encode(), session_headers("x", version="bogus")),
    (b"{not", modern_headers("tools/list")),
    (json.dumps(request("tools/list", {"_meta": [1]})).encode(), modern_headers("tools/list")),
    (json.dumps(request("tools/list", modern_params())).encode(), modern_headers("tools/list", **{"mcp-method": "x"})),
    (json.dumps(request("tools/call", modern_params({"name": "echo"}))).encode(),
     modern_headers("tools/call", "=?base64?!?=")),
    (json.dumps(request("tools/call", modern_params({"name": "echo", "arguments": {"text": 5}}))).encode(),
     modern_headers("tools/call", "echo")),
]


def reveals_internals(text: str) -> list[str]:
    return [p for p in ("Traceback", 'File "', str(ROOT), "/site-packages/", ".py\"", ".py'", "specactor/")
            if p in text]


async def test_error_bodies_never_carry_tracebacks_or_file_paths(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        sid = await initialize(srv.client)
        seen = []
        with trio.fail_after(20):
            for body, headers in BAD_POSTS:
                resp = await srv.client.post("/mcp", content=body, headers=headers)
                seen.append(resp)
            seen.append(await srv.client.post("/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
                                              b'"params":{"name":"echo","arguments":{"text":[]}}}',
                                              headers=session_headers(sid)))
            seen += [await srv.client.get(path) for path in ("/nope", "/mcp/../../etc/passwd")]
            seen.append(await srv.client.request("PUT", "/mcp"))
        for resp in seen:
            assert resp.status_code < 500, (resp.request.content[:80], resp.status_code, resp.text)
            assert not reveals_internals(resp.text), resp.text
        assert sum(r.status_code >= 400 for r in seen) >= len(BAD_POSTS)
