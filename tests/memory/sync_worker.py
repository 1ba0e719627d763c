"""A process that syncs and kills itself with SIGKILL in the middle of writing the pointers.

    python -m tests.memory.sync_worker DB KNOWLEDGE N    # die after N pointer writes

It prints `writing` before the first write, so a test can tell the kill came mid-transaction.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import trio

from specactor.actors.memory_actors import MemoryActors
from specactor.sqlite import memory_db


def main() -> None:
    db, knowledge, limit = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    real = memory_db._upsert_pointer
    written = [0]

    def dying(conn: sqlite3.Connection, *args: Any) -> None:
        if written[0] == 0:
            print("writing", flush=True)
        if written[0] == limit:
            os.kill(os.getpid(), signal.SIGKILL)
        written[0] += 1
        real(conn, *args)

    memory_db._upsert_pointer = dying  # type: ignore[assignment]
    actors = MemoryActors(db, knowledge)

    async def sync() -> None:
        async with trio.open_nursery() as nursery:
            for spec in actors.specs:
                await nursery.start(spec.start)
            await actors.sync.sync(force=False, company_id="default")
            nursery.cancel_scope.cancel()

    trio.run(sync)
    print("finished", flush=True)


if __name__ == "__main__":
    main()
