"""A real `python -m specactor.testing.everything` process on pipes, driven synchronously.

Reader threads drain stdout (line by line, every line kept for the purity check) and stderr
(so a chatty server can never block on a full pipe); every wait has a timeout.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec

REPO = Path(__file__).resolve().parents[2]
WAIT = 20.0  # seconds; generous for loaded CI machines, never reached when things work

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class StdioServer:
    """Args:
        root: the workspace (and working directory) of the server.
        env: extra environment variables (SPECACTOR_MAX_LINE_BYTES, ...).
    """

    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        environ = {**os.environ, **(env or {})}
        environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environ.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "specactor.testing.everything", "--root", str(root), "--no-session-log"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root, env=environ)
        self.stdout_lines: list[bytes] = []
        self.stderr = bytearray()
        self.notifications: list[dict[str, Any]] = []
        self.replies: dict[Any, dict[str, Any]] = {}
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._ids = 0
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------ readers

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout_lines.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := self.proc.stderr.read1(65536):
            self.stderr += chunk

    # ------------------------------------------------------------------ I/O

    def send_line(self, data: bytes) -> None:
        """Write `data` plus a newline (the caller guarantees `data` has none of its own)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(_encode(message))

    def receive(self, timeout: float = WAIT) -> Any:
        """The next message from stdout; AssertionError at EOF or after `timeout`."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message from the server within {timeout} s; "
                                 f"stderr tail: {bytes(self.stderr[-2000:])!r}") from None
        assert line is not None, f"the server closed stdout; stderr tail: {bytes(self.stderr[-2000:])!r}"
        return _decode(line)

    def reply_for(self, ident: Any, timeout: float = WAIT) -> dict[str, Any]:
        while ident not in self.replies:
            msg = self.receive(timeout)
            if isinstance(msg, dict) and "method" in msg and "id" not in msg:
                self.notifications.append(msg)
            elif isinstance(msg, dict):
                self.replies[msg.get("id")] = msg
            else:
                raise AssertionError(f"unexpected frame {msg!r}")
        return self.replies.pop(ident)

    def request(self, method: str, params: dict[str, Any] | None = None, *, ident: Any = None,
                timeout: float = WAIT) -> dict[str, Any]:
        if ident is None:
            self._ids += 1
            ident = self._ids
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.reply_for(ident, timeout)

    def initialize(self, version: str = "2025-11-25", *, send_initialized: bool = True) -> dict[str, Any]:
        reply = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                            "clientInfo": {"name": "stdio-test", "version": "0"}})
        if send_initialized:
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def wait_for_notification(self, method: str, count: int = 1, timeout: float = WAIT) -> list[dict[str, Any]]:
        """Read until `count` notifications of `method` have arrived."""
        while len(found := [n for n in self.notifications if n["method"] == method]) < count:
            msg = self.receive(timeout)
            if "method" in msg and "id" not in msg:
                self.notifications.append(msg)
            else:
                self.replies[msg.get("id")] = msg
        return found

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()

    def wait(self, timeout: float = WAIT) -> int:
        return self.proc.wait(timeout)

    def peak_rss_kib(self) -> int:
        """VmHWM: the most resident memory the process has used so far."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(status.split("VmHWM:")[1].split()[0])

    # ------------------------------------------------------------------ lifetime

    def __enter__(self) -> StdioServer:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close_stdin()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(WAIT)
        for thread in self._threads:
            thread.join(WAIT)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
