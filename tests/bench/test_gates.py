"""The bench's gate verdicts (issue 15): HTTP against its own floor, the vector targets, --quick as smoke.

No timing here (benchmarks stay in bench/): figures are made up, only the verdict logic runs.
"""

from __future__ import annotations

from bench import gates, vector_stage

C10 = "http_c10_calls_per_s"


def _http(one_floor: float, many_one: float) -> dict[str, dict[str, float | None]]:
    """HTTP figures where one worker makes `one_floor` x the floor and the default `many_one` x one worker (2026)."""
    return {"floor": {C10: 3000.0}, "specactor-1w": {C10: 3000.0 * one_floor},
            "specactor-1w-2026": {C10: 2000.0}, "specactor-2026": {C10: 2000.0 * many_one},
            "sdk": {C10: 100.0}, "specactor": {C10: 150.0}}


def test_one_worker_is_judged_against_the_floor_and_two_workers_against_one() -> None:
    judged = {g.name: g for g in gates.evaluate({}, _http(0.86, 1.71), workers=2)}
    floor = judged["HTTP c=10: one worker vs the floor"]
    assert (floor.verdict, floor.measures) == ("pass", (C10,))
    assert "0.86 x floor" in floor.detail
    workers = judged["HTTP c=10: 2 workers vs one"]
    assert workers.verdict == "pass" and "1.71 x 1 worker" in workers.detail
    failing = {g.name: g.verdict for g in gates.evaluate({}, _http(0.84, 1.69), workers=2)}
    assert failing["HTTP c=10: one worker vs the floor"] == "fail"
    assert failing["HTTP c=10: 2 workers vs one"] == "fail"


def test_the_sdk_throughput_gate_is_withdrawn() -> None:
    # specactor at 1.5 x the SDK would have failed the old "≥ 4 x SDK" gate: no gate judges the SDK ratio now
    names = [g.name for g in gates.evaluate({}, _http(1.0, 2.0))]
    assert not any("SDK" in n and "TS" not in n for n in names)


def test_http_gates_skip_when_the_one_worker_server_was_left_out() -> None:
    figs = {"floor": {C10: 3000.0}, "specactor-2026": {C10: 4000.0}}
    judged = {g.name: g.verdict for g in gates.evaluate({}, figs, workers=2)}
    assert judged["HTTP c=10: one worker vs the floor"] == "skip"
    assert judged["HTTP c=10: 2 workers vs one"] == "skip"


def test_quick_turns_every_judged_gate_into_smoke_and_the_run_never_fails() -> None:
    judged = gates.smoke(gates.evaluate({"specactor": {"first_reply_ms": 900.0, "idle_rss_mb": 10.0}},
                                        _http(0.5, 1.0)))
    verdicts = {g.name: g.verdict for g in judged}
    assert verdicts["first reply"] == "smoke" and verdicts["HTTP c=10: one worker vs the floor"] == "smoke"
    assert verdicts["single-call median vs floor"] == "skip"  # unmeasured stays skipped
    assert all(g.detail.startswith("smoke") for g in judged if g.verdict == "smoke")
    assert gates.overall(judged) == "SMOKE"


def _vectors(small_cpu: float, large_p95: float, diff: float, *, quick: bool = False,
             large: str = "100000x384") -> dict[str, object]:
    return {"quick": quick, "small": "2000x256", "large": large,
            "figures": {"small_cpu_ms": small_cpu, "large_p95_ms": large_p95, "max_abs_diff": diff}}


def test_vector_targets_pass_at_the_issue_sizes_and_fail_past_them() -> None:
    ok = [g.verdict for g in vector_stage.gates(_vectors(0.4, 12.0, 5e-16))]
    assert ok == ["pass", "pass", "pass"]
    bad = [g.verdict for g in vector_stage.gates(_vectors(1.2, 20.0, 2e-6))]
    assert bad == ["fail", "fail", "fail"]  # 20 ms is not under 20 ms; 1e-6 is the most allowed


def test_vector_targets_are_smoke_below_the_issue_sizes_and_skip_without_numpy() -> None:
    small = [g.verdict for g in vector_stage.gates(_vectors(0.4, 0.6, 5e-16, large="10000x384"))]
    assert small == ["pass", "smoke", "pass"]  # only the large size is short of the issue's
    quick = [g.verdict for g in vector_stage.gates(_vectors(9.0, 99.0, 1.0, quick=True))]
    assert quick == ["smoke", "smoke", "smoke"]
    skipped = vector_stage.gates({"quick": False, "skipped": "numpy is not installed"})
    assert [g.verdict for g in skipped] == ["skip"] * 3 and "numpy" in skipped[0].detail


def test_every_server_and_http_target_has_its_own_colour_in_the_plot() -> None:
    from bench.http_harness import TARGETS
    from bench.plot import COLORS, STDIO_KEYS
    from bench.servers import ORDER

    keys = {*ORDER, *(t.key for t in TARGETS)}
    assert keys <= set(COLORS)
    assert len({COLORS[k] for k in keys}) == len(keys)
    assert "ts" in STDIO_KEYS  # the TS SDK is drawn in the stdio plots
