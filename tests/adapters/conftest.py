"""The adapters' workspace: `tests.context.workspace` (a knowledge repository, memories of this project,
another project and a user), with this process's environment pointing specactor at it and nothing else."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.context.workspace import Workspace, workspace


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    built = workspace(tmp_path)
    for name in [n for n in os.environ if n.startswith(("SPECACTOR_", "CLAUDE_", "GEMINI_"))]:
        monkeypatch.delenv(name)
    for name, value in built.env().items():
        if name.startswith("SPECACTOR_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECACTOR_SESSION_LOG", "false")
    return built
