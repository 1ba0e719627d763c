"""Background work that gives way to requests: wait for a gap between them, but not for ever."""

from __future__ import annotations

from collections.abc import Callable

import trio


async def gap_between_requests(quiet_for: Callable[[], float], quiet: float, max_defer: float,
                               skip: Callable[[], bool] = lambda: False) -> None:
    """Return once no request has been in flight for `quiet` seconds (`quiet_for()`: the
    dispatcher's, 0 while any is in flight), or after `max_defer` seconds, or once `skip()`.

    A poll, not an event: a request ending is the dispatcher's hot path, which tells no one.
    """
    deadline = trio.current_time() + max_defer
    for _ in range(int(max_defer / quiet) + 1):
        waited = quiet_for()
        if skip() or waited >= quiet or trio.current_time() >= deadline:
            return
        await trio.sleep(min(quiet - waited, deadline - trio.current_time()))
