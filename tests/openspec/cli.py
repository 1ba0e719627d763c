"""The real OpenSpec CLI (npm `@fission-ai/openspec@1.13.2`) for differential tests.

`openspec_cli()` installs it once into `<repo>/.openspec-cli/` (and Node 22 there too when the
system Node is missing or older than 20.19), then runs commands through `cli_driver.mjs`, one
Node process for the whole session. When npm cannot reach its registry the tests are skipped
with the reason; any other failure is an error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

VERSION = "1.13.2"
REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".openspec-cli"
PACKAGE = CACHE / "node_modules" / "@fission-ai" / "openspec"
DRIVER = Path(__file__).with_name("cli_driver.mjs")
ENV = {**os.environ, "OPENSPEC_TELEMETRY": "0", "NO_COLOR": "1", "CI": "1"}


def _npm(*args: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed, so the OpenSpec CLI cannot be installed for differential tests")
    CACHE.mkdir(exist_ok=True)
    manifest = CACHE / "package.json"
    if not manifest.exists():
        manifest.write_text('{"name": "openspec-cli-cache", "private": true}\n')
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", *args], cwd=CACHE, capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode != 0:
        text = done.stderr + done.stdout
        if any(s in text for s in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "network", "ECONNRESET")):
            pytest.skip(f"npm cannot reach its registry to install the OpenSpec CLI: {text.strip()[-300:]}")
        raise RuntimeError(f"npm install {' '.join(args)} failed:\n{text}")


def _node() -> str:
    def good(node: str | None) -> bool:
        if node is None:
            return False
        out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
        major, minor = (int(x) for x in out.lstrip("v").split(".")[:2])
        return (major, minor) >= (20, 19)

    local = CACHE / "node_modules" / ".bin" / "node"
    for candidate in (str(local) if local.exists() else None, shutil.which("node")):
        if good(candidate):
            return candidate  # type: ignore[return-value]
    _npm("node@22")
    return str(local)


class Driver:
    """One Node process answering `openspec <command> --json` requests."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([_node(), str(DRIVER), str(PACKAGE / "dist")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=ENV)

    def run(self, cwd: Path, command: str, item: str | None = None, **options: Any) -> tuple[Any, int]:
        """The parsed JSON the CLI printed, and its exit code."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"cwd": str(cwd), "command": command, "args": [item] if item is not None else [], "options": options}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return json.loads(reply["stdout"]), reply["exitCode"]


@cache
def openspec_cli() -> Driver:
    installed = PACKAGE / "package.json"
    if not installed.exists() or json.loads(installed.read_text())["version"] != VERSION:
        _npm(f"@fission-ai/openspec@{VERSION}")
    return Driver()


def binary(cwd: Path, *args: str) -> tuple[Any, int]:
    """The real `openspec` executable (its JSON output, or None for text), and its exit code."""
    done = subprocess.run([_node(), str(PACKAGE / "bin" / "openspec.js"), *args], cwd=cwd, capture_output=True,
                          text=True, env=ENV, stdin=subprocess.DEVNULL, timeout=120, check=False)
    try:
        return json.loads(done.stdout), done.returncode
    except json.JSONDecodeError:
        return None, done.returncode
