"""How replies reach stdout: the answers the transport's own task makes while more lines wait in
its read buffer go out together, in order, in as few writes as HELD_MAX allows; nothing is held
once the transport waits for input, or when the input ends."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.lowlevel
import trio.testing

from specactor import app as application
from specactor.actors import stdio
from specactor.config import Config
from specactor.protocol.session import Session

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
WAIT = 20.0


class Counting:
    """The stdout stream, each write recorded."""

    def __init__(self, inner: trio.lowlevel.FdStream) -> None:
        self.inner = inner
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        await self.inner.send_all(data)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Pipes:
    def __init__(self, into: int, out: int, stdout: Counting) -> None:
        self.into = into  # the client's end of stdin
        self.out = trio.lowlevel.FdStream(out)  # the client's end of stdout
        self.stdout = stdout
        self.buf = b""

    async def write(self, *messages: dict[str, Any]) -> None:
        data = b"".join(msgspec.json.encode(m) + b"\n" for m in messages)
        while data:
            await trio.lowlevel.wait_writable(self.into)
            data = data[os.write(self.into, data):]

    async def replies(self, n: int) -> list[dict[str, Any]]:
        with trio.fail_after(WAIT):
            while self.buf.count(b"\n") < n:
                self.buf += await self.out.receive_some(1 << 16)
        lines = self.buf.split(b"\n")
        self.buf = b"\n".join(lines[n:])
        return [msgspec.json.decode(line) for line in lines[:n]]


def ping(i: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": "ping"}


@contextlib.asynccontextmanager
async def serving(root: Path, monkeypatch: pytest.MonkeyPatch, *, defer: bool = False) -> AsyncIterator[
        tuple[Pipes, application.App]]:
    """An app built on `root` (with `defer`, its toolsets registered only when the test says so)
    served by the stdio transport over real pipes, stdout's writes counted; stdin closed at exit."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    for fd in (in_w, out_r):
        os.set_blocking(fd, False)
    counting: list[Counting] = []
    plain = stdio.open_stream

    def open_stream(fd: int) -> Any:
        if fd != out_w:
            return plain(fd)
        counting.append(Counting(trio.lowlevel.FdStream(fd)))
        return counting[0]

    monkeypatch.setattr(stdio, "open_stream", open_stream)
    built = application.build(Config(root=str(root)), defer=defer)
    transport = stdio.StdioTransport(built.dispatcher, stdio.StdioFds(in_r, out_w))
    async with trio.open_nursery() as nursery:
        await application.start_actors(built, nursery)
        await nursery.start(transport.run)
        pipes = Pipes(in_w, out_r, counting[0])
        yield pipes, built
        os.close(in_w)
        with trio.fail_after(WAIT):
            await transport.closed.wait()
        nursery.cancel_scope.cancel()
    await pipes.out.aclose()


@pytest.fixture
async def pipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Pipes]:
    async with serving(tmp_path, monkeypatch) as (pipes, _):
        await pipes.write({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        assert (await pipes.replies(1))[0]["result"]["protocolVersion"] == "2025-11-25"
        await pipes.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        pipes.stdout.writes.clear()
        yield pipes


async def test_a_pipelined_burst_answered_inline_goes_out_in_one_write_and_in_order(pipes: Pipes) -> None:
    await pipes.write(*[ping(i) for i in range(1, 101)])
    replies = await pipes.replies(100)
    assert [r["id"] for r in replies] == list(range(1, 101)) and all(r["result"] == {} for r in replies)
    assert len(pipes.stdout.writes) == 1  # one write per reply before: 100


async def test_held_answers_go_out_every_held_max_bytes(pipes: Pipes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio, "HELD_MAX", 400)  # a ping's reply is ~36 bytes: ~11 a write
    await pipes.write(*[ping(i) for i in range(1, 101)])
    replies = await pipes.replies(100)
    assert [r["id"] for r in replies] == list(range(1, 101))
    assert 9 <= len(pipes.stdout.writes) <= 12 and all(len(w) < 400 + 64 for w in pipes.stdout.writes)


async def test_a_lone_request_is_answered_before_the_transport_waits_for_the_next(pipes: Pipes) -> None:
    for i in range(1, 4):  # each answer is awaited before the next request is written
        await pipes.write(ping(i))
        assert [r["id"] for r in await pipes.replies(1)] == [i]
    assert len(pipes.stdout.writes) == 3


async def test_before_the_toolsets_are_registered_initialize_is_answered_while_a_request_behind_it_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(tmp_path, monkeypatch, defer=True) as (pipes, built):  # as `serve` builds it
        await pipes.write({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                          {"jsonrpc": "2.0", "method": "notifications/initialized"},
                          {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})  # pipelined: waits for the toolsets
        assert [r["id"] for r in await pipes.replies(1)] == [1]  # not held behind tools/list
        assert not built.dispatcher.registry_ready.is_set()
        await application.register_deferred(built)
        (listed,) = await pipes.replies(1)
        assert listed["id"] == 2 and listed["result"]["tools"]


F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)


def pipe_max_size() -> int:
    return int(Path("/proc/sys/fs/pipe-max-size").read_text())


async def test_the_transport_widens_its_pipes_so_a_large_answer_goes_out_in_one_write() -> None:
    limit = pipe_max_size()
    r, w = os.pipe()
    os.close(r)
    stream = stdio.open_stream(w)
    assert isinstance(stream, trio.lowlevel.FdStream)
    try:
        # above the user's limit the kernel refuses, and the pipe keeps its size (64 KiB)
        assert fcntl.fcntl(w, F_GETPIPE_SZ) == (stdio.PIPE_SIZE if stdio.PIPE_SIZE <= limit else 65536)
    finally:
        await stream.aclose()
    assert stdio.widen_pipe(w) == -1  # a closed descriptor: refused, not raised


class Recording:
    """A stdout stream that records each write; with `stall`, the first write waits until it is set."""

    def __init__(self, stall: trio.Event | None = None) -> None:
        self.writes: list[bytes] = []
        self.stall = stall

    async def send_all(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        if self.stall is not None and len(self.writes) == 1:
            await self.stall.wait()
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        pass


async def test_answers_sent_by_their_own_tasks_in_one_scheduler_pass_go_out_in_one_write() -> None:
    stream = Recording()
    conn = stdio.StdioConnection(stream, Session())  # type: ignore[arg-type]
    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            for i in range(16):  # a chunk of memory searches answered together: 16 tasks woken at once
                nursery.start_soon(conn.send, b'{"id":%d}' % i)
    assert len(stream.writes) == 1
    assert sorted(stream.writes[0].split(b"\n")) == sorted([b""] + [b'{"id":%d}' % i for i in range(16)])
    await conn.send(b'{"id":99}')  # alone: at once, in a write of its own
    assert stream.writes[1:] == [b'{"id":99}\n']


async def test_what_others_sent_is_written_even_when_the_task_writing_it_is_cancelled() -> None:
    release = trio.Event()
    stream = Recording(stall=release)
    conn = stdio.StdioConnection(stream, Session())  # type: ignore[arg-type]
    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            async def lead(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
                with trio.CancelScope() as scope:
                    task_status.started(scope)
                    await conn.send(b'{"id":1}')
            scope = await nursery.start(lead)
            await trio.testing.wait_all_tasks_blocked()  # its write waits for the client
            await conn.send(b'{"id":2}')  # taken along by the waiting writer: returns at once
            scope.cancel()
        release.set()
        while b'{"id":2}\n' not in stream.writes:
            await trio.testing.wait_all_tasks_blocked()
    assert stream.writes == [b'{"id":1}\n', b'{"id":2}\n']
