"""A counting gate for the dispatcher: `max_concurrency` handlers run, the rest wait in order.

trio's CapacityLimiter tracks borrowers and statistics we do not use; on the request path its
bookkeeping cost more than the handler of a small tool. This keeps the count and a parking lot.
"""

from __future__ import annotations

import trio
import trio.lowlevel


class Slots:
    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        self._lot = trio.lowlevel.ParkingLot()

    def take_nowait(self) -> bool:
        if self.free > 0:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """A slot, waiting (first come, first served) while none is free."""
        if not self.take_nowait():
            await self._lot.park()  # `give` hands the slot over directly

    def give(self) -> None:
        if self._lot:
            self._lot.unpark()  # the woken waiter owns the slot; `free` stays as it is
        else:
            self.free += 1

    @property
    def in_use(self) -> int:
        return self.total - self.free
