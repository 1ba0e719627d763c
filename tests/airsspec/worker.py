"""A separate process driving the airsspec tools on a shared workspace, for the two-process test.

    python -m tests.airsspec.worker ROOT SEED N SPEC_ID...

Runs a full server in memory (its own storage actor and workspace lock), makes N random
transitions, step completions and progress reports on the given specs, and prints one JSON
line: every call that succeeded, so the parent can check that none was lost.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import msgspec
import trio

from tests.airsspec.support import airsspec_server

STATES = ["active", "blocked", "blocked", "active", "active", "done"]
STEPS = 8


async def main(root: Path, seed: int, n: int, spec_ids: list[str]) -> None:
    rng = random.Random(seed)
    done: list[list[Any]] = []
    async with airsspec_server(root) as c:
        for _ in range(n):
            spec_id = rng.choice(spec_ids)
            roll = rng.random()
            if roll < 0.4:
                to = rng.choice(STATES)
                reply = await c.call("spec_transition", spec_id=spec_id, to_state=to, reason=f"worker {seed}")
                if reply["success"]:
                    done.append(["transition", spec_id, reply["data"]["from_state"], to])
            elif roll < 0.85:
                index = rng.randrange(STEPS)
                reply = await c.call("plan_step_complete", spec_id=spec_id, step_index=index)
                if reply["success"]:
                    done.append(["step", spec_id, index])
            else:
                reply = await c.call("build_update", spec_id=spec_id, current_step=f"worker {seed}")
            if not reply["success"] and reply["error"]["code"] not in ("CONFLICT",):
                raise AssertionError(reply)
    sys.stdout.write(msgspec.json.encode(done).decode() + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
