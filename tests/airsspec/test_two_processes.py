"""Two processes make concurrent transitions and step completions on one workspace: nothing
either of them was told succeeded is lost, and every final state is valid."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest
import trio

from specactor.domain.airsspec.lifecycle import TRANSITIONS
from tests.airsspec.support import airsspec_server, bundle_on_disk
from tests.airsspec.worker import STEPS

REPO = Path(__file__).resolve().parents[2]
WAIT = 120.0  # seconds for both workers together; they take a few seconds when things work
SPECS = 3
OPS = 60


async def prepared(root: Path) -> list[str]:
    """Specs with a plan of STEPS steps whose builds have started (so steps can be completed)."""
    ids = []
    async with airsspec_server(root) as c:
        for n in range(SPECS):
            spec_id = (await c.ok("spec_create", title=f"Shared {n}", description=""))["spec_id"]
            await c.ok("plan_create", spec_id=spec_id, approach="a",
                       steps=[{"title": f"step {i}", "description": ""} for i in range(STEPS)])
            await c.ok("build_start", spec_id=spec_id)
            ids.append(str(spec_id))
    return ids


@pytest.mark.slow
def test_two_processes_lose_no_transition_and_no_completed_step(tmp_path: Path) -> None:
    ids = trio.run(prepared, tmp_path)
    before = {i: len(bundle_on_disk(tmp_path, i).state.history) for i in ids}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.airsspec.worker", str(tmp_path), str(seed), str(OPS),
                               *ids], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for seed in (1, 2)]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=WAIT)
            assert proc.returncode == 0, err.decode()[-3000:]
            outputs.append(msgspec.json.decode(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    done = [op for output in outputs for op in output]
    assert any(op[0] == "transition" for op in done) and any(op[0] == "step" for op in done)
    for spec_id in ids:
        b = bundle_on_disk(tmp_path, spec_id)  # every file parses
        assert b.plan is not None
        completed = {i for i, step in enumerate(b.plan.steps) if step.status == "completed"}
        assert completed == {op[2] for op in done if op[0] == "step" and op[1] == spec_id}
        assert (b.state.build_progress.completed_steps, b.state.build_progress.total_steps) == (len(completed), STEPS)
        history = b.state.history[before[spec_id]:]
        told = Counter((op[2], op[3]) for op in done if op[0] == "transition" and op[1] == spec_id)
        assert Counter((t.from_state, t.to_state) for t in history) == told
        chain = [b.state.history[before[spec_id] - 1].to_state, *(t.to_state for t in history)]
        assert all(nxt in TRANSITIONS[prev] for prev, nxt in itertools.pairwise(chain))
        assert chain[-1] == b.state.lifecycle == b.spec.meta.state
        assert (b.state.completed_at is not None) == ("done" in chain)
