"""The worker pool actor: CPU-heavy tool work on other cores, in worker processes.

One interpreter runs one core's worth of Python. Tasks (`concurrency/tasks.py`) that would hold
it — knowledge checks and queries over a snapshot, the scoring of a burst's memory searches — run in
a pool of `size` processes (trio-parallel; one worker context per slot, one job at a time per slot,
so the pool knows which worker holds which cached state and routes a job to the worker that already
holds its state).

When to use it is decided per job, so that a quiet session pays nothing:
- a session that makes no heavy call starts no worker; the first heavy job starts them, in the
  background (a worker's start costs ~140 ms, so they are up before the load that needs them);
- a heavy job with no other heavy job in flight runs in-process, on a thread: alone, that is the
  cheapest place (no copy, no hop);
- overlapping jobs go to an idle worker (the one holding their state first), or wait for a busy
  one while fewer than `queue` wait; past that they run in-process rather than queue longer;
  while the workers are still starting, one job at a time runs in-process and the rest wait;
- a worker idle for `idle_timeout` seconds exits; the next heavy job starts one again.

A worker that dies (killed, out of memory) fails its job with `INTERNAL` naming the death; the
slot gets a new worker on its next job, and the server goes on. A job cancelled (the client's
cancel, the request timeout) kills its worker, which is likewise replaced.
"""

from __future__ import annotations

import signal
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

import msgspec
import trio
import trio.lowlevel
import trio_parallel

from specactor.actors.runtime import TrioRuntime
from specactor.actors.supervisor import ChildSpec
from specactor.concurrency.tasks import CACHED_STATES, CacheMiss, Task, perform, warm
from specactor.logsetup import get_logger
from specactor.protocol.errors import ToolError

log = get_logger("specactor.pool")

R = TypeVar("R")

PAYLOADS: Final = 4  # states kept encoded for workers that have not got them yet
WARM_MODULES: Final = ("specactor.domain.knowledge.check", "specactor.domain.knowledge.query",
                       "specactor.domain.knowledge.sync", "specactor.toolsets.knowledge_tasks",
                       "specactor.sqlite.search_task")


class PoolStatistics(msgspec.Struct, frozen=True):
    size: int
    workers: int  # live worker processes
    pooled: int  # jobs a worker ran
    inline: int  # jobs run in-process
    crashed: int  # jobs whose worker died under them
    resent: int  # states sent again to a worker that no longer held them


@dataclass(eq=False)
class _Slot:
    index: int
    ctx: Any  # trio_parallel.WorkerContext
    state: Literal["idle", "warming", "job"] = "idle"
    keys: OrderedDict[str, None] = field(default_factory=OrderedDict)  # states its worker holds (a guess)

    def holds(self, key: str) -> bool:
        return key in self.keys

    def took(self, key: str) -> None:
        self.keys[key] = None
        self.keys.move_to_end(key)
        while len(self.keys) > CACHED_STATES:
            self.keys.popitem(last=False)

    @property
    def warm(self) -> bool:
        """Its worker process is up and idle."""
        stats = self.ctx.statistics()
        return bool(stats.idle_workers)


class WorkerPool:
    """Args:
        size: worker processes at most (0: every job runs in-process).
        runtime: the in-process thread pool.
        idle_timeout: seconds an idle worker lives.
        queue: jobs that may wait for a worker; past that, jobs run in-process at once.
        alone_in_process: a job with no other in flight runs in-process (False: it too goes to
            a worker when one is up; the tests use this to reach the workers).
    """

    def __init__(self, size: int, runtime: TrioRuntime, *, idle_timeout: float = 120.0,
                 queue: int | None = None, alone_in_process: bool = True) -> None:
        self.size = max(0, size)
        self.alone_in_process = alone_in_process
        self.runtime = runtime
        self.idle_timeout = idle_timeout
        self.queue = 1024 if queue is None else queue
        self.spec = ChildSpec("worker-pool", self.run)
        self._slots: list[_Slot] = []
        self._lot = trio.lowlevel.ParkingLot()  # jobs waiting for a slot
        self._active = 0  # heavy jobs in flight, in-process or pooled
        self._waiters = 0  # jobs parked for a worker
        self._inline_running = 0  # jobs running in-process now
        self._nursery: trio.Nursery | None = None
        self._payloads: OrderedDict[str, bytes] = OrderedDict()
        self._pooled = self._inline = self._crashed = self._resent = 0

    # ------------------------------------------------------------------ the actor

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with AsyncExitStack() as stack:
            slots = []
            for index in range(self.size):  # a context starts no process until its first job
                ctx = await stack.enter_async_context(trio_parallel.open_worker_context(
                    idle_timeout=self.idle_timeout, grace_period=5.0, worker_type=trio_parallel.WorkerType.SPAWN))
                slots.append(_Slot(index, ctx))
            try:
                async with trio.open_nursery() as nursery:
                    self._slots, self._nursery = slots, nursery
                    task_status.started()
                    await trio.sleep_forever()
            finally:
                self._slots, self._nursery = [], None
                self._lot.unpark_all()

    async def wait_started(self, timeout: float = 60.0) -> None:
        """Start every slot's worker now and wait until they are up (or gave up).

        Raises:
            RuntimeError: the actor is not running.
            trio.TooSlowError: not within `timeout` seconds.
        """
        if self._nursery is None:
            raise RuntimeError("the worker pool is not running")
        with trio.fail_after(timeout):
            self._start_warming()
            while any(s.state == "warming" for s in self._slots):
                await self._lot.park()

    def statistics(self) -> PoolStatistics:
        workers = sum(s.ctx.statistics().idle_workers + s.ctx.statistics().running_workers for s in self._slots)
        return PoolStatistics(size=self.size, workers=workers, pooled=self._pooled, inline=self._inline,
                              crashed=self._crashed, resent=self._resent)

    # ------------------------------------------------------------------ called by handlers

    async def call(self, task: Task[Any, R], key: str | None, state: Any, *args: Any,
                   inline: Callable[[], Awaitable[R]] | None = None, overlapping: bool = False) -> R:
        """`task.run(state, *args)`, in-process or in a worker (see the module's rules). `key`
        names `state` for the workers' caches (None: not cacheable, always in-process).

        Args:
            inline: how the caller runs the job in-process, when the pool does not take it (default:
                `task.inline` on a thread of the runtime); what it returns is the call's answer.
            overlapping: the caller is about to send other jobs beside this one (a burst's chunks), so
                it is not alone even when the others have not reached the pool yet: it goes to a
                worker, and this process's one core is left to the answers.

        Raises:
            ToolError: INTERNAL when the worker running it died.
        """
        self._active += 1
        try:
            slot = self._choose(key, self._alone(overlapping)) if key is not None and self._slots else None
            while slot is None and key is not None and self._waits(overlapping):
                self._waiters += 1
                try:
                    await self._lot.park()
                finally:
                    self._waiters -= 1
                slot = self._choose(key, self._alone(overlapping))
            if slot is None or key is None:
                self._inline += 1
                self._inline_running += 1
                try:
                    if inline is not None:
                        return await inline()
                    return await self.runtime.run_sync(task.inline, state, *args)
                finally:
                    self._inline_running -= 1
                    self._lot.unpark()
            try:
                return await self._on(slot, task, key, state, args)
            finally:
                slot.state = "idle"
                self._lot.unpark()
        finally:
            self._active -= 1

    def _alone(self, overlapping: bool) -> bool:
        """Whether a job would run alone (no other heavy job in flight, none announced): in-process then."""
        return self._active <= 1 and self.alone_in_process and not overlapping

    def _waits(self, overlapping: bool) -> bool:
        """Whether a job that found no idle worker waits (else it runs in-process now): only
        while the queue has room, and jobs overlap; then while a worker is busy with a job (it
        will be free soon), or while workers are starting and a job already runs in-process (one
        at a time there: more threads would only share this process's one core)."""
        if self._waiters >= self.queue or self._alone(overlapping):
            return False
        states = {s.state for s in self._slots}
        return "job" in states or ("warming" in states and self._inline_running > 0)

    def _choose(self, key: str, alone: bool) -> _Slot | None:
        """An idle slot with a live worker for a job on `key`, the one holding `key` first, taken.
        None when the job is `alone` (in-process is cheaper) or no worker is up; workers not up
        are started (in the background) on the first job of all."""
        best = None
        for slot in self._slots:
            if slot.state != "idle" or not slot.warm:
                continue
            if slot.holds(key):
                best = slot
                break
            best = best or slot
        if best is None:
            self._start_warming()
            return None
        if alone:
            return None
        best.state = "job"
        return best

    def _start_warming(self) -> None:
        """Start a worker in each idle slot that has none (in the background)."""
        nursery = self._nursery
        if nursery is None:
            return
        for slot in self._slots:
            if slot.state == "idle" and not slot.warm:
                slot.state = "warming"
                nursery.start_soon(self._warm, slot)

    async def _warm(self, slot: _Slot) -> None:
        try:
            with trio.fail_after(60):
                pid = await slot.ctx.run_sync(warm, WARM_MODULES, kill_on_cancel=True)
            log.debug("pool worker started", slot=slot.index, pid=pid)
        except (trio_parallel.BrokenWorkerError, trio.TooSlowError, OSError) as err:
            log.warning("a pool worker did not start; jobs run in-process meanwhile", slot=slot.index,
                        error=str(err))
        finally:
            slot.state = "idle"
            self._lot.unpark_all()

    async def _on(self, slot: _Slot, task: Task[Any, R], key: str, state: Any, args: tuple[Any, ...]) -> R:
        payload = None if slot.holds(key) else self._payload(task, key, state)
        try:
            try:
                data = await slot.ctx.run_sync(perform, task, key, payload, args, kill_on_cancel=True)
            except CacheMiss:
                self._resent += 1
                data = await slot.ctx.run_sync(perform, task, key, self._payload(task, key, state), args,
                                               kill_on_cancel=True)
        except trio_parallel.BrokenWorkerError as err:
            slot.keys.clear()
            self._crashed += 1
            how = _death(err)
            log.error("a pool worker died running a job; it is replaced", task=task.name, slot=slot.index, death=how)
            raise ToolError("INTERNAL", f"the worker process running {task.name} died ({how}); it has been "
                            "replaced, and the call can be tried again", {"task": task.name, "death": how},
                            retryable=True) from None
        except BaseException:
            slot.keys.clear()  # cancelled: the worker was killed
            raise
        slot.took(key)
        self._pooled += 1
        return task.decode(data)

    def _payload(self, task: Task[Any, Any], key: str, state: Any) -> bytes:
        data = self._payloads.get(key)
        if data is None:
            data = self._payloads[key] = task.dump(state)
            while len(self._payloads) > PAYLOADS:
                self._payloads.popitem(last=False)
        else:
            self._payloads.move_to_end(key)
        return data


def _death(err: BaseException) -> str:
    """How a worker died, from trio-parallel's error (its process object carries the exit code)."""
    for arg in err.args:
        code = getattr(arg, "exitcode", None)
        if isinstance(code, int):
            if code < 0:
                try:
                    return f"killed by {signal.Signals(-code).name}"
                except ValueError:
                    return f"killed by signal {-code}"
            return f"exit status {code}"
    return str(err) or type(err).__name__
