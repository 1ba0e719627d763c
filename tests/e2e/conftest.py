"""Fixtures for the end-to-end tests: the pinned clients (installed once, cached on disk), a project
with a knowledge repository and a memory store, and the environment a client runs in.

That environment is hermetic: HOME is a fresh folder, no ANTHROPIC_/OPENCODE_/proxy/npm setting
of the machine leaks in, and every proxy and the npm registry point at a closed port on
127.0.0.1, so a client that reaches for the network fails at once instead of reaching it (only the
stand-in API on 127.0.0.1 answers). The `specactor` the installed configs and hooks run is the one
next to this interpreter.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.context.workspace import Workspace, workspace
from tests.e2e import clients

INSTALL_TIMEOUT = 600.0  # seconds for `npm install` of both clients (about 20 s on a good line)
SPECACTOR_INSTALL_TIMEOUT = 60.0  # seconds for `specactor install <client>`
VIOLATING = "export const run = (source) => eval(source)\n"  # a file the block policy pol-eval forbids
PROMPT = "How do we deploy the shop service? Then add src/calc.js."
LEAKY = ("ANTHROPIC_", "OPENCODE_", "XDG_", "NPM_CONFIG_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
         "NODE_OPTIONS", "BUN_")


@pytest.fixture(scope="session")
def client_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding the pinned `claude`, `opencode` and `node`; skips when npm cannot be reached."""
    try:
        return clients.ensure(INSTALL_TIMEOUT)
    except clients.Unreachable as err:
        pytest.skip(f"e2e: the pinned clients cannot be installed, npm registry unreachable: {err}")


def _runnable(client_bin: Path, name: str, home: Path) -> Path:
    binary = client_bin / name
    env = {"PATH": f"{client_bin}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home)}
    why = clients.runs(binary, env)
    if why is not None:
        pytest.skip(f"e2e: {name} cannot run here: {why}")
    return binary


@pytest.fixture(scope="session")
def claude(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _runnable(client_bin, "claude", tmp_path_factory.mktemp("claude-home"))


@pytest.fixture(scope="session")
def opencode(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _runnable(client_bin, "opencode", tmp_path_factory.mktemp("opencode-home"))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """`tmp/shop`: the accepted block policy pol-eval (no `eval(`) and ADR-042 in its knowledge
    repository, three memories of project "shop", one of another project and one of a user."""
    return workspace(tmp_path)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound (so nothing else takes it), never listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def client_env(ws: Workspace, home: Path, client_bin: Path, closed_port: int) -> dict[str, str]:
    """The environment of a client run on `ws`: isolated HOME, offline but for 127.0.0.1."""
    venv_bin = Path(sys.executable).parent
    if shutil.which("specactor", path=str(venv_bin)) is None:
        raise RuntimeError(f"no `specactor` console script next to {sys.executable}: pip install -e . first")
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in ws.env().items() if not k.upper().startswith(LEAKY)}
    nowhere = f"http://127.0.0.1:{closed_port}"
    offline = {name: nowhere for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                                          "all_proxy")}
    return env | offline | {
        "HOME": str(home),
        "PATH": os.pathsep.join((str(client_bin), str(venv_bin), env.get("PATH", ""))),
        "PWD": str(ws.root),
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        "npm_config_registry": f"{nowhere}/", "npm_config_fetch_retries": "0",
    }


def install(ws: Workspace, env: dict[str, str], client: str) -> None:
    """`specactor install <client>` into the workspace, as a user runs it."""
    done = subprocess.run(["specactor", "install", client], cwd=ws.root, env=env, capture_output=True,
                          text=True, timeout=SPECACTOR_INSTALL_TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
