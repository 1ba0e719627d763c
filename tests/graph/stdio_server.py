"""A real `python -m specactor serve` subprocess syncing into an Emergent double, driven from a test thread.

`StdioServer.start()` spawns it with the graph toolset on, initializes (2025-11-25) and waits for
the first reply; `call(tool, **args)` returns a tool's structuredContent within a deadline;
`kill9()` ends it with SIGKILL (no shutdown, the outbox as it was on disk); `stop()` closes stdin
and waits for a clean exit. Threads move the bytes, so every wait is a queue read with a timeout,
and every failure carries the tail of the server's stderr.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from specactor.testing.emergent import PROJECT_ID
from tests.graph.support import KEY

REPO = Path(__file__).resolve().parents[2]
TOOLSETS = "openspec,airsspec,memory,graph"


class ServerGone(AssertionError):
    """The server died, or did not answer within the deadline."""


def server_env(url: str, settings: Path, workspace: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a server syncing into the double at `url`: this process's own, less any
    SPECACTOR_/EMERGENT_ variable of the caller's, plus the graph settings (`settings`: the TOML
    file `write_settings` wrote, passed as SPECACTOR_CONFIG)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECACTOR_", "EMERGENT_"))}
    env.update({"PYTHONPATH": str(REPO), "EMERGENT_URL": url, "EMERGENT_API_KEY": KEY,
                "EMERGENT_PROJECT_ID": PROJECT_ID, "EMERGENT_MAX_RETRIES": "1", "SPECACTOR_TOOLSETS": TOOLSETS,
                "SPECACTOR_GRACE_PERIOD": "1", "SPECACTOR_CONFIG": str(settings)})
    if workspace is not None:
        env["SPECACTOR_GRAPH_WORKSPACE_ID"] = workspace
    env.update(extra)
    return env


def write_settings(path: Path, *, retry_max_seconds: float = 0.2, timeout: float = 5.0,
                   long_outage_threshold: int = 20) -> Path:
    """A settings file for tests: a short drain backoff cap (graph.retry_max_seconds), a request
    timeout that stalls stay under (emergent.timeout), and the failures before a long outage."""
    path.write_text(f"[graph]\nretry_max_seconds = {retry_max_seconds}\n\n[emergent]\ntimeout = {timeout}\n"
                    f"long_outage_threshold = {long_outage_threshold}\n")
    return path


class StdioServer:
    """Args:
        root: the workspace (also the working directory).
        env: the whole environment of the subprocess (`server_env`).
        timeout: the default deadline of one reply, in seconds.
    """

    def __init__(self, root: Path, env: dict[str, str], timeout: float = 30.0) -> None:
        self.root = root
        self.env = env
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: collections.deque[str] = collections.deque(maxlen=200)
        self._ids = itertools.count(1)
        self.answered: set[Any] = set()  # ids of every reply read so far (a set's add is atomic)
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> StdioServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.stop()
        else:
            self.kill9()

    # ------------------------------------------------------------------ the process

    def start(self) -> StdioServer:
        """Spawn the server and initialize a session.

        Raises:
            ServerGone: it died or did not answer the handshake in time.
        """
        assert self.proc is None or self.proc.poll() is not None, "the server is already running"
        self.stderr.clear()
        self._replies = queue.Queue()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "specactor", "serve", "--root", str(self.root), "--no-session-log"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.root, env=self.env)
        self._threads = [threading.Thread(target=fn, args=(self.proc,), daemon=True)
                         for fn in (self._read_stdout, self._read_stderr)]
        for thread in self._threads:
            thread.start()
        reply = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                            "clientInfo": {"name": "graph-tests", "version": "0"}})
        assert reply["result"]["protocolVersion"] == "2025-11-25", reply
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL, then reap: nothing of a clean shutdown runs."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        self._reap(proc, 10)

    def stop(self, timeout: float = 15.0) -> None:
        """Close stdin (the end of the session) and wait for the exit; SIGKILL past `timeout`.

        Raises:
            ServerGone: it did not exit by itself within `timeout` seconds.
        """
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise ServerGone(f"the server did not exit within {timeout:g} s of the end of stdin{self.tail()}") from None
        self._reap(proc, 10)

    def _reap(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        proc.wait(timeout)
        for thread in self._threads:
            thread.join(timeout)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass

    def _read_stdout(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                self.stderr.append(f"<stdout, not JSON> {line[:300]!r}")
                continue
            if isinstance(message, dict) and "id" in message and "method" not in message:
                self.answered.add(message["id"])
                self._replies.put(message)
        self._replies.put(None)

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace").rstrip())

    def tail(self, lines: int = 25) -> str:
        return "\n--- server stderr (last lines) ---\n" + "\n".join(list(self.stderr)[-lines:])

    # ------------------------------------------------------------------ the protocol

    def _send(self, message: dict[str, Any]) -> None:
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, ValueError) as err:
            raise ServerGone(f"the server no longer reads stdin ({err}){self.tail()}") from None

    def request_nowait(self, method: str, params: dict[str, Any]) -> int:
        """Send a request without waiting for its reply (which `request` later skips); its id.

        Raises:
            ServerGone: the server no longer reads its stdin.
        """
        ident = next(self._ids)
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return ident

    def request(self, method: str, params: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """One request and its reply (a result or an error).

        Raises:
            ServerGone: no reply within `timeout` (default: the server's), or the server died.
        """
        ident = self.request_nowait(method, params)
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            try:
                reply = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise ServerGone(f"no reply to {method} {json.dumps(params)[:200]} within {limit:g} s"
                                 f"{self.tail()}") from None
            if reply is None:
                self._replies.put(None)
                status = self.proc.poll() if self.proc is not None else None
                raise ServerGone(f"the server died (exit status {status}) before answering {method}{self.tail()}")
            if reply.get("id") == ident:
                return reply
            # a reply to an earlier request whose deadline passed: not ours

    def call(self, tool: str, timeout: float | None = None, **arguments: Any) -> dict[str, Any]:
        """A tools/call; its structuredContent.

        Raises:
            ServerGone: no reply in time, or the server died.
            AssertionError: a JSON-RPC error, or a result without structuredContent.
        """
        reply = self.request("tools/call", {"name": tool, "arguments": arguments}, timeout)
        assert "result" in reply, f"{tool} {arguments}: {reply}{self.tail()}"
        content = reply["result"].get("structuredContent")
        assert isinstance(content, dict), f"{tool} {arguments}: no structuredContent in {reply['result']}"
        return content
