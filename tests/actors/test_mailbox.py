"""Typed mailboxes: call and reply, timeouts, crashes while holding a letter, casts."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import pytest
import trio
import trio.testing

from specactor.actors.mailbox import ActorCrashed, ActorTimeout, Mailbox


async def doubler(mailbox: Mailbox[int], *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    task_status.started()
    async for letter in mailbox:
        with letter:
            letter.reply(letter.body * 2)


async def test_call_returns_the_reply(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox("doubler", 4)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(doubler, mailbox)
            assert await mailbox.call(21, timeout=1.0) == 42
            assert [await mailbox.call(i, timeout=1.0) for i in range(5)] == [0, 2, 4, 6, 8]
            nursery.cancel_scope.cancel()


async def test_call_re_raises_the_error_an_actor_fails_it_with(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[str] = Mailbox("refuser", 4)

    async def refuser() -> None:
        async for letter in mailbox:
            with letter:
                letter.fail(LookupError(f"no {letter.body}"))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(refuser)
            with pytest.raises(LookupError, match="no thing"):
                await mailbox.call("thing", timeout=1.0)
            nursery.cancel_scope.cancel()


async def test_a_call_nobody_answers_times_out_with_actor_timeout(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox("sleepy", 4)
    start = trio.current_time()
    with trio.fail_after(60), pytest.raises(ActorTimeout, match="sleepy did not answer within 2 s"):
        await mailbox.call(1, timeout=2.0)
    assert trio.current_time() - start == pytest.approx(2.0)


async def test_a_call_to_a_full_mailbox_times_out_too(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox("full", 1)
    assert mailbox.cast_nowait(0)
    with trio.fail_after(60), pytest.raises(ActorTimeout):
        await mailbox.call(1, timeout=1.0)


async def test_an_actor_crashing_while_holding_the_letter_fails_the_call_at_once(
        autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox("crasher", 4)
    crashed: list[BaseException] = []

    async def crasher() -> None:
        letter = await mailbox.receive()
        await trio.sleep(0.5)
        with letter:
            raise RuntimeError("mid-message")

    async def supervised() -> None:
        try:
            await crasher()
        except RuntimeError as exc:
            crashed.append(exc)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(supervised)
            start = trio.current_time()
            with pytest.raises(ActorCrashed, match="crasher stopped before answering"):
                await mailbox.call(1, timeout=30.0)
            # at the crash, not after the 30 s timeout
            assert trio.current_time() - start == pytest.approx(0.5)
    assert len(crashed) == 1


async def test_cast_delivers_without_a_reply_and_cast_nowait_is_false_when_full() -> None:
    mailbox: Mailbox[str] = Mailbox("inbox", 2)
    assert mailbox.cast_nowait("a") is True
    await mailbox.cast("b")
    assert mailbox.cast_nowait("c") is False  # full: not sent
    got = [mailbox.receive_nowait().body, (await mailbox.receive()).body]
    assert got == ["a", "b"]
    with pytest.raises(trio.WouldBlock):
        mailbox.receive_nowait()  # "c" was really dropped
    assert mailbox.cast_nowait("d") is True


async def test_cast_waits_while_the_mailbox_is_full(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox("pressure", 1)
    await mailbox.cast(1)
    sent = trio.Event()

    async def sender() -> None:
        await mailbox.cast(2)
        sent.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            await trio.testing.wait_all_tasks_blocked()
            assert not sent.is_set()
            assert (await mailbox.receive()).body == 1
            await sent.wait()
            assert (await mailbox.receive()).body == 2


async def test_a_letter_replied_by_a_cast_is_harmless() -> None:
    mailbox: Mailbox[int] = Mailbox("cast", 1)
    await mailbox.cast(1)
    with await mailbox.receive() as letter:
        letter.reply("ignored")
        letter.fail(RuntimeError("ignored too"))


async def test_an_actor_answering_after_its_caller_timed_out_keeps_running(
        autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox("slow", 4)
    answered: list[int] = []

    async def slow_actor() -> None:
        while True:
            letter = await mailbox.receive()
            await trio.sleep(2.0)  # longer than the first caller waits
            with letter:
                letter.reply(letter.body)
            answered.append(letter.body)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_actor)
            with pytest.raises(ActorTimeout):
                await mailbox.call(1, timeout=1.0)
            assert await mailbox.call(2, timeout=10.0) == 2
            nursery.cancel_scope.cancel()
    assert answered == [1, 2]


async def test_an_actor_loop_that_raises_leaves_no_unfinished_async_generator() -> None:
    mailbox: Mailbox[int] = Mailbox("loop", 1)
    mailbox.cast_nowait(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            async for _letter in mailbox:
                raise RuntimeError("the actor crashed")
        except RuntimeError:
            pass
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_an_actor_answering_a_cancelled_caller_wakes_nobody_and_serves_the_next(
        autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox("late", 4)
    held: list[Any] = []

    async def holder() -> None:
        async for letter in mailbox:
            held.append(letter)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(holder)
            with trio.move_on_after(1.0) as waited:  # the caller is cancelled, not timed out by the mailbox
                await mailbox.call(1, timeout=30.0)
            assert waited.cancelled_caught
            with held[0] as letter:
                letter.reply("too late")  # nobody waits: no task is woken (trio would raise if one were)
            async with trio.open_nursery() as calls:
                calls.start_soon(mailbox.call, 2, 30.0)
                await trio.testing.wait_all_tasks_blocked()
                with held[1] as letter:
                    letter.reply("in time")
            nursery.cancel_scope.cancel()


async def test_a_letter_answered_twice_is_an_actors_bug_and_an_answer_after_closing_is_dropped(
        autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox("twice", 4)
    errors: list[str] = []

    async def twice() -> None:
        letter = await mailbox.receive()
        with letter:
            letter.reply(1)
            try:
                letter.reply(2)
            except RuntimeError as exc:
                errors.append(str(exc))
        letter.reply(3)  # closed: dropped, as a closed channel dropped it

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(twice)
            assert await mailbox.call(0, timeout=5.0) == 1
    assert errors == ["a letter was answered twice"]
