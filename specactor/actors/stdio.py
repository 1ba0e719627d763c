"""The stdio transport actor: newline-delimited JSON-RPC on stdin/stdout.

It claims fd 1 at start (the protocol keeps a private duplicate; fd 1 then points at
stderr), so a stray print or native write can never corrupt the stream. Lines are read with
trio's FdStream (no thread hop per line), up to `max_line` bytes each; a longer line is
skipped without being held in memory and answered with an error. EOF ends the actor.

The answers the transport's own task makes (requests answered inline) while whole lines remain
in the read buffer are held and written together, in order: before it waits to read, every
HELD_MAX bytes, and at EOF (docs/decisions.md, "The hot path"). A burst of 100 pipelined pings
is one write instead of 100. Answers from requests' own tasks go out within one scheduler pass:
the first to send writes, after that pass, what every task sent meanwhile (a chunk of a burst's
memory searches, answered together, is one write instead of 16).
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
import time

import msgspec
import trio
import trio.lowlevel

from specactor.actors.dispatcher import Dispatcher
from specactor.concurrency.peer import PeerLink
from specactor.logsetup import get_logger
from specactor.protocol.errors import INVALID_REQUEST
from specactor.protocol.frames import Reply, error_response
from specactor.protocol.session import Session

log = get_logger("specactor.stdio")

CHUNK = 64 * 1024
BIG_CHUNK = 1024 * 1024  # once a line is past one chunk, read faster
# Replies the transport's own task makes (requests answered inline) while more lines wait in the
# read buffer are held and written together: at most this many bytes, or before it waits to read.
HELD_MAX = 64 * 1024
# Pipes are widened to this (fcntl F_SETPIPE_SZ; Linux's default limit for a user is 1 MiB).
PIPE_SIZE = 1024 * 1024
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class TooLong:
    def __init__(self, size: int) -> None:
        self.size = size


class StdioFds(msgspec.Struct):
    """The descriptors the protocol uses: a duplicate of stdin and the claimed stdout."""

    read_fd: int
    write_fd: int

    @classmethod
    def claim(cls) -> StdioFds:
        """Duplicate fd 0 and fd 1 for the protocol, then point fd 1 at stderr."""
        sys.stdout.flush()
        read_fd = os.dup(0)
        write_fd = os.dup(1)
        os.dup2(2, 1)
        return cls(read_fd, write_fd)


class _ThreadStream:
    """Blocking I/O on a worker thread, for a regular file that epoll cannot watch."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def receive_some(self, max_bytes: int) -> bytes:
        return await trio.to_thread.run_sync(os.read, self.fd, max_bytes)

    async def send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = await trio.to_thread.run_sync(os.write, self.fd, view)
            view = view[written:]

    async def aclose(self) -> None:
        os.close(self.fd)


def open_stream(fd: int) -> trio.lowlevel.FdStream | _ThreadStream:
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return _ThreadStream(fd)
    if stat.S_ISFIFO(mode):
        widen_pipe(fd)
    return trio.lowlevel.FdStream(fd)


def widen_pipe(fd: int) -> int:
    """Ask for a pipe of PIPE_SIZE bytes (the kernel allocates its pages only as they fill); on
    refusal (above /proc/sys/fs/pipe-max-size, or the user's pipe pages spent) keep what it has.
    A 320 KB answer then goes out in one write instead of ten, each waking the reader."""
    try:
        return fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        return -1


class LineReader:
    """Splits a byte stream into lines, holding at most `max_line` bytes plus one chunk."""

    def __init__(self, stream: trio.lowlevel.FdStream | _ThreadStream, max_line: int) -> None:
        self.stream = stream
        self.max_line = max_line
        self.buf = bytearray()
        self.scanned = 0
        self.skipping = 0  # bytes of an over-long line dropped so far

    def has_line(self) -> bool:
        """Whether a whole line is buffered (`next` would answer without reading)."""
        return self.buf.find(b"\n", self.scanned) >= 0

    async def next(self) -> bytes | TooLong | None:
        """The next line (without its newline), a TooLong marker, or None at EOF."""
        while True:
            end = self.buf.find(b"\n", self.scanned)
            if end >= 0:
                if self.skipping:
                    size = self.skipping + end
                    del self.buf[: end + 1]
                    self.skipping = self.scanned = 0
                    return TooLong(size)
                del_to = end + 1
                if end > self.max_line:
                    del self.buf[:del_to]
                    self.scanned = 0
                    return TooLong(end)
                line = bytes(self.buf[:end])
                del self.buf[:del_to]
                self.scanned = 0
                return line
            self.scanned = len(self.buf)
            if self.skipping or len(self.buf) > self.max_line:
                self.skipping += len(self.buf)
                self.buf.clear()
                self.scanned = 0
            data = await self.stream.receive_some(BIG_CHUNK if len(self.buf) > CHUNK or self.skipping else CHUNK)
            if not data:
                if self.skipping:
                    size, self.skipping = self.skipping + len(self.buf), 0
                    self.buf.clear()
                    return TooLong(size)
                if self.buf:
                    line = bytes(self.buf)
                    self.buf.clear()
                    return line if len(line) <= self.max_line else TooLong(len(line))
                return None
            self.buf += data


class StdioConnection:
    def __init__(self, stream: trio.lowlevel.FdStream | _ThreadStream, session: Session) -> None:
        self.stream = stream
        self.session = session
        self.peer = PeerLink(self.send)
        self._lock = trio.Lock()
        self.broken = trio.Event()
        # While the transport's task answers lines already read, its replies wait here (`hold`).
        self._holder: trio.lowlevel.Task | None = None
        self._held: list[bytes] = []
        self._held_bytes = 0
        # Other tasks' sends wait here for the task writing them (`_leading`), at most one scheduler pass.
        self._queued: list[bytes] = []
        self._leading = False

    def hold(self) -> None:
        """From now on the calling task's sends are held until `flush` (or HELD_MAX bytes)."""
        self._holder = trio.lowlevel.current_task()

    async def flush(self) -> None:
        """Write what is held, in one write, and stop holding; and what other tasks sent, if the task that
        was to write it was cancelled first."""
        self._holder = None
        if self._held:
            held, self._held, self._held_bytes = self._held, [], 0
            held.append(b"")
            await self._write(b"\n".join(held))
        if self._queued and not self._leading:
            await self._write_queued()

    async def send(self, data: bytes) -> None:
        """Write `data` and a newline: held, when the transport's task holds; otherwise with what the other
        tasks send in the same scheduler pass, in one write, by the first of them. A send may return before
        its bytes are written (another task writes them, within the pass); they are written in order."""
        if self.broken.is_set():
            return
        if self._holder is not None and self._holder is trio.lowlevel.current_task():
            self._held.append(data)
            self._held_bytes += len(data) + 1
            if self._held_bytes >= HELD_MAX:
                await self.flush()
                self.hold()
            return
        self._queued.append(data)
        if self._leading:  # the task writing takes this along
            return
        self._leading = True
        try:
            await trio.lowlevel.cancel_shielded_checkpoint()  # the tasks running in this pass add theirs
            await self._write_queued()
        finally:
            if self._queued and not self.broken.is_set():  # cancelled with others' sends still to write
                trio.lowlevel.spawn_system_task(self._lead_on, name="stdio-write")
            else:
                self._leading = False

    async def _lead_on(self) -> None:
        try:
            await self._write_queued()
        finally:
            self._leading = False

    async def _write_queued(self) -> None:
        while self._queued and not self.broken.is_set():
            queued, self._queued = self._queued, []
            queued.append(b"")
            await self._write(b"\n".join(queued))

    async def _write(self, data: bytes) -> None:
        try:
            self._lock.acquire_nowait()  # uncontended: no trip through the scheduler
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as err:
            log.warning("stdout closed; the client is gone", error=str(err))
            self.broken.set()
        finally:
            self._lock.release()

    async def reply(self, reply: Reply) -> None:
        await self.send(reply.data)

    def abandon(self, ident: int | str | None) -> None:
        """Nothing to do: a cancelled request's reply is simply never written."""


class StdioTransport:
    """Args:
        dispatcher: where frames go.
        fds: the claimed descriptors.
        max_line: the longest accepted line in bytes.
    """

    def __init__(self, dispatcher: Dispatcher, fds: StdioFds, *,
                 max_line: int = 64 * 1024 * 1024) -> None:
        self.dispatcher = dispatcher
        self.fds = fds
        self.max_line = max_line
        self.session = Session()
        self.closed = trio.Event()
        self.conn: StdioConnection | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self.conn is None:
            self.conn = StdioConnection(open_stream(self.fds.write_fd), self.session)
        conn = self.conn
        reader = LineReader(open_stream(self.fds.read_fd), self.max_line)
        task_status.started()
        try:
            while not conn.broken.is_set():
                if not reader.has_line():  # about to wait for input: what was answered goes out first
                    await conn.flush()
                line = await reader.next()
                if line is None:
                    break
                at = time.time()
                if isinstance(line, TooLong):
                    await conn.send(error_response(None, INVALID_REQUEST,
                                                   f"Invalid Request: the message is {line.size} bytes; "
                                                   f"the limit is {self.max_line} bytes"))
                    continue
                if self.dispatcher.registry_ready.is_set():  # before, a request may wait in `feed`
                    conn.hold()  # for the toolsets, and `initialize`'s answer must not wait with it
                await self.dispatcher.feed(conn, line, at)
        finally:
            with trio.CancelScope(shield=True):  # answers already made are not dropped at EOF
                await conn.flush()
            self.closed.set()
