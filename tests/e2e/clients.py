"""The real clients the end-to-end tests drive: Claude Code and OpenCode, pinned, installed from npm into
`<repo>/.e2e/clients` and reused while they match.

`ensure(timeout)` copies this folder's `package.json` and `package-lock.json` (`@anthropic-ai/claude-code`,
`opencode-ai`, and `node` 22, which Claude Code's package asks for) into `.e2e/clients` and runs
`npm install` there unless the tree there came from the same lock (a copy of the lock is kept as
`installed.lock` after a good install), the way bench/peers/ts/project.py installs the TS peer.
Not `npm ci`: both clients are native binaries in per-platform optional packages, and a lock written
where the registry serves only some of `opencode-ai`'s platforms (as here) lacks the others, which
`npm ci` refuses while `npm install` skips them. `runs(binary)` says whether this platform's starts.

Raises `Unreachable` (one line: why) when npm is missing, the registry cannot be reached, or the install
outlasts `timeout`: the tests then skip. Any other npm failure is a `HarnessError`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.conformance.results import HarnessError
from tests.conformance.run import Unreachable, installed_version, run_npm

SOURCE = Path(__file__).resolve().parent
DIR = SOURCE.parents[1] / ".e2e" / "clients"
BIN = DIR / "node_modules" / ".bin"
FILES = ("package.json", "package-lock.json")
STAMP = "installed.lock"
PACKAGES = ("@anthropic-ai/claude-code", "opencode-ai", "node")
VERSION_TIMEOUT = 60.0  # seconds for `<client> --version`: a first start may unpack or index

__all__ = ["BIN", "HarnessError", "Unreachable", "ensure", "pinned", "runs"]


def pinned() -> dict[str, str]:
    """The versions package.json pins, by package."""
    deps: dict[str, str] = json.loads((SOURCE / "package.json").read_text(encoding="utf-8"))["dependencies"]
    return {name: deps[name] for name in PACKAGES}


def installed() -> bool:
    """The tree in DIR came from this folder's lock and holds the pinned versions and their binaries."""
    try:
        same_lock = (DIR / STAMP).read_bytes() == (SOURCE / "package-lock.json").read_bytes()
    except OSError:
        return False
    return (same_lock and {name: installed_version(DIR, name) for name in PACKAGES} == pinned()
            and all((BIN / name).exists() for name in ("claude", "opencode", "node")))


def ensure(timeout: float) -> Path:
    """The `.bin` folder holding `claude`, `opencode` and `node`, installing them first if needed.

    Raises:
        Unreachable: npm is missing, its registry cannot be reached, or `npm install` outlasts `timeout`.
        HarnessError: npm failed for another reason, or installed something other than the pins.
    """
    DIR.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        if not (DIR / name).exists() or (DIR / name).read_bytes() != (SOURCE / name).read_bytes():
            shutil.copyfile(SOURCE / name, DIR / name)
    if installed():
        return BIN
    (DIR / STAMP).unlink(missing_ok=True)
    # One retry, soon: an unreachable registry is known in ~20 s instead of npm's ~2 minutes of backoff.
    run_npm(["npm", "install", "--no-audit", "--no-fund", "--fetch-retries=1", "--fetch-timeout=20000",
             "--fetch-retry-mintimeout=2000", "--fetch-retry-maxtimeout=5000"], timeout=timeout, cwd=DIR)
    found = {name: installed_version(DIR, name) for name in PACKAGES}
    if found != pinned():
        raise HarnessError(f"after `npm install`, {DIR} holds {found}, not {pinned()}")
    shutil.copyfile(SOURCE / "package-lock.json", DIR / STAMP)
    return BIN


def runs(binary: Path, env: dict[str, str]) -> str | None:
    """None when `<binary> --version` works here; else one line saying why not (no build for this
    platform, its install script did not run, ...)."""
    if not binary.exists():
        return f"{binary} is missing after the install"
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, env=env,
                              timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL)
    except OSError as err:
        return f"starting it failed: {err}"
    except subprocess.TimeoutExpired:
        return f"`{binary.name} --version` gave no answer within {VERSION_TIMEOUT:.0f} s"
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"`{binary.name} --version` failed ({done.returncode}): {last[0][:200]}"
    return None
