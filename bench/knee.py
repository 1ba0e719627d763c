"""The open loop's knee: the highest offered rate at which the open-loop targets still hold.

Pure logic, no I/O (the open-loop stage, `bench.openloop`, runs the probes):

- `holds(open_p95, single_p95)`: the open-loop targets at one pace: P95 of the many clients <
  `OPEN_LOOP_P95_MS`, one client's too, and the many's P95 ≤ `OPEN_LOOP_RATIO` x one client's at
  the same pace (bench/gates.py);
- `search(rates, probe, start, affordable, known)`: bisection over ascending `rates` (calls/s per
  client), first at `rates[start]`, assuming the targets hold below a rate where they hold and fail
  above one where they fail. `known` results (runs already made at some rates) cost nothing;
  `affordable(rate)` says whether the time budget allows one more probe. The answer names the
  knee (the highest rate seen to hold, None if none did), the lowest rate seen to fail above it,
  and whether the search closed (the two adjacent in `rates`, or the grid's end reached).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bench.gates import OPEN_LOOP_P95_MS, OPEN_LOOP_RATIO


def holds(open_p95: float, single_p95: float) -> bool:
    """Both open-loop targets at one pace (the gate's and the knee's one definition)."""
    return (open_p95 < OPEN_LOOP_P95_MS and single_p95 < OPEN_LOOP_P95_MS
            and open_p95 <= OPEN_LOOP_RATIO * single_p95)


@dataclass
class Knee:
    knee: float | None  # the highest rate seen to hold; None: none held (or none was probed)
    first_fail: float | None  # the lowest rate seen to fail above the knee; None: none failed
    closed: bool  # knee and first_fail adjacent in the grid (or the grid's end reached): the search is done
    probed: list[float] = field(default_factory=list)  # the rates probed, in order (not the known ones)


def search(rates: Sequence[float], probe: Callable[[float], bool], start: int,
           affordable: Callable[[float], bool], known: Mapping[float, bool] | None = None) -> Knee:
    """Bisection for the knee over ascending `rates`, first at `rates[start]`.

    Raises:
        ValueError: `rates` empty or not ascending, or `start` outside it.
    """
    if not rates or any(b <= a for a, b in itertools.pairwise(rates)):
        raise ValueError(f"rates must be ascending and not empty: {list(rates)}")
    if not 0 <= start < len(rates):
        raise ValueError(f"start {start} outside the {len(rates)} rates")
    results = {i: known[r] for i, r in enumerate(rates) if known and r in known}
    probed: list[float] = []
    lo, hi = -1, len(rates)  # the targets hold at lo and fail at hi (-1, len: nothing known yet)

    def narrow() -> None:
        nonlocal lo, hi
        lo = max([-1, *(i for i, ok in results.items() if ok)])
        hi = min([len(rates), *(i for i, ok in results.items() if not ok and i > lo)])

    narrow()
    nxt = start if start not in results else None
    while True:
        if nxt is None:
            if hi - lo <= 1:
                break
            nxt = (lo + hi) // 2
        if not affordable(rates[nxt]):
            break
        results[nxt] = probe(rates[nxt])
        probed.append(rates[nxt])
        narrow()
        nxt = None
    return Knee(rates[lo] if lo >= 0 else None, rates[hi] if hi < len(rates) else None, hi - lo <= 1, probed)
