"""`specactor demo` runs end to end: the transcript a newcomer sees after `just demo`."""

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_drives_the_server_with_the_official_client_and_finishes() -> None:
    done = subprocess.run([sys.executable, "-m", "specactor", "demo"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "initialize (the 2025-11-25 handshake)" in done.stdout
    assert "picks the 2026-07-28 era" in done.stdout
    assert "dependency_not_satisfied" in done.stdout  # the AirsSpec story refuses the blocked build
    assert '"deleted": true' in done.stdout  # and the memory story forgets what it remembered
    # the graph story: a step completed through a tool shows up in the (double's) Emergent graph
    after = done.stdout.split("after plan_step_complete:")[1].split("──")[0]
    assert after.count('"step status": "completed"') == 2, after
    assert "demo finished" in done.stdout
