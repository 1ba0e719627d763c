"""Resource readings for a server process, straight from /proc (Linux only).

- `rss_mb`: VmRSS (resident set now) and `peak_rss_mb`: VmHWM (its high-water mark), in
  decimal megabytes (10**6 bytes; /proc reports KiB);
- `cpu_seconds`: user + system CPU time the process has used so far (utime + stime of
  /proc/<pid>/stat, in clock ticks, usually 10 ms resolution), threads included;
  `cpu_with_children`: the same plus the children it has waited for (cutime + cstime: git);
- `tree`: a process and every process below it (specactor's HTTP workers, its pool workers),
  `summed`: a reading summed over such a list, skipping processes that have exited.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable

TICK = os.sysconf("SC_CLK_TCK")


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(f"{field} not in /proc/{pid}/status")


def rss_mb(pid: int) -> float:
    return _status_kib(pid, "VmRSS") * 1024 / 1e6


def peak_rss_mb(pid: int) -> float:
    return _status_kib(pid, "VmHWM") * 1024 / 1e6


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": field 3 is fields[0]
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / TICK


def cpu_with_children(pid: int) -> float:
    """`cpu_seconds` plus the CPU of the children `pid` has waited for (cutime + cstime)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return sum(int(v) for v in fields[11:15]) / TICK


def tree(pid: int) -> list[int]:
    """`pid` and every process below it, from /proc/*/stat (each process's parent)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue  # exited meanwhile
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        found.append(here)
        todo += children.get(here, [])
    return found


def summed(read: Callable[[int], float], pids: Iterable[int]) -> float:
    """`read` summed over `pids`, skipping any that has exited."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, KeyError):
            total += read(pid)
    return total
