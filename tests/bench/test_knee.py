"""The open loop's knee search (bench/knee.py): bisection over a grid, known runs free, a time budget.

No timing here (benchmarks stay in bench/): the probes are a made-up capacity.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench import knee

RATES = (2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 14.0)


def _capacity(limit: float, probed: list[float]) -> Callable[[float], bool]:
    def probe(rate: float) -> bool:
        probed.append(rate)
        return rate <= limit

    return probe


def test_the_knee_is_the_highest_rate_that_holds_found_by_bisection_from_the_start_rate() -> None:
    probed: list[float] = []
    found = knee.search(RATES, _capacity(7.0, probed), RATES.index(5.0), lambda _: True)
    assert (found.knee, found.first_fail, found.closed) == (7.0, 10.0, True)
    assert probed == found.probed == [5.0, 10.0, 7.0]  # start, then the middle of what is left


def test_known_runs_cost_no_probe() -> None:
    probed: list[float] = []
    found = knee.search(RATES, _capacity(7.0, probed), RATES.index(5.0), lambda _: True, {5.0: True, 10.0: False})
    assert (found.knee, found.first_fail, probed) == (7.0, 10.0, [7.0])


def test_the_grid_ends_bound_the_answer() -> None:
    everything = knee.search(RATES, _capacity(99.0, []), 3, lambda _: True)
    assert (everything.knee, everything.first_fail, everything.closed) == (14.0, None, True)
    nothing = knee.search(RATES, _capacity(0.5, []), 3, lambda _: True)
    assert (nothing.knee, nothing.first_fail, nothing.closed) == (None, 2.0, True)


def test_the_budget_stops_the_search_and_says_it_is_open() -> None:
    probed: list[float] = []
    found = knee.search(RATES, _capacity(7.0, probed), 3, lambda _: len(probed) < 2)
    assert (found.knee, found.first_fail, found.closed) == (5.0, 10.0, False)
    assert knee.search(RATES, _capacity(7.0, []), 3, lambda _: False) == knee.Knee(None, None, False, [])


def test_holds_needs_both_targets_at_one_pace() -> None:
    assert knee.holds(open_p95=15.0, single_p95=10.0)
    assert not knee.holds(open_p95=15.1, single_p95=10.0)  # over 1.5 x one client's
    assert not knee.holds(open_p95=210.0, single_p95=199.0)  # within the ratio, over 200 ms
    assert not knee.holds(open_p95=150.0, single_p95=200.0)  # one client over 200 ms


@pytest.mark.parametrize(("rates", "start"), [((), 0), ((2.0, 2.0), 0), ((3.0, 2.0), 0), (RATES, 7)])
def test_a_bad_grid_or_start_is_refused(rates: tuple[float, ...], start: int) -> None:
    with pytest.raises(ValueError, match=r"rates|start"):
        knee.search(rates, lambda _: True, start, lambda _: True)


def _run(rate: float, single_p95: float, open_p95: float) -> dict[str, object]:
    one = {"clients": 1, "p95_ms": single_p95}
    many = {"clients": 100, "p95_ms": open_p95, "achieved_per_s": rate * 100, "offered_per_s": rate * 100}
    return {"rate_per_client": rate, "offered_per_s": rate * 100, "single": one, "open": many,
            "ratio_p95": open_p95 / single_p95}


def test_the_open_loop_gates_judge_the_5_per_second_run_of_the_default_deployment() -> None:
    from bench import openloop_report

    section = {"quick": False, "clients": 100, "workers": 2, "gate": _run(5.0, 10.0, 14.0),
               "stress": _run(10.0, 10.0, 900.0)}  # the stress run is reported, never judged
    ratio, p95 = openloop_report.gates(section)
    assert (ratio.verdict, p95.verdict) == ("pass", "pass")
    assert "5 calls/s each (500 calls/s offered)" in ratio.target and "2 workers" in ratio.target
    section["gate"] = _run(5.0, 10.0, 16.0)
    assert [g.verdict for g in openloop_report.gates(section)] == ["fail", "pass"]
    assert [g.verdict for g in openloop_report.gates({**section, "quick": True})] == ["smoke", "smoke"]
