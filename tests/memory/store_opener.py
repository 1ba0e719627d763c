"""A process that opens many new memory stores as the memory store actor does, each at the same
moment as a twin process (a shared barrier), for the two-process creation test.

`open_each(paths, barrier, results)` puts one list on `results`: what went wrong, per store.
"""

from __future__ import annotations

from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from specactor.sqlite import memory_db


def open_each(paths: list[Path], barrier: Barrier, results: Queue[list[str]]) -> None:
    errors: list[str] = []
    for path in paths:
        barrier.wait()
        try:
            memory_db.close_all([memory_db.connect(path, writer=True), memory_db.connect(path, writer=False)])
        except Exception as exc:  # reported to the test, which shows them all
            errors.append(f"{path.parent.name}: {type(exc).__name__}: {exc}")
    results.put(errors)
