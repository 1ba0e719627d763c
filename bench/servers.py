"""The three servers the bench compares, as `ServerSpec`s keyed by their `--servers` names.

- `specactor`: the conformance fixture server (`echo` and `add` typed tools), no session log;
- `sdk`: the official MCP Python SDK serving the same tools (`bench/peers/sdk_server.py`);
- `floor`: the minimal trio + msgspec loop (`bench/peers/floor.py`).

All run with this interpreter (`sys.executable`), with the repository root put first on
PYTHONPATH so the in-tree `specactor` and `bench` packages are found even from the
temporary directory each server gets as its working directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.transport import ServerSpec

REPO = Path(__file__).resolve().parent.parent
ORDER = ("specactor", "sdk", "floor")


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(REPO) + (os.pathsep + path if path else "")}


def server_specs() -> dict[str, ServerSpec]:
    py = sys.executable
    return {
        "specactor": ServerSpec(
            "specactor", "specactor",
            (py, "-m", "specactor.testing.everything", "--no-session-log", "--root", "{root}"), _env()),
        "sdk": ServerSpec("sdk", "SDK peer", (py, "-m", "bench.peers.sdk_server"), _env()),
        "floor": ServerSpec("floor", "floor", (py, "-m", "bench.peers.floor"), _env()),
    }
