"""The trio side of `protocol.context.Runtime`: sleeping, and the worker thread pool.

Blocking work (file system, SQLite, CPU-heavy parsing) runs on at most `threads` worker
threads so it never stalls the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")


class TrioRuntime:
    def __init__(self, threads: int = 8) -> None:
        self.limiter = trio.CapacityLimiter(threads)

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def sleep_forever(self) -> None:
        await trio.sleep_forever()

    async def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)
