"""Typed mailboxes on trio memory channels: `call` (request, reply, timeout) and `cast`.

A call carries a one-slot reply channel; the actor answers inside `with letter:` so that an
actor which crashes mid-message closes the reply channel and the caller learns at once
(`ActorCrashed`) rather than waiting out its timeout.
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


class Letter(msgspec.Struct, Generic[M]):
    """One message and, for a call, where its answer goes."""

    body: M
    _reply: trio.MemorySendChannel[outcome.Outcome[Any]] | None = None

    def reply(self, value: Any) -> None:
        self.answer(outcome.Value(value))

    def fail(self, exc: BaseException) -> None:
        self.answer(outcome.Error(exc))

    def answer(self, result: outcome.Outcome[Any]) -> None:
        if self._reply is None:
            return
        try:
            self._reply.send_nowait(result)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the caller timed out and left; the actor carries on

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
        # One slot: the actor sends exactly one answer and must never block on it.
        reply_send, reply_recv = trio.open_memory_channel[outcome.Outcome[Any]](1)
        letter = Letter(body, reply_send)
        try:
            with trio.fail_after(timeout):
                # The call waits for its answer anyway: the letter is posted without a scheduler
                # pass, unless the caller is cancelled already (refused, as `send` would).
                await trio.lowlevel.checkpoint_if_cancelled()
                await post(self._send, letter)
                async with reply_recv:
                    result = await reply_recv.receive()
        except trio.TooSlowError:
            raise ActorTimeout(f"{self.name} did not answer within {timeout:g} s") from None
        except trio.EndOfChannel:
            raise ActorCrashed(f"{self.name} stopped before answering") from None
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
