"""Fixtures for the memory toolset: a private database, a knowledge git repository, a server."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from specactor.actors.memory_actors import MemoryActors
from specactor.config import SessionLogConfig, load
from specactor.domain.memory.records import EmbeddingsEndpoint
from specactor.testing import MemoryClient, open_memory_server
from tests.conftest import check_frames

ADR_042 = """---
id: adr-042-database-selection
type: adr
title: Database Selection for New Services
summary: New services use PostgreSQL.
status: accepted
severity: block
tags: [database, postgresql]
---
## Context
We run many MySQL and PostgreSQL databases.

## Decision
New services use PostgreSQL.

## Consequences
Fewer engines to operate.

## Constraints
```yaml
- operator: must_not_use
  target: dependency
  pattern: "mysql|mysql2|mariadb"
  severity: block
  message: MySQL not allowed for new services per ADR-042. Use PostgreSQL instead.
```
"""

# The same ADR as the reference's 03 spells it, with the second (must_use) constraint.
ADR_042_BOTH = ADR_042.replace("```\n", """- operator: must_use
  target: dependency
  pattern: "postgresql|pg|postgres"
  severity: block
```
""", 1)


def item(item_id: str, title: str, *, status: str = "accepted", body: str = "", kind: str | None = None,
         extra: str = "") -> str:
    """A knowledge item file."""
    type_line = f"type: {kind}\n" if kind else ""
    return f"---\nid: {item_id}\n{type_line}title: {title}\nstatus: {status}\n{extra}---\n{body}\n"


class Repo:
    """A git repository of knowledge items, driven with the git command line."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "test@example.com")
        self.git("config", "user.name", "Test Author")

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def write(self, path: str, text: str) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def remove(self, path: str) -> None:
        self.git("rm", "-q", path)

    def move(self, old: str, new: str) -> None:
        (self.root / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)

    def commit(self, message: str = "change") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


def actors_for(tmp_path: Path, root: Path, url: str | None = None) -> MemoryActors:
    """The memory toolset's actors on a private database and the knowledge folder `root`."""
    return MemoryActors(tmp_path / "store" / "memory.db", root, embeddings=EmbeddingsEndpoint(url) if url else None)


async def started(nursery: trio.Nursery, actors: MemoryActors) -> MemoryActors:
    """`actors` running in `nursery`, each started as the app's supervisor starts it."""
    for spec in actors.specs:
        await nursery.start(spec.start)
    return actors


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private memory database and knowledge repository path; returns the workspace root."""
    monkeypatch.setenv("SPECACTOR_MEMORY_DB", str(tmp_path / "data" / "memory.db"))
    monkeypatch.setenv("SPECACTOR_KNOWLEDGE_REPO", str(tmp_path / "knowledge"))
    monkeypatch.setenv("SPECACTOR_MEMORY_USER_ID", "alice")
    for name in ("SPECACTOR_MEMORY_TEAM_ID", "SPECACTOR_MEMORY_ORG_ID", "SPECACTOR_MEMORY_PROJECT_ID",
                 "SPECACTOR_MEMORY_COMPANY_ID", "SPECACTOR_EMBEDDINGS_URL", "SPECACTOR_MEMORY_MODE"):
        monkeypatch.delenv(name, raising=False)
    ws = tmp_path / "specactor-ws"
    ws.mkdir()
    return ws


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "knowledge")


def server_config(root: Path) -> Any:
    """The test server's settings, read as the CLI reads them: the SPECACTOR_* variables the
    fixtures set (memory database, knowledge repository, identifiers) come through config.load."""
    base = load({"root": str(root)}, os.environ)
    return msgspec.structs.replace(base, toolsets=[*base.toolsets, "fixtures"],
                                   session_log=SessionLogConfig(enabled=False))


@pytest.fixture
async def client(env: Path) -> AsyncIterator[MemoryClient]:
    async with open_memory_server(server_config(env)) as client:
        await client.initialize()
        yield client
        check_frames(client)


async def call(client: MemoryClient, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's envelope: {success, data} or {success: false, error}."""
    reply = await client.request("tools/call", {"name": tool, "arguments": arguments}, timeout=30)
    content: dict[str, Any] = reply["result"]["structuredContent"]
    return content


async def ok(client: MemoryClient, tool: str, arguments: dict[str, Any]) -> Any:
    envelope = await call(client, tool, arguments)
    assert envelope["success"] is True, envelope
    return envelope["data"]


async def error(client: MemoryClient, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    envelope = await call(client, tool, arguments)
    assert envelope["success"] is False, envelope
    err: dict[str, Any] = envelope["error"]
    return err
