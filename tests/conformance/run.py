"""Run the official MCP conformance suite against the fixture server, in three configurations.

    python3 -m tests.conformance.run [--config all|0.1.16|2025|2026] [--workers N] [--keep]

    0.1.16  @modelcontextprotocol/conformance@0.1.16 --suite all
    2025    @modelcontextprotocol/conformance@0.2.0-alpha.12 --requirements 2025-11-25
    2026    @modelcontextprotocol/conformance@0.2.0-alpha.12 --requirements 2026-07-28

Each suite version lives in its own npm project under `<repo>/.conformance/<install>/` (`v0116`,
`alpha`) together with `node@22` (the suite needs Node >= 22); an install already at the right
versions is reused, so the registry is only needed the first time. For every configuration a
fresh fixture server (`python -m specactor.testing.everything --http --port 0 --workers N`, one
process unless `--workers` asks for more) is started,
the suite runs against it, and the server is stopped with SIGTERM (it must exit 0).

Results go to `.conformance/<install>/out-<config>/` (the suite's `server-<scenario>-<time>/
checks.json` directories, plus `suite.log` and `server.log`) and a markdown summary to
`.conformance/summary.md`. The raw results of a configuration that passed are removed unless
`--keep` is given; those of a failing one are always kept.

Exit status: 0 when every scored scenario passed in every configuration run (unscored ones,
e.g. the 2026 `tasks-*` extension scenarios, may fail), 1 on a scored failure, 2 when the
harness itself broke. When npm or its registry cannot be reached, it prints one line
`conformance: SKIPPED — npm registry unreachable: <reason>` and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from tests.conformance.results import (
    PACKAGE,
    Configuration,
    HarnessError,
    Outcome,
    interpret,
    print_table,
    write_markdown,
)

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / ".conformance"
NODE_MAJOR = "22"

SERVER_START_TIMEOUT = 30.0  # seconds until the fixture server must have logged its url
SERVER_STOP_TIMEOUT = 20.0  # seconds after SIGTERM until it must have exited
SUITE_TIMEOUT = 300.0  # seconds for one whole suite run
INSTALL_TIMEOUT = 600.0
PROBE_TIMEOUT = 60.0
SCENARIO_TIMEOUT_MS = "10000"

# npm's error codes (and words) for "the registry is not reachable from here".
NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET", "ENETUNREACH",
                  "EHOSTUNREACH", "ESOCKETTIMEDOUT", "ERR_SOCKET_TIMEOUT", "network", "proxy", "getaddrinfo")


CONFIGURATIONS = (
    Configuration("0.1.16", "v0116", "0.1.16", ("--suite", "all"), timeout_flag=False),
    Configuration("2025", "alpha", "0.2.0-alpha.12", ("--requirements", "2025-11-25"), timeout_flag=True),
    Configuration("2026", "alpha", "0.2.0-alpha.12", ("--requirements", "2026-07-28"), timeout_flag=True),
)


class Unreachable(Exception):
    """npm or its registry cannot be reached: the run is skipped."""


# ---------------------------------------------------------------------------- npm


def _network_reason(text: str) -> str | None:
    if not any(word.lower() in text.lower() for word in NETWORK_ERRORS):
        return None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "Unknown user config" not in ln]
    errors = [ln.removeprefix("npm error").removeprefix("npm ERR!").strip() for ln in lines
              if ln.startswith(("npm error", "npm ERR!"))]
    fetch = [ln for ln in errors if "FetchError" in ln or "reason:" in ln]
    return (fetch or errors or lines or ["network error"])[0]


def run_npm(cmd: list[str], *, timeout: float, cwd: Path | None = None,
            failed: type[Exception] = HarnessError) -> subprocess.CompletedProcess[str]:
    """Run an npm command (`npm view`, `npm ci`, `npm install`); the bench's TS peer and the e2e
    clients install with it too.

    Raises:
        Unreachable: npm is missing, the registry cannot be reached, or `cmd` outlasts `timeout`.
        failed: npm failed for another reason (its stderr's tail in the message).
    """
    if shutil.which(cmd[0]) is None:
        raise Unreachable(f"`{cmd[0]}` is not installed")
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise Unreachable(f"`{' '.join(cmd)}` gave no answer within {timeout:.0f} s") from None
    if done.returncode != 0:
        reason = _network_reason(done.stderr + done.stdout)
        if reason is not None:
            raise Unreachable(reason)
        where = f" in {cwd}" if cwd else ""
        raise failed(f"`{' '.join(cmd)}`{where} failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    return done


def installed_version(project: Path, package: str) -> str | None:
    """The version of `package` npm installed in `project` (its node_modules), None when absent or unreadable."""
    try:
        data = json.loads((project / "node_modules" / package / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = data.get("version")
    return version if isinstance(version, str) else None


def probe_registry() -> None:
    """Raise Unreachable when `npm view` cannot reach the registry within PROBE_TIMEOUT."""
    run_npm(["npm", "view", f"{PACKAGE}@0.1.16", "version", "--fetch-retries=1", "--fetch-timeout=20000"],
            timeout=PROBE_TIMEOUT)


def _installed_version(directory: Path, package: str) -> str | None:
    try:
        data = json.loads((directory / "node_modules" / package / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = data.get("version")
    return version if isinstance(version, str) else None


def installed(directory: Path, version: str) -> bool:
    node = _installed_version(directory, "node") or ""
    return (_installed_version(directory, PACKAGE) == version and node.split(".")[0] == NODE_MAJOR
            and (directory / "node_modules" / ".bin" / "conformance").exists())


def install(directory: Path, version: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    print(f"conformance: installing {PACKAGE}@{version} and node@{NODE_MAJOR} in {directory}", flush=True)
    steps = [] if (directory / "package.json").exists() else [["npm", "init", "-y"]]
    steps.append(["npm", "install", "--no-audit", "--no-fund", f"node@{NODE_MAJOR}", f"{PACKAGE}@{version}"])
    for cmd in steps:
        try:
            done = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise Unreachable(f"`{' '.join(cmd)}` did not finish within {INSTALL_TIMEOUT:.0f} s") from None
        if done.returncode != 0:
            reason = _network_reason(done.stderr + done.stdout)
            if reason is not None:
                raise Unreachable(reason)
            raise HarnessError(f"`{' '.join(cmd)}` failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    if not installed(directory, version):
        raise HarnessError(f"after npm install, {directory} does not hold {PACKAGE}@{version} with node@{NODE_MAJOR}")


def node_env(directory: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{directory / 'node_modules' / '.bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


# ---------------------------------------------------------------------------- the fixture server


class FixtureServer:
    """`python -m specactor.testing.everything --http --port 0` with its log teed to a file."""

    def __init__(self, log_path: Path, root: Path, workers: int = 1) -> None:
        self.log_path = log_path
        self.root = root
        self.workers = workers
        self.proc: subprocess.Popen[bytes] | None = None
        self._urls: queue.Queue[str | None] = queue.Queue()
        self._reader: threading.Thread | None = None

    def start(self) -> str:
        env = {k: val for k, val in os.environ.items() if not k.startswith("SPECACTOR_")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "specactor.testing.everything", "--http", "--port", "0", "--root", str(self.root),
             "--no-session-log", "--workers", str(self.workers)],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()
        try:
            url = self._urls.get(timeout=SERVER_START_TIMEOUT)
        except queue.Empty:
            raise HarnessError(f"the fixture server logged no url within {SERVER_START_TIMEOUT:.0f} s "
                               f"(log: {self.log_path})") from None
        if url is None:
            status = self.proc.wait(timeout=SERVER_STOP_TIMEOUT)
            raise HarnessError(f"the fixture server exited before it started (status {status}: {self.last_line()}; "
                               f"log: {self.log_path})")
        return url

    def last_line(self) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1][-300:] if lines else "empty log"

    def _read(self, stream: IO[bytes]) -> None:
        with self.log_path.open("wb") as log:
            for line in stream:
                log.write(line)
                log.flush()
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get("msg") == "specactor started" and record.get("urls"):
                    self._urls.put(str(record["urls"][0]))
        self._urls.put(None)

    def stop(self) -> int:
        """SIGTERM, then wait; the exit status. Kills (and raises) when it does not exit in time."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout=SERVER_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise HarnessError(f"the fixture server did not exit within {SERVER_STOP_TIMEOUT:.0f} s of SIGTERM; "
                               "killed") from None
        finally:
            if self._reader is not None:
                self._reader.join(timeout=5)
        return status


# ---------------------------------------------------------------------------- results

def run_configuration(config: Configuration, keep: bool, workers: int = 1) -> Outcome:
    outcome = Outcome(config)
    directory = BASE / config.install
    out = directory / f"out-{config.key}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = node_env(directory)
    node = subprocess.run(["node", "--version"], env=env, capture_output=True, text=True, timeout=30)
    if not node.stdout.startswith(f"v{NODE_MAJOR}."):
        outcome.error = f"`node --version` under {directory} is {node.stdout.strip() or node.stderr.strip()!r}"
        return outcome
    started, output = time.monotonic(), ""
    with tempfile.TemporaryDirectory(prefix="specactor-conformance-") as root:
        server = FixtureServer(out / "server.log", Path(root), workers)
        try:
            url = server.start()
            cmd = ["npx", "--no", "conformance", "server", "--url", url, *config.args, "-o", str(out)]
            if config.timeout_flag:
                cmd += ["--timeout", SCENARIO_TIMEOUT_MS]
            try:
                done = subprocess.run(cmd, cwd=directory, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, timeout=SUITE_TIMEOUT)
            except subprocess.TimeoutExpired as err:
                raise HarnessError(f"the suite did not finish within {SUITE_TIMEOUT:.0f} s") from err
            output = done.stdout
            (out / "suite.log").write_text(output, encoding="utf-8")
            outcome.exit_code = done.returncode
        except HarnessError as err:
            outcome.error = str(err)
        finally:
            try:
                status = server.stop()
                if status != 0 and outcome.error is None:
                    outcome.error = f"the fixture server exited {status} after SIGTERM (log: {out / 'server.log'})"
            except HarnessError as err:
                outcome.error = outcome.error or str(err)
    outcome.seconds = time.monotonic() - started
    if outcome.exit_code is not None:
        interpret(outcome, output, out)
    if outcome.ok and not keep:
        for child in out.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
    return outcome


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.conformance.run", description=__doc__.split("\n")[0])
    parser.add_argument("--config", choices=["all", *(c.key for c in CONFIGURATIONS)], default="all")
    parser.add_argument("--keep", action="store_true", help="keep the raw results of configurations that passed")
    parser.add_argument("--workers", type=int, default=1, help="HTTP worker processes of the fixture server "
                        "(default: 1)")
    args = parser.parse_args(argv)
    chosen = [c for c in CONFIGURATIONS if args.config in ("all", c.key)]
    try:
        if shutil.which("npm") is None or shutil.which("npx") is None:
            raise Unreachable("`npm`/`npx` is not installed")
        missing = {c.install: c.version for c in chosen if not installed(BASE / c.install, c.version)}
        if missing:
            probe_registry()
            for name, version in missing.items():
                install(BASE / name, version)
    except Unreachable as err:
        print(f"conformance: SKIPPED — npm registry unreachable: {err}")
        return 0
    except HarnessError as err:
        print(f"conformance: HARNESS ERROR — {err}", file=sys.stderr)
        return 2
    outcomes = []
    for config in chosen:
        print(f"conformance: {config.key}: {config.label}", flush=True)
        outcomes.append(run_configuration(config, args.keep, args.workers))
    print_table(outcomes)
    summary = BASE / "summary.md"
    write_markdown(outcomes, summary)
    kept = [str(BASE / o.config.install / f"out-{o.config.key}") for o in outcomes if args.keep or not o.ok]
    print(f"\nsummary: {summary}" + (f"; raw results: {', '.join(kept)}" if kept else ""))
    if any(o.error is not None for o in outcomes):
        return 2
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
