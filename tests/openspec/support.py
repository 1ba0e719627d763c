"""Helpers for the openspec tests: calling specactor's tools in memory, and normalising JSON."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import trio

from specactor.config import Config, SessionLogConfig
from specactor.testing import open_memory_server
from tests.conftest import check_frames

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}-")


def config(root: Path) -> Any:
    """Only this toolset (others are developed concurrently), no session log."""
    return Config(root=str(root), session_log=SessionLogConfig(enabled=False), toolsets=["openspec"])


def call_tools(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each call's structured result (`{success, data}` or `{success: false, error}`), in order."""

    async def go() -> list[dict[str, Any]]:
        out = []
        async with open_memory_server(config(root)) as client:
            with trio.fail_after(60):
                await client.initialize()
                for name, arguments in calls:
                    reply = await client.request("tools/call", {"name": name, "arguments": arguments}, timeout=60)
                    out.append(reply["result"]["structuredContent"])
            check_frames(client)
        return out

    return trio.run(go)


def call_tool(root: Path, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return call_tools(root, [(name, arguments)])[0]


def as_cli(result: dict[str, Any]) -> Any:
    """What the CLI would have printed for this tool result: `data`, or the error's CLI JSON."""
    if result["success"]:
        return result["data"]
    return result["error"]["details"]


def normalise(value: Any, root: Path) -> Any:
    """Drop what the reference marks non-deterministic: durations, mtimes, the root path, dates."""
    roots = sorted({str(root), os.path.realpath(root)}, key=len, reverse=True)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "durationMs":
                continue
            out[key] = "<time>" if key == "lastModified" else normalise(item, root)
            if key in ("archivedAs", "path") and isinstance(out[key], str):
                out[key] = _DATE.sub("<date>-", out[key])
        return out
    if isinstance(value, list):
        return [normalise(v, root) for v in value]
    if isinstance(value, str):
        for r in roots:
            value = value.replace(r, "<root>")
        return value
    return value


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root/openspec, by relative path (archive date prefixes normalised)."""
    out = {}
    base = root / "openspec"
    for path in sorted(base.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[_DATE.sub("<date>-", path.relative_to(base).as_posix())] = path.read_bytes()
    return out


def stamp(root: Path) -> None:
    """Give every change a distinct age (files of change i are i minutes old), so "most recent
    first" has one right answer."""
    changes = root / "openspec" / "changes"
    if not changes.is_dir():
        return
    base = 1_700_000_000
    for i, change in enumerate(sorted(p for p in changes.iterdir() if p.name != "archive")):
        for path in [change, *change.rglob("*")]:
            os.utime(path, (base + i * 60, base + i * 60), follow_symlinks=False)
