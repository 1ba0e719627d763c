"""CPU-heavy work as tasks a worker process can run: what runs, on what shared state, and how
the answer comes back.

A `Task` names a top-level function `run(state, *args)`. `state` is large and changes rarely (a
knowledge snapshot, a workspace's items): it crosses to a worker once, as msgpack bytes under a
key, and stays in that worker's cache (`perform`); each call then sends only its small `args`.
The answer crosses back as msgpack too (pickling msgspec Structs cost 30x more), decoded to `out`.
Run in-process (`Task.inline`), the same function gets the caller's own state: no copy at all.
No trio here: this module is imported by the worker processes.
"""

from __future__ import annotations

import importlib
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

S = TypeVar("S")
R = TypeVar("R")

CACHED_STATES = 4  # per worker: a workspace's state or two, and their previous versions while in use
# What numpy's BLAS libraries (OpenBLAS, MKL, Accelerate) read, when loaded, for how many threads to run.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def one_blas_thread() -> None:
    """Ask numpy's BLAS, when this process (or one it starts) loads it, for one thread, unless the user
    chose a number. The server's concurrency is its own (the worker pool, one job a worker); BLAS
    threads beside it only spin: a chunk's matrix product (`vectors.Matrix.dots_many`) took the same wall
    time with two threads, and half as much CPU again. numpy is imported after this, on first use."""
    for name in BLAS_THREADS:
        os.environ.setdefault(name, "1")


class CacheMiss(Exception):
    """The worker does not hold `key` (it was replaced, or evicted it): send the state again."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


@dataclass(frozen=True)
class Task(Generic[S, R]):
    """Args:
        name: how logs and metrics name it.
        run: `run(state, *args) -> R`, a module-level function (pickled by reference).
        load: the worker's state from the bytes `dump` made (e.g. decode, then index).
        dump: the caller's state as bytes for a worker.
        out: the type `run` returns, for decoding a worker's answer.
        after: what `run`'s answer becomes for the caller, in-process or decoded (default: itself).
    """

    name: str
    run: Callable[..., Any]
    load: Callable[[bytes], S]
    dump: Callable[[S], bytes]
    out: Any
    after: Callable[[Any], R] | None = None

    def inline(self, state: S, *args: Any) -> R:
        return self._after(self.run(state, *args))

    def decode(self, data: bytes) -> R:
        decoder = _decoders.get(self.name)
        if decoder is None:
            decoder = _decoders[self.name] = msgspec.msgpack.Decoder(self.out)
        return self._after(decoder.decode(data))

    def _after(self, answer: Any) -> R:
        result: R = answer if self.after is None else self.after(answer)
        return result


_decoders: dict[str, msgspec.msgpack.Decoder[Any]] = {}  # per task name, in the process answers reach
_states: OrderedDict[str, Any] = OrderedDict()  # a worker's cache: key -> loaded state, least recent first


def perform(task: Task[Any, Any], key: str, payload: bytes | None, args: tuple[Any, ...]) -> bytes:
    """Run `task` in a worker process on the state cached under `key` (loaded from `payload` when
    sent), and answer msgpack bytes.

    Raises:
        CacheMiss: `payload` is None and this worker does not hold `key`.
    """
    state = _states.get(key)
    if state is None:
        if payload is None:
            raise CacheMiss(key)
        state = task.load(payload)
        _states[key] = state
        while len(_states) > CACHED_STATES:
            _states.popitem(last=False)
    else:
        _states.move_to_end(key)
    return msgspec.msgpack.encode(task.run(state, *args))


def warm(modules: tuple[str, ...]) -> int:
    """Import `modules` (what the tasks will need) ahead of need; answer this worker's pid."""
    one_blas_thread()
    for name in modules:
        importlib.import_module(name)
    return os.getpid()
