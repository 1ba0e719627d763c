"""Shared fixtures. Every frame a server sends in a test through `memory_client` is checked
against the official schema of the version that session negotiated."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, settings

from specactor.config import Config
from specactor.testing import MemoryClient, everything, open_memory_server
from tests.mcp_schema import validate

settings.register_profile("default", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("fuzz", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
# `just test-fast`: the edit-test loop, a fifth of the default examples (the full suite runs 60).
settings.register_profile("fast", max_examples=12, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile("fuzz" if os.environ.get("SPECACTOR_FUZZ") else
                      "fast" if os.environ.get("SPECACTOR_FAST") else "default")


@pytest.fixture(autouse=True, scope="session")
def private_data_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test writes to the real ~/.local/share: the memory store's default lives under XDG_DATA_HOME,
    and subprocesses inherit the variable."""
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))


def fixture_config(root: Path, **overrides: object) -> Config:
    """The settings of a test server: its own workspace, every toolset plus the fixtures."""
    base = Config(root=str(root))
    return msgspec.structs.replace(base, toolsets=[*base.toolsets, "fixtures"], **overrides)  # type: ignore[arg-type]


def check_frames(client: MemoryClient) -> None:
    """Validate every frame the server sent against the negotiated version's schema."""
    session = client.conn.session
    version = session.protocol_version or ("2026-07-28" if session.era == "modern" else "2025-11-25")
    decode = msgspec.json.Decoder().decode
    for raw in client.raw:
        validate(version, decode(raw))


@pytest.fixture
async def memory_client(tmp_path: Path) -> AsyncIterator[MemoryClient]:
    async with open_memory_server(fixture_config(tmp_path), everything.register) as client:
        yield client
        check_frames(client)
