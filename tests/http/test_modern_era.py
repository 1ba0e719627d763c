"""Streamable HTTP in the 2026-07-28 era: stateless POSTs whose headers mirror the body, 405 for
GET/DELETE, header encodings, and closing the response stream as the cancel."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from tests.http.support import (
    MODERN,
    Server,
    frames_of,
    http_server,
    modern_call,
    modern_headers,
    modern_params,
    modern_request,
    notification,
    request,
    request_ids,
    structured,
    until,
)

ECHO = {"name": "echo", "arguments": {"text": "stateless"}}
REGION = {"name": "test_x_mcp_header", "arguments": {"region": "eu-west-1"}}


def encoded(value: str) -> str:
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


async def post(srv: Server, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    with trio.fail_after(10):
        resp: httpx.Response = await srv.client.post("/mcp", json=body, headers=headers)
    return resp


def assert_error(resp: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = resp.json()["error"]
    assert error["code"] == code, error
    return error


async def test_a_stateless_tools_call_is_answered_without_a_session(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        body, headers = modern_request("tools/call", ECHO)
        resp = await post(srv, body, headers)
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("application/json")
        assert "mcp-session-id" not in resp.headers
        reply = resp.json()
        assert reply["id"] == body["id"]
        assert reply["result"]["resultType"] == "complete"
        assert reply["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "specactor-everything"
        assert structured(reply) == {"text": "stateless"}
        assert srv.transport.sessions == {}


@pytest.mark.parametrize(("method", "params"), [
    ("server/discover", None),
    ("tools/list", None),
    ("prompts/get", {"name": "test_simple_prompt"}),
    ("resources/read", {"uri": "test://static-text"}),
])
async def test_each_named_and_unnamed_method_is_served_when_its_headers_mirror_the_body(
        tmp_path: Path, method: str, params: dict[str, Any] | None) -> None:
    async with http_server(tmp_path) as srv:
        reply = await modern_call(srv.client, method, params)
        assert reply["result"]["resultType"] == "complete"


async def test_a_mismatching_mcp_method_header_is_400_header_mismatch(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        body = request("tools/call", modern_params(ECHO))
        assert_error(await post(srv, body, modern_headers("tools/list", "echo")), 400, -32020)


async def test_a_missing_mcp_method_header_is_400_header_mismatch(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        headers = modern_headers("tools/list")
        del headers["mcp-method"]
        assert_error(await post(srv, request("tools/list", modern_params()), headers), 400, -32020)


@pytest.mark.parametrize(("method", "params"), [
    ("tools/call", ECHO),
    ("prompts/get", {"name": "test_simple_prompt"}),
    ("resources/read", {"uri": "test://static-text"}),
])
async def test_a_missing_or_mismatching_mcp_name_is_400_header_mismatch(
        tmp_path: Path, method: str, params: dict[str, Any]) -> None:
    async with http_server(tmp_path) as srv:
        body = request(method, modern_params(params))
        assert_error(await post(srv, body, modern_headers(method)), 400, -32020)
        assert_error(await post(srv, body, modern_headers(method, "something-else")), 400, -32020)


async def test_a_protocol_version_header_that_differs_from_the_envelope_is_400(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        body = request("tools/list", modern_params(**{"io.modelcontextprotocol/protocolVersion": "2025-11-25"}))
        assert_error(await post(srv, body, modern_headers("tools/list")), 400, -32020)


async def test_a_modern_post_without_the_meta_envelope_is_400_invalid_params(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        error = assert_error(await post(srv, request("tools/list", {}), modern_headers("tools/list")), 400, -32602)
        assert "_meta" in error["message"]


@pytest.mark.parametrize("method", ["no/such/method", "ping", "logging/setLevel"])
async def test_an_unknown_or_removed_method_is_404_method_not_found(tmp_path: Path, method: str) -> None:
    async with http_server(tmp_path) as srv:
        resp = await post(srv, request(method, modern_params()), modern_headers(method))
        assert_error(resp, 404, -32601)


@pytest.mark.parametrize("verb", ["GET", "DELETE"])
async def test_get_and_delete_with_the_modern_version_header_are_405(tmp_path: Path, verb: str) -> None:
    async with http_server(tmp_path) as srv:
        with trio.fail_after(10):
            resp = await srv.client.request(verb, "/mcp", headers={"mcp-protocol-version": MODERN,
                                                                   "accept": "text/event-stream"})
        assert resp.status_code == 405
        assert resp.headers["allow"] == "POST"


async def test_a_modern_notification_is_accepted_with_202(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        body = notification("notifications/cancelled", modern_params({"requestId": 99}))
        resp = await post(srv, body, modern_headers("notifications/cancelled"))
        assert resp.status_code == 202
        assert resp.content == b""


async def test_base64_encoded_mcp_name_and_method_headers_are_decoded(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        body = request("tools/call", modern_params(ECHO))
        resp = await post(srv, body, modern_headers(encoded("tools/call"), encoded("echo")))
        assert resp.status_code == 200, resp.text
        assert structured(resp.json()) == {"text": "stateless"}
        read = request("resources/read", modern_params({"uri": "test://static-text"}))
        resp = await post(srv, read, modern_headers("resources/read", encoded("test://static-text")))
        assert resp.status_code == 200, resp.text


async def test_malformed_base64_in_a_header_is_400_header_mismatch(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        body = request("tools/call", modern_params(ECHO))
        assert_error(await post(srv, body, modern_headers("tools/call", "=?base64?!!!?=")), 400, -32020)


async def test_an_x_mcp_header_parameter_must_be_mirrored_in_its_mcp_param_header(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        body = request("tools/call", modern_params(REGION))
        ok = await post(srv, body, modern_headers("tools/call", "test_x_mcp_header",
                                                  **{"mcp-param-region": "eu-west-1"}))
        assert ok.status_code == 200, ok.text
        assert ok.json()["result"]["content"][0]["text"] == "region=eu-west-1"
        missing = await post(srv, body, modern_headers("tools/call", "test_x_mcp_header"))
        assert "Mcp-Param-Region" in assert_error(missing, 400, -32020)["message"]
        wrong = await post(srv, body, modern_headers("tools/call", "test_x_mcp_header",
                                                     **{"mcp-param-region": "us-east-1"}))
        assert_error(wrong, 400, -32020)


async def test_a_non_ascii_x_mcp_header_value_travels_base64_encoded(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        args = {"name": "test_x_mcp_header", "arguments": {"region": "Zürich"}}
        resp = await post(srv, request("tools/call", modern_params(args)),
                          modern_headers("tools/call", "test_x_mcp_header", **{"mcp-param-region": encoded("Zürich")}))
        assert resp.status_code == 200, resp.text
        assert resp.json()["result"]["content"][0]["text"] == "region=Zürich"


async def test_progress_on_a_modern_request_streams_on_its_own_response(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        params = {"name": "test_tool_with_progress", "arguments": {}}
        body = request("tools/call", modern_params(params, progressToken="p1"))
        resp = await post(srv, body, modern_headers("tools/call", "test_tool_with_progress"))
        assert resp.headers["content-type"].startswith("text/event-stream")
        frames = frames_of(resp)
        assert [f["params"]["progress"] for f in frames[:-1]] == [0, 50, 100]
        assert frames[-1]["id"] == body["id"] and frames[-1]["result"]["resultType"] == "complete"


@pytest.mark.parametrize("ident", request_ids())
async def test_an_unknown_tool_is_answered_with_a_json_error_and_a_4xx_status(tmp_path: Path, ident: int | str) -> None:
    async with http_server(tmp_path) as srv:
        body, headers = modern_request("tools/call", {"name": "no_such_tool", "arguments": {}})
        body["id"] = ident
        assert_error(await post(srv, body, headers), 400, -32602)


@pytest.mark.parametrize("ident", request_ids())
async def test_an_unsupported_protocol_version_is_400_naming_the_supported_ones(tmp_path: Path,
                                                                                ident: int | str) -> None:
    async with http_server(tmp_path) as srv:
        body = request("tools/list", modern_params(**{"io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
                       ident=ident)
        resp = await post(srv, body, {**modern_headers("tools/list"), "mcp-protocol-version": "2099-01-01"})
        error = assert_error(resp, 400, -32022)
        assert MODERN in error["data"]["supported"]


async def test_closing_the_response_stream_cancels_the_request(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        body, headers = modern_request("tools/call", {"name": "sleep", "arguments": {"seconds": 30}})
        started = trio.current_time()
        async with httpx.AsyncClient(base_url=srv.base, timeout=60) as caller:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: caller.post("/mcp", json=body, headers=headers))
                await until(lambda: srv.app.dispatcher.in_flight == 1)
                await trio.sleep(0.1)  # the handler is running; let it run a moment, then hang up
                nursery.cancel_scope.cancel()
        await until(lambda: srv.counter("mcp.errors.total", code="cancelled") == 1)
        assert srv.app.dispatcher.in_flight == 0
        with trio.fail_after(10):
            text = (await srv.client.get("/metrics")).text
        samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
        cancelled = [s for s in samples if s.name == "mcp_errors_total" and s.labels.get("code") == "cancelled"]
        assert [s.value for s in cancelled] == [1.0]
        assert trio.current_time() - started < 10  # far below the 30 s the call would take
        # the server is still healthy for the next caller
        assert structured(await modern_call(srv.client, "tools/call", ECHO)) == {"text": "stateless"}


async def test_a_batch_is_refused_in_the_modern_era(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        batch = [request("tools/list", modern_params()), request("tools/list", modern_params())]
        with trio.fail_after(10):
            resp = await srv.client.post("/mcp", content=json.dumps(batch), headers=modern_headers("tools/list"))
        assert_error(resp, 400, -32600)
