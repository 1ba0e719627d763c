"""Resource readings for a server process, straight from /proc (Linux only).

- `rss_mb`: VmRSS (resident set now) and `peak_rss_mb`: VmHWM (its high-water mark), in
  decimal megabytes (10**6 bytes; /proc reports KiB);
- `cpu_seconds`: user + system CPU time the process has used so far (utime + stime of
  /proc/<pid>/stat, in clock ticks, usually 10 ms resolution), threads included.
"""

from __future__ import annotations

import os

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
