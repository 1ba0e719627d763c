"""A one-for-one supervisor: start children with `nursery.start`, restart the ones that crash.

The restart policy follows triotp/Erlang: `permanent` children always come back, `transient`
ones only after a crash, `temporary` ones never. More than `max_restarts` crashes within
`within` seconds means something is truly wrong, and the supervisor gives up by raising.
Backoff between restarts runs through tenacity with `trio.sleep`. A crash is logged as its
one root cause, never as an exception group full of cancellations. A permanent error (a
`ConfigError`: a port in use, a folder that cannot be written) is never restarted, whatever
the policy: it propagates as itself, unwrapped, for the command line to print as one line.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import msgspec
import trio

from specactor.config import ConfigError
from specactor.logsetup import get_logger

log = get_logger("specactor.supervisor")

Restart = Literal["permanent", "transient", "temporary"]


class ChildSpec(msgspec.Struct, frozen=True):
    name: str
    start: Callable[..., Awaitable[Any]]  # async fn(*, task_status) -> None
    restart: Restart = "permanent"


class SupervisorGaveUp(Exception):
    def __init__(self, name: str, cause: BaseException) -> None:
        super().__init__(f"actor '{name}' crashed too often; last error: {describe(cause)}")
        self.cause = cause


class Killed(Exception):
    """The crash `Supervisor.kill` injects."""


class _State:
    """The part of tenacity's RetryCallState its wait strategies read."""

    def __init__(self, attempt_number: int) -> None:
        self.attempt_number = attempt_number


class _Exited(Exception):
    """A permanent child returned; treated like a crash so it is restarted."""


def root_cause(exc: BaseException) -> BaseException:
    """The first real error inside `exc`, skipping exception-group wrappers and cancellations."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [root_cause(e) for e in exc.exceptions]
        real = [e for e in leaves if not isinstance(e, trio.Cancelled)]
        return real[0] if real else leaves[0]
    return exc


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class Supervisor:
    """Args:
        max_restarts, within: more crashes than this within `within` seconds, and it gives up.
        backoff_min, backoff_max: the exponential wait before a restart.
        permanent: errors no restart can fix; raised at once, as the root cause alone.
    """

    def __init__(self, *, max_restarts: int = 5, within: float = 10.0, backoff_min: float = 0.01,
                 backoff_max: float = 1.0, permanent: tuple[type[Exception], ...] = (ConfigError,)) -> None:
        self.permanent = permanent
        self.max_restarts = max_restarts
        self.within = within
        self.backoff_min = backoff_min
        self.backoff_max = backoff_max
        self.restarts: dict[str, int] = {}
        self._nursery: trio.Nursery | None = None
        self._ensured: dict[str, trio.Event] = {}
        self._children: dict[str, trio.Nursery] = {}  # the running instance of each child, by name

    async def start(self, nursery: trio.Nursery, spec: ChildSpec) -> None:
        """Start `spec` under supervision; returns once its first instance has started."""
        await nursery.start(self._supervise, spec)

    def attach(self, nursery: trio.Nursery) -> None:
        """The nursery that children started on demand (`ensure`) run in: the app's root."""
        self._nursery = nursery

    async def ensure(self, spec: ChildSpec) -> None:
        """Start `spec` once, by name, in the attached nursery, under supervision; returns once it
        has started. Callers that come while it is starting wait for that start; if it fails, the
        caller that started it gets the error and each waiting caller tries a start of its own.

        Raises:
            RuntimeError: no nursery is attached (the app is not running).
            SupervisorGaveUp, ConfigError: the child could not be started.
        """
        event = self._ensured.get(spec.name)
        if event is not None and event.is_set():
            return  # running: no checkpoint, so callers need no fast path of their own
        while True:
            event = self._ensured.get(spec.name)
            if event is None:
                break
            await event.wait()
            if spec.name in self._ensured:
                return
        if self._nursery is None:
            raise RuntimeError(f"cannot start '{spec.name}' on demand: the supervisor has no nursery attached")
        event = self._ensured[spec.name] = trio.Event()
        try:
            await self._nursery.start(self._supervise, spec)
        except BaseException:
            del self._ensured[spec.name]
            raise
        finally:
            event.set()

    @property
    def children(self) -> list[str]:
        """The names of the children running now."""
        return sorted(self._children)

    def kill(self, name: str) -> None:
        """Crash the running instance of child `name` (it is restarted by its policy), as a fault
        that no code of the child expects would: for tests, and for an operator's last resort.

        Raises:
            KeyError: no child of that name is running.
        """
        nursery = self._children[name]

        async def crash() -> None:
            raise Killed(f"actor '{name}' killed")

        nursery.start_soon(crash)

    def running(self, name: str) -> bool:
        """Whether `ensure` has started `name` (it may be between restarts)."""
        event = self._ensured.get(name)
        return event is not None and event.is_set()

    async def _supervise(self, spec: ChildSpec, *,
                         task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        crashes: deque[float] = deque()
        started = False
        while True:
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(spec.start)
                    self._children[spec.name] = nursery
                    if not started:
                        started = True
                        task_status.started()
            except BaseException as exc:
                self._children.pop(spec.name, None)
                cause = root_cause(exc)
                if isinstance(cause, trio.Cancelled) or not isinstance(cause, Exception):
                    raise
                if isinstance(cause, self.permanent):
                    raise cause from None  # nothing to log here: the command line prints it
            else:
                self._children.pop(spec.name, None)
                if spec.restart != "permanent":
                    self._ensured.pop(spec.name, None)
                    return
                cause = _Exited(f"{spec.name} returned")
            self._crashed(spec, cause, crashes)
            if spec.restart == "temporary":
                self._ensured.pop(spec.name, None)
                return
            if len(crashes) > self.max_restarts:
                raise SupervisorGaveUp(spec.name, cause)
            await self._backoff(len(crashes))
            self.restarts[spec.name] = self.restarts.get(spec.name, 0) + 1

    async def _backoff(self, crashes: int) -> None:
        """Wait before a restart: tenacity's exponential wait, slept with trio.sleep."""
        from tenacity import AsyncRetrying, stop_after_attempt, wait_exponential

        # One attempt whose only job is the wait: tenacity decides the delay from the number of
        # recent crashes and sleeps it through trio.
        retrying = AsyncRetrying(sleep=trio.sleep, stop=stop_after_attempt(2), reraise=True,
                                 wait=wait_exponential(multiplier=self.backoff_min, max=self.backoff_max))
        delay = retrying.wait(_State(crashes))  # type: ignore[arg-type]  # tenacity reads attempt_number only
        await retrying.sleep(delay)  # type: ignore[misc]  # the sleep given: trio.sleep

    def _crashed(self, spec: ChildSpec, cause: BaseException, crashes: deque[float]) -> None:
        now = trio.current_time()
        crashes.append(now)
        while crashes and now - crashes[0] > self.within:
            crashes.popleft()
        log.error("actor crashed; restarting" if len(crashes) <= self.max_restarts else "actor crashed; giving up",
                  actor=spec.name, error=describe(cause), crashes_in_window=len(crashes),
                  exc_info=(type(cause), cause, cause.__traceback__))
