"""The worker pool (`actors/worker_pool.py`) with real worker processes: where jobs run, what a
worker's death or a hang does to its job and to the next, and a burst past the queue."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from specactor.actors.runtime import TrioRuntime
from specactor.actors.worker_pool import WorkerPool
from specactor.concurrency.tasks import BLAS_THREADS, one_blas_thread
from specactor.protocol.errors import ToolError
from tests.actors.pool_jobs import DIE, ENVIRON, HANG, TOTAL

STATE = list(range(100))
WAIT = 60.0  # a spawned worker imports specactor: well under a second, but CI machines are slow


@asynccontextmanager
async def running(size: int = 2, **kw: object) -> AsyncIterator[WorkerPool]:
    pool = WorkerPool(size, TrioRuntime(), **kw)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        yield pool
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def listening(tmp_path: Path) -> AsyncIterator[tuple[str, trio.socket.SocketType]]:
    """A unix socket a hanging job reports its worker's pid to (see `pool_jobs._hang`)."""
    path = str(tmp_path / "pid.sock")
    with trio.socket.socket(trio.socket.AF_UNIX) as sock:
        await sock.bind(path)
        sock.listen(1)
        yield path, sock


async def reported_pid(sock: trio.socket.SocketType) -> int:
    with trio.fail_after(WAIT):
        conn, _ = await sock.accept()
        with conn:
            return int(await conn.recv(64))


async def test_a_pool_no_job_has_used_has_no_worker_process() -> None:
    async with running() as pool:
        await trio.testing.wait_all_tasks_blocked()
        assert pool.statistics().workers == 0


async def test_a_lone_job_runs_in_process_and_starts_the_workers_for_the_jobs_to_come() -> None:
    async with running() as pool:
        total, pid = await pool.call(TOTAL, "s", STATE, 1)
        assert (total, pid) == (4951, os.getpid())
        await pool.wait_started(WAIT)  # already starting: this only waits
        stats = pool.statistics()
        assert (stats.inline, stats.pooled, stats.workers) == (1, 0, 2)
        total, pid = await pool.call(TOTAL, "s", STATE, 2)  # alone again: in-process, workers or not
        assert (total, pid) == (4952, os.getpid())


async def test_a_job_announced_as_one_of_several_goes_to_a_worker_even_when_it_reaches_the_pool_alone() -> None:
    async with running() as pool:
        await pool.wait_started(WAIT)
        with trio.fail_after(WAIT):
            _, alone = await pool.call(TOTAL, "s", STATE, 1)
            _, announced = await pool.call(TOTAL, "s", STATE, 1, overlapping=True)
        assert alone == os.getpid() and announced != os.getpid()
        assert (pool.statistics().inline, pool.statistics().pooled) == (1, 1)


async def test_overlapping_jobs_go_to_the_workers_once_they_are_up() -> None:
    async with running() as pool:
        await pool.wait_started(WAIT)
        assert pool.statistics().workers == 2
        pids: set[int] = set()

        async def one(k: int) -> None:
            total, pid = await pool.call(TOTAL, "s", STATE, k)
            assert total == 4950 + k
            pids.add(pid)

        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                for k in range(20):
                    nursery.start_soon(one, k)
        stats = pool.statistics()
        assert stats.pooled > 0 and stats.pooled + stats.inline == 20
        assert pids - {os.getpid()}, "no job reached a worker"
        assert stats.resent == 0


async def test_a_worker_runs_numpy_s_blas_on_one_thread_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BLAS_THREADS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")  # the user's choice stands
    async with running(1, alone_in_process=False) as pool:
        await pool.wait_started(WAIT)
        with trio.fail_after(WAIT):
            openblas, pid = await pool.call(ENVIRON, "s", STATE, "OPENBLAS_NUM_THREADS")
            mkl, _ = await pool.call(ENVIRON, "s", STATE, "MKL_NUM_THREADS")
        assert pid != os.getpid()
        assert (openblas, mkl) == ("1", "3")


def test_the_server_asks_for_one_blas_thread_before_numpy_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {name: value for name, value in os.environ.items() if name not in BLAS_THREADS}
    environ["VECLIB_MAXIMUM_THREADS"] = "2"
    monkeypatch.setattr(os, "environ", environ)  # this process's own is left as it was
    one_blas_thread()
    assert [environ[name] for name in BLAS_THREADS] == ["1", "1", "2"]


async def test_a_worker_killed_mid_job_fails_that_job_with_internal_naming_the_kill_and_is_replaced(
        tmp_path: Path) -> None:
    async with running(1, alone_in_process=False) as pool, listening(tmp_path) as (path, sock):
        await pool.wait_started(WAIT)
        killed: list[int] = []

        async def kill_it() -> None:
            killed.append(await reported_pid(sock))
            os.kill(killed[0], signal.SIGKILL)

        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill_it)
                with pytest.raises(ToolError) as caught:
                    await pool.call(HANG, "s", STATE, path)
        assert caught.value.code == "INTERNAL"
        assert "hang" in str(caught.value) and "SIGKILL" in str(caught.value)
        assert pool.statistics().crashed == 1
        await pool.wait_started(WAIT)
        with trio.fail_after(WAIT):
            total, pid = await pool.call(TOTAL, "s", STATE, 0)  # the new worker gets the state again
        assert total == 4950 and pid not in (os.getpid(), *killed)


async def test_a_worker_that_exits_mid_job_is_reported_with_its_exit_status() -> None:
    async with running(1, alone_in_process=False) as pool:
        await pool.wait_started(WAIT)
        with trio.fail_after(WAIT), pytest.raises(ToolError, match="exit status 3"):
            await pool.call(DIE, "s", STATE, 3)
        await pool.wait_started(WAIT)
        with trio.fail_after(WAIT):
            assert (await pool.call(TOTAL, "s", STATE, 2))[0] == 4952


async def test_a_job_that_hangs_past_its_deadline_is_cancelled_its_worker_killed_and_the_pool_goes_on(
        tmp_path: Path) -> None:
    async with running(1, alone_in_process=False) as pool, listening(tmp_path) as (path, sock):
        await pool.wait_started(WAIT)
        hung: list[int] = []
        with trio.move_on_after(WAIT) as deadline:  # the request timeout, as the dispatcher applies it
            async with trio.open_nursery() as nursery:
                async def cancel_once_running() -> None:
                    hung.append(await reported_pid(sock))
                    nursery.cancel_scope.cancel()

                nursery.start_soon(cancel_once_running)
                await pool.call(HANG, "s", STATE, path)
        assert not deadline.cancelled_caught and hung
        assert pool.statistics().workers == 0  # killed on cancel (trio-parallel's kill_on_cancel)
        await pool.wait_started(WAIT)
        with trio.fail_after(WAIT):
            total, pid = await pool.call(TOTAL, "s", STATE, 5)
        assert total == 4955 and pid not in (os.getpid(), *hung)


async def test_a_burst_larger_than_the_queue_all_succeeds_the_overflow_in_process() -> None:
    async with running(1, queue=2) as pool:
        await pool.wait_started(WAIT)
        results: list[int] = []

        async def one(k: int) -> None:
            results.append((await pool.call(TOTAL, "s", STATE, k))[0])

        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                for k in range(40):
                    nursery.start_soon(one, k)
        assert sorted(results) == [4950 + k for k in range(40)]
        stats = pool.statistics()
        assert stats.inline > 0 and stats.pooled > 0 and stats.pooled + stats.inline == 40


async def test_a_pool_of_no_workers_runs_everything_in_process() -> None:
    async with running(0) as pool:
        async with trio.open_nursery() as nursery:
            for k in range(5):
                nursery.start_soon(pool.call, TOTAL, "s", STATE, k)
        assert pool.statistics() == pool.statistics().__class__(size=0, workers=0, pooled=0, inline=5, crashed=0,
                                                                resent=0)

