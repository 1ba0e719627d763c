"""Shutdown: stdin EOF, SIGINT and SIGTERM each exit 0 within the grace period, finishing or
cancelling in-flight work; stdout never carries anything but protocol frames."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


def frame(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


async def start(tmp_path: Path, *extra: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [sys.executable, "-m", "specactor.testing.everything", "--root", str(tmp_path), *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "SPECACTOR_GRACE_PERIOD": "1"})


async def read_lines(proc: trio.Process, count: int) -> list[dict[str, object]]:
    assert proc.stdout is not None
    buf, lines = b"", []
    with trio.fail_after(10):
        while len(lines) < count:
            chunk = await proc.stdout.receive_some(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                lines.append(json.loads(line))
    return lines


async def handshake(proc: trio.Process) -> None:
    assert proc.stdin is not None
    await proc.stdin.send_all(frame(INIT) + frame({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    (reply,) = await read_lines(proc, 1)
    assert reply["id"] == 1


async def test_stdin_eof_finishes_in_flight_work_then_exits_zero(tmp_path: Path) -> None:
    proc = await start(tmp_path)
    await handshake(proc)
    assert proc.stdin is not None
    await proc.stdin.send_all(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                     "params": {"name": "sleep", "arguments": {"seconds": 0.2}}}))
    await proc.stdin.aclose()
    (reply,) = await read_lines(proc, 1)
    assert reply["id"] == 2 and "result" in reply
    with trio.fail_after(10):
        assert await proc.wait() == 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_exits_zero_within_the_grace_period_cancelling_long_work(tmp_path: Path,
                                                                                signum: signal.Signals) -> None:
    proc = await start(tmp_path)
    await handshake(proc)
    assert proc.stdin is not None
    await proc.stdin.send_all(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                     "params": {"name": "sleep", "arguments": {"seconds": 30}}}))
    await proc.stdin.send_all(frame({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
    (pong,) = await read_lines(proc, 1)  # the slow call never delays ping
    assert pong == {"jsonrpc": "2.0", "id": 3, "result": {}}
    proc.send_signal(signum)
    with trio.fail_after(8):  # grace period 1 s plus start-up slack; far below the 30 s call
        assert await proc.wait() == 0
    assert proc.stdout is not None
    rest = await proc.stdout.receive_some(65536)
    assert b'"id":2' not in rest  # cancelled work sends no reply
    await proc.stdin.aclose()
