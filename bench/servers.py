"""The servers the bench compares, as `ServerSpec`s keyed by their `--servers` names.

- `specactor`: the conformance fixture server (`echo` and `add` typed tools), no session log;
  over HTTP in its default deployment (`--workers` = the cores this process may use);
- `specactor-1w`: HTTP only (no `argv`): the same server with `--workers 1`, one process;
- `sdk`: the official MCP Python SDK serving the same tools (`bench/peers/sdk_server.py`);
- `floor`: the minimal trio + msgspec loop (`bench/peers/floor.py`); over HTTP, the same
  handler in a bare ASGI app on hypercorn's trio worker (`bench/peers/floor_http.py`);
- `ts`: the official TypeScript SDK serving the same tools (`bench/peers/ts/server.mjs`, run by
  the Node 22 that `bench/peers/ts/project.py` installs from npm into `.bench/ts-peer`); over
  HTTP with sessions (transports kept by session id);
- `ts-stateless`: HTTP only (no `argv`): the same, in the SDK's stateless pattern (a new server
  and transport per request).

Over HTTP every server binds 127.0.0.1 port 0 and announces its URL on stderr (a JSON line
with `"urls"`), as specactor does.

All run with this interpreter (`sys.executable`), with the repository root put first on
PYTHONPATH so the in-tree `specactor` and `bench` packages are found even from the
temporary directory each server gets as its working directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.peers.ts import NODE, SERVER
from bench.transport import ServerSpec

REPO = Path(__file__).resolve().parent.parent
ORDER = ("specactor", "specactor-1w", "sdk", "floor", "ts", "ts-stateless")
TS = ("ts", "ts-stateless")  # run only after bench.peers.ts.project.ensure()


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(REPO) + (os.pathsep + path if path else "")}


def server_specs() -> dict[str, ServerSpec]:
    py = sys.executable
    node, script = str(NODE), str(SERVER)
    return {
        "specactor": ServerSpec(
            "specactor", "specactor",
            (py, "-m", "specactor.testing.everything", "--no-session-log", "--root", "{root}"), _env(),
            (py, "-m", "specactor.testing.everything", "--http", "--port", "0", "--no-session-log",
             "--root", "{root}")),
        "specactor-1w": ServerSpec(
            "specactor-1w", "specactor, 1 worker", (), _env(),
            (py, "-m", "specactor.testing.everything", "--http", "--port", "0", "--workers", "1",
             "--no-session-log", "--root", "{root}")),
        "sdk": ServerSpec("sdk", "SDK peer", (py, "-m", "bench.peers.sdk_server"), _env(),
                          (py, "-m", "bench.peers.sdk_server", "--http", "--port", "0")),
        "floor": ServerSpec("floor", "floor", (py, "-m", "bench.peers.floor"), _env(),
                            (py, "-m", "bench.peers.floor_http", "--port", "0")),
        "ts": ServerSpec("ts", "TS SDK", (node, script), {}, (node, script, "--http", "--port", "0")),
        "ts-stateless": ServerSpec("ts-stateless", "TS SDK stateless", (), {},
                                   (node, script, "--http", "--stateless", "--port", "0")),
    }


def compile_bytecode() -> None:
    """Compile specactor's (and the bench's) modules to bytecode, as pip does for an installed wheel.

    An editable install runs from the source tree, where a module edited since its `.pyc` was
    written is compiled again at every process start unless Python may write the new `.pyc`
    (PYTHONDONTWRITEBYTECODE, a read-only tree): 10-20 ms of compiling in every first reply and
    hook the bench times. `compileall` writes them whatever that setting says.
    """
    import compileall

    for package in ("specactor", "bench"):
        compileall.compile_dir(str(REPO / package), quiet=1)


def http_workers() -> int:
    """The worker processes of specactor's default HTTP deployment here (`--workers` = the cores)."""
    from specactor.config import available_cores

    return available_cores()
