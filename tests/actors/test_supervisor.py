"""The one-for-one supervisor: restarts, start semantics, giving up, backoff, crash logging,
permanent errors.

Every test runs on trio's autojump MockClock, so backoff and restart windows are observed
in virtual time, instantly and deterministically.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import structlog
import trio
import trio.lowlevel
import trio.testing

from specactor.actors.supervisor import ChildSpec, Supervisor, SupervisorGaveUp
from specactor.config import ConfigError


class Scripted:
    """A child whose n-th instance runs `script(n, task_status)`; records start times and stops."""

    def __init__(self, script: Callable[[int, Any], Awaitable[None]]) -> None:
        self.script = script
        self.starts: list[float] = []
        self.stopped = 0
        self.changed = trio.Event()

    async def __call__(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self.starts.append(trio.current_time())
        self._poke()
        try:
            await self.script(len(self.starts), task_status)
        finally:
            self.stopped += 1
            self._poke()

    def _poke(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def wait_starts(self, n: int) -> None:
        with trio.fail_after(600):
            while len(self.starts) < n:
                await self.changed.wait()


async def test_a_crashed_child_is_restarted_and_start_returns_once_the_first_instance_started(
        autojump_clock: trio.testing.MockClock) -> None:
    ready: list[int] = []
    second_ready = trio.Event()

    async def script(n: int, task_status: Any) -> None:
        await trio.sleep(1.0)  # set-up before `started`: start must wait for it
        ready.append(n)
        task_status.started()
        if n == 2:
            second_ready.set()
        if n == 1:
            await trio.sleep(1.0)
            raise ValueError("boom")
        await trio.sleep_forever()

    child = Scripted(script)
    sup = Supervisor()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await sup.start(nursery, ChildSpec("worker", child))
            assert ready == [1]
            assert trio.current_time() == pytest.approx(1.0)
            # the restart does not call started() again (that would raise RuntimeError in the nursery)
            with trio.fail_after(5):
                await second_ready.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert ready == [1, 2]
            assert sup.restarts == {"worker": 1}
            nursery.cancel_scope.cancel()


async def test_start_waits_through_crashes_before_the_first_started(autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        if n < 3:
            raise OSError("not yet")
        task_status.started()
        await trio.sleep_forever()

    child = Scripted(script)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await Supervisor().start(nursery, ChildSpec("late", child))
            assert len(child.starts) == 3
            nursery.cancel_scope.cancel()


async def test_too_many_crashes_within_the_window_make_the_supervisor_give_up_naming_the_child(
        autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        raise ValueError(f"crash {n}")

    child = Scripted(script)
    sup = Supervisor(max_restarts=3, within=10.0)
    with trio.fail_after(60), pytest.RaisesGroup(SupervisorGaveUp) as info:
        async with trio.open_nursery() as nursery:
            await sup.start(nursery, ChildSpec("flaky", child))
    gave_up = info.value.exceptions[0]
    assert isinstance(gave_up, SupervisorGaveUp)
    assert "'flaky'" in str(gave_up) and "ValueError: crash 4" in str(gave_up)
    assert isinstance(gave_up.cause, ValueError)
    assert len(child.starts) == 4  # the first run and max_restarts restarts
    assert sup.restarts == {"flaky": 3}


async def test_giving_up_before_the_first_start_raises_from_start(autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        raise RuntimeError("never starts")

    sup = Supervisor(max_restarts=2)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            with pytest.raises(SupervisorGaveUp, match="'dud'"):
                await sup.start(nursery, ChildSpec("dud", Scripted(script)))


async def test_crashes_further_apart_than_the_window_never_exhaust_the_restarts(
        autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        await trio.sleep(20.0)
        raise ValueError("rare")

    child = Scripted(script)
    sup = Supervisor(max_restarts=1, within=10.0)
    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            await sup.start(nursery, ChildSpec("rare", child))
            await child.wait_starts(8)
            nursery.cancel_scope.cancel()
    assert sup.restarts["rare"] >= 7


async def test_backoff_doubles_between_restarts_up_to_its_maximum(autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        raise ValueError("again")

    child = Scripted(script)
    sup = Supervisor(max_restarts=6, within=100.0, backoff_min=0.1, backoff_max=0.5)
    with trio.fail_after(60), pytest.RaisesGroup(SupervisorGaveUp):
        async with trio.open_nursery() as nursery:
            await sup.start(nursery, ChildSpec("b", child))
    gaps = [b - a for a, b in zip(child.starts, child.starts[1:], strict=False)]
    assert gaps == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5, 0.5])


async def test_a_crash_among_sibling_tasks_is_logged_once_as_its_root_cause(
        autojump_clock: trio.testing.MockClock) -> None:
    async def failing() -> None:
        await trio.sleep(1.0)
        raise KeyError("the root cause")

    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        if n == 1:
            async with trio.open_nursery() as inner:
                inner.start_soon(trio.sleep_forever)
                inner.start_soon(trio.sleep_forever)
                inner.start_soon(failing)
        await trio.sleep_forever()

    child = Scripted(script)
    with structlog.testing.capture_logs() as logs, trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await Supervisor().start(nursery, ChildSpec("siblings", child))
            await child.wait_starts(2)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    crashes = [e for e in logs if e.get("actor") == "siblings"]
    assert len(crashes) == 1, logs
    entry = crashes[0]
    assert entry["log_level"] == "error"
    assert entry["error"] == "KeyError: 'the root cause'"
    exc_type, exc, _tb = entry["exc_info"]
    assert exc_type is KeyError and isinstance(exc, KeyError)
    assert not isinstance(exc, BaseExceptionGroup)
    assert "Group" not in entry["event"] + entry["error"]


async def test_a_transient_child_that_returns_normally_is_not_restarted(
        autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        await trio.sleep(1.0)

    child = Scripted(script)
    sup = Supervisor()
    with structlog.testing.capture_logs() as logs, trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await sup.start(nursery, ChildSpec("once", child, restart="transient"))
    assert len(child.starts) == 1 and child.stopped == 1
    assert sup.restarts == {} and logs == []


async def test_a_transient_child_that_crashes_is_restarted(autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        if n == 1:
            raise ValueError("crash")

    child = Scripted(script)
    sup = Supervisor()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await sup.start(nursery, ChildSpec("t", child, restart="transient"))
    assert len(child.starts) == 2 and sup.restarts == {"t": 1}


async def test_a_temporary_child_that_crashes_is_not_restarted(autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        raise ValueError("crash")

    child = Scripted(script)
    with structlog.testing.capture_logs() as logs, trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await Supervisor().start(nursery, ChildSpec("tmp", child, restart="temporary"))
    assert len(child.starts) == 1
    assert [e["error"] for e in logs] == ["ValueError: crash"]


async def test_a_permanent_child_that_returns_is_restarted(autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        if n == 1:
            return
        await trio.sleep_forever()

    child = Scripted(script)
    sup = Supervisor()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await sup.start(nursery, ChildSpec("p", child))
            await child.wait_starts(2)
            await trio.testing.wait_all_tasks_blocked()
            assert sup.restarts == {"p": 1}
            nursery.cancel_scope.cancel()


async def test_cancelling_the_supervisor_stops_the_child_without_a_restart_or_a_log(
        autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        await trio.sleep_forever()

    child = Scripted(script)
    sup = Supervisor()
    with structlog.testing.capture_logs() as logs, trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await sup.start(nursery, ChildSpec("c", child))
            nursery.cancel_scope.cancel()
    assert child.stopped == 1 and len(child.starts) == 1
    assert sup.restarts == {} and logs == []


async def test_a_permanent_error_is_raised_alone_at_once_while_a_transient_one_is_restarted(
        autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        task_status.started()
        if n == 1:
            raise OSError("a passing failure")  # restarted, as before
        async with trio.open_nursery() as inner:  # the second failure, among siblings
            inner.start_soon(trio.sleep_forever)
            raise ConfigError("127.0.0.1:8765 is already in use", setting="http.port")

    child = Scripted(script)
    sup = Supervisor()
    # Only the test's own nursery wraps it: the supervisor raises the error itself, not a group
    # of its child's nursery nor SupervisorGaveUp.
    with structlog.testing.capture_logs() as logs, trio.fail_after(60), pytest.RaisesGroup(ConfigError) as info:
        async with trio.open_nursery() as nursery:
            await sup.start(nursery, ChildSpec("http", child))
    assert len(child.starts) == 2 and sup.restarts == {"http": 1}
    error = info.value.exceptions[0]
    assert isinstance(error, ConfigError) and error.setting == "http.port"
    assert [e["error"] for e in logs] == ["OSError: a passing failure"]  # the permanent one: not logged


async def test_a_permanent_error_before_the_first_started_is_raised_from_start(
        autojump_clock: trio.testing.MockClock) -> None:
    async def script(n: int, task_status: Any) -> None:
        raise ConfigError("cannot write session logs", setting="session_log.dir")

    child = Scripted(script)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            with pytest.raises(ConfigError, match="session logs"):
                await Supervisor().start(nursery, ChildSpec("session-log", child, restart="transient"))
    assert len(child.starts) == 1


async def test_ensure_starts_a_child_once_however_many_callers_ask_at_once() -> None:
    starts: list[int] = []

    async def child(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        starts.append(1)
        await trio.lowlevel.checkpoint()  # a start that takes a moment, so callers overlap it
        task_status.started()
        await trio.sleep_forever()

    sup = Supervisor()
    async with trio.open_nursery() as nursery:
        sup.attach(nursery)
        with trio.fail_after(5):
            async with trio.open_nursery() as callers:
                for _ in range(5):
                    callers.start_soon(sup.ensure, ChildSpec("store", child))
        assert starts == [1] and sup.running("store")
        await sup.ensure(ChildSpec("store", child))
        assert starts == [1]
        nursery.cancel_scope.cancel()


async def test_ensure_without_an_attached_nursery_says_so() -> None:
    async def child(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()

    with pytest.raises(RuntimeError, match="no nursery attached"):
        await Supervisor().ensure(ChildSpec("store", child))


async def test_a_child_that_cannot_start_fails_its_ensure_and_a_later_call_tries_again(
        autojump_clock: trio.testing.MockClock) -> None:
    attempts: list[int] = []

    async def child(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        attempts.append(1)
        if len(attempts) <= 1:
            raise ConfigError("cannot open the database", setting="memory.db")
        task_status.started()
        await trio.sleep_forever()

    sup = Supervisor()
    async with trio.open_nursery() as nursery:
        sup.attach(nursery)
        with pytest.raises(ConfigError):
            await sup.ensure(ChildSpec("store", child))
        assert not sup.running("store")
        with trio.fail_after(5):
            await sup.ensure(ChildSpec("store", child))
        assert sup.running("store") and len(attempts) == 2
        nursery.cancel_scope.cancel()


async def test_a_killed_child_is_restarted_and_serves_again(autojump_clock: trio.testing.MockClock) -> None:
    lives: list[int] = []

    async def child(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        lives.append(1)
        task_status.started()
        await trio.sleep_forever()

    sup = Supervisor()
    async with trio.open_nursery() as nursery:
        await sup.start(nursery, ChildSpec("store", child))
        assert sup.children == ["store"]
        sup.kill("store")
        for _ in range(100):  # the backoff passes on the mock clock
            if sup.restarts.get("store") == 1 and "store" in sup.children:
                break
            await trio.sleep(0.01)
        assert len(lives) == 2 and sup.children == ["store"]
        with pytest.raises(KeyError):
            sup.kill("nobody")
        nursery.cancel_scope.cancel()


async def test_a_transient_child_that_ended_is_started_again_by_the_next_ensure() -> None:
    runs: list[int] = []

    async def child(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        runs.append(1)
        task_status.started()  # then returns: done for good, as a transient child may be

    sup = Supervisor()
    async with trio.open_nursery() as nursery:
        sup.attach(nursery)
        with trio.fail_after(5):
            await sup.ensure(ChildSpec("job", child, restart="transient"))
            await trio.testing.wait_all_tasks_blocked()
            assert not sup.running("job")
            await sup.ensure(ChildSpec("job", child, restart="transient"))
        assert len(runs) == 2
        nursery.cancel_scope.cancel()
