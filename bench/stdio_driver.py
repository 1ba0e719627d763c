"""The stdio transport: a raw pipe client for newline-delimited JSON-RPC servers.

Each server is a child process (`sys.executable ...`, cwd = a fresh temporary directory) with
three pipes. The client is single-threaded on the measuring side: a batch of requests is
written with as few `os.write` calls as the pipe allows (all of them at once for a 100-request
burst), then one epoll loop keeps writing what remains and reads replies as they arrive,
matching them to requests by id. Each reply is timestamped when its bytes are read. A daemon
thread drains stderr (the servers' JSON logs) so that pipe never fills, keeping the last
lines for error reports.

Closing stdin is the shutdown signal: the servers exit 0 on EOF. One that does not within
the timeout is terminated, then killed.
"""

from __future__ import annotations

import collections
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from bench.transport import HarnessError, Reply, ServerSpec

READ_SIZE = 1 << 20  # a burst's replies in few reads; the pipe gives what it holds


class _Head(msgspec.Struct):
    """The parts of a JSON-RPC message the client looks at; the rest is skipped unparsed."""

    id: int | str | None = None
    method: str | None = None
    error: msgspec.Raw | None = None


_head = msgspec.json.Decoder(_Head)


class StdioConnection:
    def __init__(self, spec: ServerSpec, workdir: Path) -> None:
        self.spec = spec
        env = dict(os.environ)
        env.update(spec.env)
        self.spawned_ns = time.perf_counter_ns()
        self.proc = subprocess.Popen(
            spec.command(workdir), cwd=workdir, env=env, bufsize=0,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.pid = self.proc.pid
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._out, selectors.EVENT_READ)
        # What came after the last newline; a bytearray grown in place, and only what was read since is
        # scanned for the next newline: a 340 KB reply read 64 KB at a time was copied and split six times
        # over (`buf + data`), the client's cost, not the server's, in the server's latency.
        self._buf = bytearray()
        self._tail: collections.deque[bytes] = collections.deque(maxlen=20)
        self._drain = threading.Thread(target=self._drain_stderr, name=f"stderr-{spec.key}", daemon=True)
        self._drain.start()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        while chunk := os.read(fd, 1 << 16):
            self._tail.append(chunk)

    def stderr_tail(self) -> str:
        return b"".join(self._tail)[-4000:].decode(errors="replace")

    def _fail(self, what: str) -> HarnessError:
        return HarnessError(f"{self.spec.label} (pid {self.pid}): {what}\n--- stderr tail ---\n"
                            f"{self.stderr_tail()}")

    def notify(self, message: bytes) -> None:
        self.request_many([], 5.0, extra=message + b"\n")

    def request_many(self, messages: Sequence[tuple[int, bytes]], timeout: float, *,
                     extra: bytes = b"") -> list[Reply]:
        pending = {mid for mid, _ in messages}
        out = memoryview(b"".join([m + b"\n" for _, m in messages]) + extra)
        replies: list[Reply] = []
        sent_ns = time.perf_counter_ns()
        deadline = sent_ns + int(timeout * 1e9)
        out = self._write_some(out)
        writing = False
        while out or pending:
            if out and not writing:
                self._sel.register(self._in, selectors.EVENT_WRITE)
                writing = True
            elif not out and writing:
                self._sel.unregister(self._in)
                writing = False
            left = (deadline - time.perf_counter_ns()) / 1e9
            if left <= 0:
                raise self._fail(f"timed out after {timeout} s with {len(pending)} replies missing")
            for key, _ in self._sel.select(left):
                if key.fd == self._out:
                    self._read(sent_ns, pending, replies)
                else:
                    out = self._write_some(out)
        if writing:
            self._sel.unregister(self._in)
        return replies

    def _write_some(self, out: memoryview) -> memoryview:
        try:
            while out:
                out = out[os.write(self._in, out):]
        except BlockingIOError:
            pass
        except BrokenPipeError as err:
            raise self._fail("stdin closed (the server exited)") from err
        return out

    def _read(self, sent_ns: int, pending: set[int], replies: list[Reply]) -> None:
        try:
            data = os.read(self._out, READ_SIZE)
        except BlockingIOError:
            return
        received_ns = time.perf_counter_ns()
        if not data:
            raise self._fail(f"stdout closed (exit code {self.proc.poll()})")
        if b"\n" not in data:
            self._buf += data
            return
        last = data.rindex(b"\n")
        lines = (bytes(self._buf) + data[:last]).split(b"\n") if self._buf else data[:last].split(b"\n")
        self._buf = bytearray(data[last + 1:])
        for line in lines:
            if not line.strip():
                continue
            try:
                head = _head.decode(line)
            except msgspec.DecodeError as err:
                raise self._fail(f"not JSON-RPC on stdout: {line[:200]!r}") from err
            if head.method is not None or not isinstance(head.id, int):
                continue  # a notification or a server-to-client request: not ours to time
            if head.id not in pending:
                raise self._fail(f"reply to unknown or repeated id {head.id}")
            pending.discard(head.id)
            error = bytes(head.error) if head.error is not None else None
            replies.append(Reply(head.id, sent_ns, received_ns, line, error))

    def close(self, timeout: float) -> int | None:
        self._sel.close()
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            code = None
        self._drain.join(2)
        self.proc.stdout.close()  # type: ignore[union-attr]
        self.proc.stderr.close()  # type: ignore[union-attr]
        return code


class StdioTransport:
    name = "stdio"

    def open(self, spec: ServerSpec, workdir: Path) -> StdioConnection:
        return StdioConnection(spec, workdir)
