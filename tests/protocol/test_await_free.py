"""Which handlers the dispatcher may run in the transport's task: those that cannot wait."""

from __future__ import annotations

import functools
from typing import Any

import trio
import trio.lowlevel

from specactor.protocol.registry import await_free


async def answers_at_once(x: int) -> int:
    return x + 1


async def awaits(x: int) -> int:
    await trio.lowlevel.checkpoint()
    return x


async def iterates(source: Any) -> list[Any]:
    return [item async for item in source]


async def enters(lock: trio.Lock) -> None:
    async with lock:
        pass


async def loops(source: Any) -> None:
    async for _ in source:
        pass


def plain(x: int) -> int:
    return x


def test_an_async_handler_without_await_cannot_wait() -> None:
    assert await_free(answers_at_once)


def test_await_async_for_async_with_and_async_comprehensions_can_wait() -> None:
    assert not any(await_free(fn) for fn in (awaits, iterates, enters, loops))


def test_anything_but_an_async_def_counts_as_waiting() -> None:
    assert not await_free(plain)
    assert not await_free(functools.partial(answers_at_once, 1))
    assert not await_free(lambda x: answers_at_once(x))
