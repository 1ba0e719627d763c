"""The official MCP client (`mcp` 2.3) drives `specactor serve` over stdio in its three modes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def server(tmp_path: Path, module: str = "specactor.testing.everything") -> StdioServerParameters:
    args = ["-m", module, "serve"] if module == "specactor" else ["-m", module]
    return StdioServerParameters(command=sys.executable, args=[*args, "--root", str(tmp_path)], cwd=str(tmp_path),
                                 env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


async def test_client_session_initialize_lists_calls_and_reads(tmp_path: Path) -> None:
    async with stdio_client(server(tmp_path)) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.protocol_version == "2025-11-25"
        assert init.server_info is not None and init.server_info.name == "specactor-everything"
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"echo", "add", "test_simple_text"} <= names
        result = await session.call_tool("add", {"a": 1, "b": 2})
        assert result.structured_content == {"success": True, "data": {"result": 3.0}}
        contents = (await session.read_resource("test://static-text")).contents
        assert contents[0].text == "This is the content of the static text resource."  # type: ignore[union-attr]


async def test_client_session_discover_serves_the_2026_era(tmp_path: Path) -> None:
    async with stdio_client(server(tmp_path)) as (read, write), ClientSession(read, write) as session:
        discovered = await session.discover()
        assert "2026-07-28" in discovered.supported_versions
        result = await session.call_tool("echo", {"text": "hi"})
        assert result.structured_content == {"success": True, "data": {"text": "hi"}}
        assert not result.is_error
        templates = (await session.list_resource_templates()).resource_templates
        assert "test://template/{id}/data" in {t.uri_template for t in templates}
        contents = (await session.read_resource("test://template/7/data")).contents
        assert '"id":"7"' in contents[0].text  # type: ignore[union-attr]


async def test_client_auto_mode_picks_the_modern_era_and_legacy_mode_still_works(tmp_path: Path) -> None:
    async with Client(server(tmp_path)) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"success": True, "data": {"result": 5.0}}
        uris = {r.uri for r in (await client.list_resources()).resources}
        assert "specactor://metrics" in {str(u) for u in uris}
    async with Client(server(tmp_path), mode="legacy") as client:
        assert client.protocol_version == "2025-11-25"
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert prompt.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'"  # type: ignore[union-attr]


async def test_the_plain_server_serves_the_official_client(tmp_path: Path) -> None:
    async with Client(server(tmp_path, "specactor")) as client:
        assert client.server_info is not None and client.server_info.name == "specactor"
        contents = (await client.read_resource("specactor://metrics")).contents
        assert "mcp.requests.total" in contents[0].text  # type: ignore[union-attr]
