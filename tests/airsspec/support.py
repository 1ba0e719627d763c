"""Helpers for the AirsSpec tests: a server with only the airsspec toolset, a pinned clock,
calls that return the envelope, and readers of the files on disk."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import trio

from specactor.config import Config, SessionLogConfig
from specactor.domain.airsspec import layout, planfile, specfile, statefile
from specactor.domain.airsspec.model import Bundle, PlanDoc, SpecDoc, WorkflowState
from specactor.testing import MemoryClient, open_memory_server
from tests.conftest import check_frames

# The seed's example id is 1737734400-user-authentication (2025-01-24T16:00:00Z).
FIXED_SECONDS = 1737734400.0


def config(root: Path) -> Config:
    return Config(root=str(root), toolsets=["airsspec"], session_log=SessionLogConfig(enabled=False))


@asynccontextmanager
async def airsspec_server(root: Path) -> AsyncIterator[Client]:
    async with open_memory_server(config(root)) as client:
        with trio.fail_after(10):
            await client.initialize()
        yield Client(client)
        check_frames(client)


class Client:
    """Tool calls and resource reads on a memory server, each bounded by a timeout."""

    def __init__(self, raw: MemoryClient) -> None:
        self.raw = raw

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        """The envelope (`{success, data}` or `{success: false, error}`) of a tool call."""
        reply = await self.raw.request("tools/call", {"name": name, "arguments": arguments}, timeout=10)
        content: dict[str, Any] = reply["result"]["structuredContent"]
        assert reply["result"].get("isError", False) is (not content["success"]), reply
        return content

    async def ok(self, name: str, **arguments: Any) -> dict[str, Any]:
        content = await self.call(name, **arguments)
        assert content["success"], content
        data: dict[str, Any] = content["data"]
        return data

    async def error(self, name: str, **arguments: Any) -> dict[str, Any]:
        content = await self.call(name, **arguments)
        assert not content["success"], content
        error: dict[str, Any] = content["error"]
        return error

    async def read(self, uri: str) -> dict[str, Any]:
        reply: dict[str, Any] = await self.raw.request("resources/read", {"uri": uri}, timeout=10)
        return reply

    async def text(self, uri: str) -> str:
        reply = await self.read(uri)
        assert "result" in reply, reply
        text: str = reply["result"]["contents"][0]["text"]
        return text

    async def json(self, uri: str) -> Any:
        return msgspec.json.decode(await self.text(uri))


def spec_on_disk(root: Path, spec_id: str) -> SpecDoc:
    rel = layout.spec_file(spec_id)
    return specfile.parse((root / rel).read_text(encoding="utf-8"), rel)


def plan_on_disk(root: Path, spec_id: str) -> PlanDoc | None:
    rel = layout.plan_file(spec_id)
    path = root / rel
    return planfile.parse(path.read_text(encoding="utf-8"), rel, spec_id) if path.exists() else None


def state_on_disk(root: Path, spec_id: str) -> WorkflowState:
    rel = layout.state_file(spec_id)
    return statefile.parse((root / rel).read_text(encoding="utf-8"), rel, spec_id)


def bundle_on_disk(root: Path, spec_id: str) -> Bundle:
    """Every file of the spec parsed (each must), as a Bundle."""
    return Bundle(spec_id=spec_id, spec=spec_on_disk(root, spec_id), state=state_on_disk(root, spec_id),
                  plan=plan_on_disk(root, spec_id))


def spec_ids_on_disk(root: Path) -> list[str]:
    specs = root / layout.SPECS
    return sorted(p.name for p in specs.iterdir() if p.is_dir()) if specs.exists() else []
