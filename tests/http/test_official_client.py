"""The official MCP client (`mcp` 2.3) over Streamable HTTP, in legacy and auto (2026) mode."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from mcp import Client

from tests.http.support import http_server


async def test_the_official_client_in_legacy_mode_calls_tools_and_reads_resources(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        with trio.fail_after(20):
            async with Client(srv.url, mode="legacy") as client:
                assert client.protocol_version == "2025-11-25"
                result = await client.call_tool("add", {"a": 1, "b": 2})
                assert result.structured_content == {"success": True, "data": {"result": 3.0}}
                contents = (await client.read_resource("test://static-text")).contents
                assert contents[0].text == "This is the content of the static text resource."  # type: ignore[union-attr]
        assert len(srv.transport.sessions) <= 1  # the client may end its session with DELETE


async def test_the_official_client_in_auto_mode_speaks_2026_statelessly(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        with trio.fail_after(20):
            async with Client(srv.url) as client:
                assert client.protocol_version == "2026-07-28"
                result = await client.call_tool("add", {"a": 2, "b": 5})
                assert result.structured_content == {"success": True, "data": {"result": 7.0}}
                assert not result.is_error
                contents = (await client.read_resource("test://static-text")).contents
                assert contents[0].text == "This is the content of the static text resource."  # type: ignore[union-attr]
                templated = (await client.read_resource("test://template/42/data")).contents
                assert '"id":"42"' in templated[0].text  # type: ignore[union-attr]
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"echo", "add", "sleep", "test_x_mcp_header"} <= names
        assert srv.transport.sessions == {}


# The SDK's SSE reader (its vendored httpx2) stops iterating once the reply event arrives and
# leaves its async generators to the garbage collector; trio warns. Not the server's doing: the
# server ends the stream right after the reply.
@pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)2\.[^']*' was garbage collected:ResourceWarning")
async def test_the_official_client_sees_progress_over_http(tmp_path: Path) -> None:
    async with http_server(tmp_path) as srv:
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        with trio.fail_after(20):
            async with Client(srv.url, mode="legacy") as client:
                result = await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
                assert not result.is_error
        assert seen == [0, 50, 100]
