"""Progress percentages, as the AirsSpec code computes them.

A plan's completion is `completed * 100 // total`, and 100 when the plan has no steps (nothing
is left to do). Build progress derived from steps is the same ratio but 0 with no steps (the
reference's `BuildProgress.percentage`); a reported build percentage never goes below it.
"""

from __future__ import annotations


def plan_percentage(total: int, completed: int) -> int:
    if total <= 0:
        return 100
    return min(100, completed * 100 // total)


def build_from_steps(total: int, completed: int) -> int:
    if total <= 0:
        return 0
    return min(100, completed * 100 // total)


def number(value: float) -> int | float:
    """`60.0` as `60`: percentages read back from TOON are ints when whole."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
