"""The bench's /proc readings over a process tree (bench/procstat.py): children found, the exited skipped.

No timing here (benchmarks stay in bench/).
"""

from __future__ import annotations

import os
import subprocess
import sys

from bench import procstat


def test_a_tree_holds_the_process_and_its_children_and_sums_skip_the_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        pids = procstat.tree(os.getpid())
        assert pids[0] == os.getpid() and child.pid in pids
        assert procstat.summed(procstat.rss_mb, pids) > procstat.rss_mb(os.getpid())
        assert procstat.cpu_with_children(os.getpid()) >= procstat.cpu_seconds(os.getpid())
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)

    def gone(pid: int) -> float:
        raise FileNotFoundError(pid)

    assert procstat.summed(gone, [child.pid]) == 0.0
