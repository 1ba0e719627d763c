"""The TS SDK peer's Node project: installed from npm into `<repo>/.bench/ts-peer`, reused while it matches.

`ensure(timeout)` copies `package.json`, `package-lock.json` and `server.mjs` from this folder into
`.bench/ts-peer` (ESM resolves `node_modules` next to the script, so the script runs from there) and
runs `npm ci` unless the tree installed there came from the same lock (a copy of the lock is kept as
`installed.lock` after a good install). Node itself is an npm package (`node`, pinned in
package.json), the way the conformance suite gets Node 22 (tests/conformance/run.py, whose reading
of npm's network errors this reuses), so the registry is needed only the first time.

Raises `Unreachable` (one line: why) when npm is missing, the registry cannot be reached, or the
install outlasts `timeout`: the bench then leaves the TS peer out and says so. Any other npm failure
is a `HarnessError`, as in the conformance runner.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.peers.ts import DIR, NODE, SOURCE
from bench.transport import HarnessError
from tests.conformance.run import NODE_MAJOR, Unreachable, installed_version, run_npm

SDK = "@modelcontextprotocol/sdk"
FILES = ("package.json", "package-lock.json", "server.mjs")
STAMP = "installed.lock"

__all__ = ["Unreachable", "ensure", "installed", "versions"]


def versions() -> dict[str, str | None]:
    """The installed SDK and Node versions (None when absent)."""
    return {"sdk": installed_version(DIR, SDK), "node": installed_version(DIR, "node")}


def _wanted() -> dict[str, str]:
    deps: dict[str, str] = json.loads((SOURCE / "package.json").read_text(encoding="utf-8"))["dependencies"]
    return {"sdk": deps[SDK], "node": deps["node"]}


def installed() -> bool:
    """The tree in DIR came from this folder's lock and holds the pinned SDK and Node binary."""
    try:
        same_lock = (DIR / STAMP).read_bytes() == (SOURCE / "package-lock.json").read_bytes()
    except OSError:
        return False
    return same_lock and versions() == _wanted() and NODE.exists()


def _copy_sources() -> None:
    DIR.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        source, target = SOURCE / name, DIR / name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)


def ensure(timeout: float) -> Path:
    """The node binary that runs `SERVER`, installing the project first if needed.

    Raises:
        Unreachable: npm is missing, its registry cannot be reached, or `npm ci` outlasts `timeout`.
        HarnessError: npm failed for another reason, or installed something other than the pins.
    """
    _copy_sources()
    if installed():
        return NODE
    (DIR / STAMP).unlink(missing_ok=True)
    run_npm(["npm", "ci", "--no-audit", "--no-fund", "--fetch-retries=1", "--fetch-timeout=20000"],
            timeout=timeout, cwd=DIR, failed=HarnessError)
    found, wanted = versions(), _wanted()
    if found != wanted or not NODE.exists() or (found["node"] or "").split(".")[0] != NODE_MAJOR:
        raise HarnessError(f"after `npm ci`, {DIR} holds {found}, not {wanted} with its node binary")
    shutil.copyfile(SOURCE / "package-lock.json", DIR / STAMP)
    return NODE
