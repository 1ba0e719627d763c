"""One real `python -m specactor serve` subprocess, driven over its stdin/stdout pipes.

Threads move the bytes (a reader per output pipe, a writer for stdin), so every wait is a
`queue.get` with a timeout: a server that stops reading or stops answering is a `Hang`, never
a stuck test. `exchange` writes one example's bytes, then cancels its open-ended requests and
sends a probe (ping or server/discover, and a real tools/call), and checks every line the
server wrote against `oracle.expect`.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from specactor.protocol.versions import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from tests.fuzz.oracle import Expectation, Id, check_line, expect

ROOT = Path(__file__).resolve().parents[2]
META = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
# Low enough that the few-MB lines of `frames.LongPiece` take the over-long-line path too.
MAX_LINE = 1 << 20
DEADLINE = float(os.environ.get("LIVE_FUZZ_DEADLINE", "15"))  # seconds for every reply of one example
_probes = itertools.count(1)


class Hang(AssertionError):
    """The server did not read or answer within the deadline."""


def frame(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


class LiveServer:
    """Args:
        root: the workspace (and working directory) of the server.
        era: "2025-11-25" or "2025-03-26" (initialize), or "2026-07-28" (the `_meta` envelope).
    """

    def __init__(self, root: Path, era: str) -> None:
        self.root = root
        self.era = era
        self.batches = era == "2025-03-26"
        self.modern = era == "2026-07-28"
        self.proc: subprocess.Popen[bytes] | None = None
        self.catalog: dict[str, Any] = {}
        self.late: Counter[Id] = Counter()  # optional replies not yet seen: they may still come
        self.suspect = False

    # ------------------------------------------------------------------ the process

    def ensure(self) -> None:
        """Start the server if it is not running (or a failed example left it suspect)."""
        if self.proc is not None and self.proc.poll() is None and not self.suspect:
            return
        self.stop()
        self.root.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "specactor", "serve", "--root", str(self.root), "--no-session-log"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.root,
            env={**os.environ, "PYTHONPATH": str(ROOT), "SPECACTOR_GRACE_PERIOD": "1",
                 "SPECACTOR_MAX_LINE_BYTES": str(MAX_LINE)})
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: collections.deque[bytes] = collections.deque(maxlen=400)
        self.errors: list[str] = []  # error-level log lines not yet reported
        self.writes: queue.Queue[tuple[bytes, threading.Event] | None] = queue.Queue()
        self.late.clear()
        self.suspect = False
        self.threads = [threading.Thread(target=target, args=(self.proc,), daemon=True)
                        for target in (self._read_stdout, self._read_stderr, self._write_stdin)]
        for thread in self.threads:
            thread.start()
        self._handshake()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        self.writes.put(None)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        for thread in self.threads:
            thread.join(timeout=5)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()

    def _read_stdout(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        pending = b""
        while chunk := proc.stdout.read1(1 << 20):
            pending += chunk
            *whole, pending = pending.split(b"\n")
            for line in whole:
                self.lines.put(line)
        if pending:
            self.lines.put(pending + b" <no newline before EOF>")
        self.lines.put(None)

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.stderr.append(line)
            if b'"level":"error"' in line or b'"level":"critical"' in line:
                self.errors.append(line.decode("utf-8", "replace").strip())

    def _write_stdin(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        while (item := self.writes.get()) is not None:
            data, done = item
            try:
                proc.stdin.write(data)
                proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                return
            done.set()
        proc.stdin.close()

    def write(self, data: bytes) -> None:
        done = threading.Event()
        self.writes.put((data, done))
        if not done.wait(DEADLINE):
            raise Hang(f"the server did not read {len(data)} bytes within {DEADLINE:g} s{self.tail()}")

    def next_line(self, deadline: float, waiting_for: str) -> bytes:
        try:
            line = self.lines.get(timeout=max(0.0, deadline - _now()))
        except queue.Empty:
            raise Hang(f"no reply within {DEADLINE:g} s; waiting for {waiting_for}{self.tail()}") from None
        if line is None:
            self.lines.put(None)
            raise AssertionError(f"the server died (exit status {self._status()}){self.tail()}")
        return line

    def _status(self) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def tail(self) -> str:
        return "\n--- server stderr (last lines) ---\n" + b"".join(list(self.stderr)[-15:]).decode("utf-8", "replace")

    # ------------------------------------------------------------------ the protocol

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request outside any example (handshake, catalog); its reply."""
        ident = f"setup-{next(_probes)}"
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None or self.modern:
            msg["params"] = {**(params or {}), **({"_meta": META} if self.modern else {})}
        self.write(frame(msg))
        deadline = _now() + DEADLINE
        while True:
            for item in check_line(self.next_line(deadline, ident), batches=self.batches):
                if item.get("id") == ident:
                    return item

    def _handshake(self) -> None:
        if self.modern:
            assert "result" in self.request("server/discover"), "server/discover failed"
        else:
            reply = self.request("initialize", {"protocolVersion": self.era, "capabilities": {},
                                                "clientInfo": {"name": "fuzz", "version": "0"}})
            assert reply["result"]["protocolVersion"] == self.era, reply
            self.write(frame({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        self.catalog = {
            "tools": {t["name"]: t["inputSchema"] for t in self.request("tools/list")["result"]["tools"]},
            "resources": [r["uri"] for r in self.request("resources/list")["result"]["resources"]],
            "templates": [t["uriTemplate"] for t in
                          self.request("resources/templates/list")["result"]["resourceTemplates"]],
            "prompts": {p["name"]: [a["name"] for a in p.get("arguments", [])]
                        for p in self.request("prompts/list")["result"]["prompts"]},
        }

    def probe(self) -> list[tuple[str, bytes]]:
        n = next(_probes)
        meta = {"_meta": META} if self.modern else {}
        alive = {"jsonrpc": "2.0", "id": f"probe-{n}-alive", "method": "server/discover" if self.modern else "ping",
                 **({"params": meta} if meta else {})}
        call = {"jsonrpc": "2.0", "id": f"probe-{n}-call", "method": "tools/call",
                "params": {"name": "spec_list", "arguments": {}, **meta}}
        return [(str(alive["id"]), frame(alive)), (str(call["id"]), frame(call))]

    def exchange(self, chunks: list[bytes]) -> None:
        """Write one example (in these chunks), then the probe; check every reply. A failure
        leaves the server suspect, so the next example (or a shrink step) starts a fresh one."""
        self.ensure()
        try:
            self._exchange(chunks)
        except BaseException:
            self.suspect = True
            raise

    def _exchange(self, chunks: list[bytes]) -> None:
        data = b"".join(chunks)
        exp = expect(data, batches=self.batches, max_line=MAX_LINE)
        for chunk in chunks:
            self.write(chunk)
        cancels = b"".join(frame({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                  "params": {"requestId": ident}}) for ident in exp.open_ended)
        probes = self.probe()
        self.write(cancels + b"".join(data for _, data in probes))
        self._collect(exp, dict(probes), data)

    def _collect(self, exp: Expectation, probes: dict[str, bytes], sent: bytes) -> None:
        got: Counter[Id] = Counter()
        anonymous = 0
        probe_replies: dict[str, dict[str, Any]] = {}
        deadline = _now() + DEADLINE

        def missing() -> str:
            owed = [i for i, n in exp.must.items() if got[i] < n] + [p for p in probes if p not in probe_replies]
            short = f"{exp.anon_min - anonymous} id-less error replies; " if anonymous < exp.anon_min else ""
            return f"{short}replies to {owed[:10]!r} (sent {_show(sent)})"

        while len(probe_replies) < len(probes) or anonymous < exp.anon_min or any(
                got[i] < n for i, n in exp.must.items()):
            line = self.next_line(deadline, missing())
            assert b"root:x:0:0:" not in line, f"a reply carries /etc/passwd: {line[:300]!r} (sent {_show(sent)})"
            for item in check_line(line, batches=self.batches):
                if "method" in item:
                    continue  # notifications (log messages, progress, list changes)
                ident = item.get("id")
                if ident is None:
                    anonymous += 1
                    assert "error" in item and anonymous <= exp.anon_max, (
                        f"more id-less error replies than unreadable lines ({anonymous} > {exp.anon_max}): "
                        f"{_brief(item)} (sent {_show(sent)})")
                elif isinstance(ident, str) and ident in probes:
                    assert "result" in item and item["result"].get("isError") is not True, (
                        f"the probe failed after the example: {_brief(item)} (sent {_show(sent)}){self.tail()}")
                    probe_replies[ident] = item
                elif got[ident] < exp.must[ident] + exp.may[ident]:
                    got[ident] += 1
                elif self.late[ident] > 0:
                    self.late[ident] -= 1
                else:
                    raise AssertionError(f"a reply to no outstanding request (id {ident!r}, answered "
                                         f"{got[ident]} times already): {_brief(item)} (sent {_show(sent)})")
                if "error" in item:
                    assert item["error"]["code"] != -32603, f"an internal error: {_brief(item)} (sent {_show(sent)})"
        for ident, n in exp.may.items():  # unanswered optional replies may still arrive later
            self.late[ident] += max(0, n + exp.must[ident] - got[ident])
        errors, self.errors = self.errors, []
        assert not errors, f"the server logged errors: {errors[:3]} (sent {_show(sent)})"


def _now() -> float:
    return time.monotonic()


def _brief(item: Any) -> str:
    text = repr(item)
    return text[:600] + (f"... ({len(text)} characters)" if len(text) > 600 else "")


def _show(data: bytes) -> str:
    return repr(data[:600]) + (f"... ({len(data)} bytes)" if len(data) > 600 else "")
