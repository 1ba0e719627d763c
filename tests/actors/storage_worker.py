"""A separate process that writes through a StorageActor, for the multi-process storage tests.

    python -m tests.actors.storage_worker ROOT N            # N read-increment-write transactions
                                                             # on ROOT/counter.txt
    python -m tests.actors.storage_worker ROOT N payload    # N (0: endless) self-checking ~1 MiB
                                                             # payloads to ROOT/big/payload.txt

In payload mode it prints `staged I` from inside the transaction (just before the commit
starts) and `committed I` after it, so a test can SIGKILL it mid-write. A payload is a
sha256 header line followed by a body the hash covers; `check_payload` verifies one.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import trio

from specactor.actors.storage import StorageActor, Tx

COUNTER = "counter.txt"
PAYLOAD = "big/payload.txt"
PAYLOAD_BYTES = 1024 * 1024


def make_payload(i: int) -> bytes:
    line = f"payload {i:08d} " + "abcdefghijklmnopqrstuvwxyz0123456789" + "\n"
    body = (line * (PAYLOAD_BYTES // len(line) + 1)).encode()[:PAYLOAD_BYTES]
    return hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def check_payload(data: bytes) -> bool:
    """True when `data` is one complete payload: its header hash matches its body."""
    header, sep, body = data.partition(b"\n")
    return sep == b"\n" and len(body) == PAYLOAD_BYTES and hashlib.sha256(body).hexdigest().encode() == header


def increment(tx: Tx) -> int:
    raw = tx.read(COUNTER)
    value = int(raw) if raw else 0
    tx.write(COUNTER, str(value + 1).encode())
    return value + 1


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


async def main(root: Path, n: int, mode: str) -> None:
    actor = StorageActor(root)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        if mode == "payload":
            i = 0
            while n == 0 or i < n:
                i += 1
                data = make_payload(i)

                def stage(tx: Tx, i: int = i, data: bytes = data) -> None:
                    tx.write(PAYLOAD, data)
                    say(f"staged {i}")

                await actor.transact(stage, timeout=60.0)
                say(f"committed {i}")
        else:
            for _ in range(n):
                await actor.transact(increment, timeout=60.0)
            say("done")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    from specactor import logsetup

    logsetup.configure("warning")  # logs on stderr, as the server's: stdout is this worker's protocol
    trio.run(main, Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "counter")
