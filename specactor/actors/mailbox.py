"""Typed mailboxes on trio memory channels: `call` (request, reply, timeout) and `cast`.

A call carries a one-shot reply slot (`Reply`); the actor answers inside `with letter:` so that an
actor which crashes mid-message closes the slot and the caller learns at once (`ActorCrashed`)
rather than waiting out its timeout.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Generic, TypeVar

import msgspec
import outcome
import trio

M = TypeVar("M")
T = TypeVar("T")


async def post(channel: trio.MemorySendChannel[T], item: T) -> None:
    """Queue `item`, waiting only while `channel` is full. trio's `send` always passes through the
    scheduler; a sender that waits for an answer anyway (or whose receiver checkpoints as it takes
    the next item) need not pay that pass as well."""
    try:
        channel.send_nowait(item)
    except trio.WouldBlock:
        await channel.send(item)


class ActorError(Exception):
    """A call to an actor did not complete."""


class ActorCrashed(ActorError):
    pass


class ActorTimeout(ActorError):
    pass


class Reply:
    """Where one call's answer goes: set once by the actor (`answer`; `close` without one: the actor
    crashed), waited for by the caller (`wait`). A caller that left (timed out, cancelled) is no
    longer the waiting task (`wait`'s abort), so a late answer wakes nobody.

    A one-slot memory channel did this at ~3x the cost (two channel objects, their shared state and
    an `aclose` for every call: 18 % of the main thread's CPU in a burst of memory searches); this is
    the one waiting task and the one outcome that a call needs."""

    __slots__ = ("_closed", "_result", "_task")

    def __init__(self) -> None:
        self._result: outcome.Outcome[Any] | None = None
        self._closed = False  # closed: no answer will come
        self._task: trio.lowlevel.Task | None = None  # the caller, while it waits

    def answer(self, result: outcome.Outcome[Any]) -> None:
        """Raises:
            RuntimeError: answered twice (an actor's bug; an answer after `close` is dropped, as the
                closed channel's was).
        """
        if self._closed:
            return
        if self._result is not None:
            raise RuntimeError("a letter was answered twice")
        self._result = result
        self._wake()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._wake()

    def _wake(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    async def wait(self) -> outcome.Outcome[Any] | None:
        """The answer, or None when the letter was closed without one; cancellable."""
        if self._result is None and not self._closed:
            self._task = trio.lowlevel.current_task()

            def abort(_: Any) -> trio.lowlevel.Abort:
                self._task = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return self._result


class Letter(msgspec.Struct, Generic[M]):
    """One message and, for a call, where its answer goes."""

    body: M
    _reply: Reply | None = None

    def reply(self, value: Any) -> None:
        self.answer(outcome.Value(value))

    def fail(self, exc: BaseException) -> None:
        self.answer(outcome.Error(exc))

    def answer(self, result: outcome.Outcome[Any]) -> None:
        if self._reply is not None:
            self._reply.answer(result)

    def __enter__(self) -> Letter[M]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._reply is not None:
            self._reply.close()


class Mailbox(Generic[M]):
    """An actor's inbox.

    Args:
        name: the actor's name, for errors.
        size: the buffer. Each actor chooses and explains its own.
    """

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self._send, self._recv = trio.open_memory_channel[Letter[M]](size)

    async def cast(self, body: M) -> None:
        """Deliver `body` and return; waits only while the buffer is full (backpressure)."""
        await self._send.send(Letter(body))

    def cast_nowait(self, body: M) -> bool:
        """Deliver without waiting; False when the buffer is full and the message was not sent."""
        try:
            self._send.send_nowait(Letter(body))
        except trio.WouldBlock:
            return False
        return True

    async def call(self, body: M, timeout: float) -> Any:
        """Deliver `body` and wait at most `timeout` seconds for the answer.

        Raises:
            ActorTimeout: no answer in time.
            ActorCrashed: the actor failed while holding the message.
            Exception: whatever the actor failed the call with.
        """
        reply = Reply()  # the actor answers exactly once and never blocks on it
        letter = Letter(body, reply)
        try:
            with trio.fail_after(timeout):
                # The call waits for its answer anyway: the letter is posted without a scheduler
                # pass, unless the caller is cancelled already (refused, as `send` would).
                await trio.lowlevel.checkpoint_if_cancelled()
                await post(self._send, letter)
                result = await reply.wait()
        except trio.TooSlowError:
            raise ActorTimeout(f"{self.name} did not answer within {timeout:g} s") from None
        if result is None:
            raise ActorCrashed(f"{self.name} stopped before answering")
        return result.unwrap()

    async def receive(self) -> Letter[M]:
        return await self._recv.receive()

    def receive_nowait(self) -> Letter[M]:
        return self._recv.receive_nowait()

    def __aiter__(self) -> Mailbox[M]:
        # A plain iterator, not an async generator: an actor cancelled mid-letter must not leave
        # an abandoned generator behind for the garbage collector to finalise.
        return self

    async def __anext__(self) -> Letter[M]:
        try:
            return await self._recv.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
