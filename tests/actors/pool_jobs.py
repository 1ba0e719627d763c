"""Tasks for the worker pool's tests, importable by its worker processes (they run by reference)."""

from __future__ import annotations

import os
import socket
import time

import msgspec

from specactor.concurrency.tasks import Task


def _load(data: bytes) -> list[int]:
    return msgspec.msgpack.decode(data, type=list[int])


def _dump(state: list[int]) -> bytes:
    return msgspec.msgpack.encode(state)


def _total(state: list[int], extra: int) -> tuple[int, int]:
    """The state's sum plus `extra`, and the pid that worked it out."""
    return sum(state) + extra, os.getpid()


def _hang(state: list[int], path: str) -> tuple[int, int]:
    """Tell the test listening at the unix socket `path` this worker's pid, then never answer."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        sock.sendall(str(os.getpid()).encode())
    while True:
        time.sleep(1)


def _environ(state: list[int], name: str) -> tuple[str, int]:
    """This worker's value of the environment variable `name` ("" when unset), and its pid."""
    return os.environ.get(name, ""), os.getpid()


def _die(state: list[int], code: int) -> tuple[int, int]:
    os._exit(code)


TOTAL: Task[list[int], tuple[int, int]] = Task("total", _total, _load, _dump, tuple[int, int])
ENVIRON: Task[list[int], tuple[str, int]] = Task("environ", _environ, _load, _dump, tuple[str, int])
HANG: Task[list[int], tuple[int, int]] = Task("hang", _hang, _load, _dump, tuple[int, int])
DIE: Task[list[int], tuple[int, int]] = Task("die", _die, _load, _dump, tuple[int, int])
