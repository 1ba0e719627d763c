"""One POST's queue (`RequestConn`): what the dispatcher sends arrives in order, a cancelled
request ends the queue, and a client that does not read still holds the sender back at FRAMES,
whether or not the memory channel was made before the first frame."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from specactor.actors.http_exchange import FRAMES, RequestConn
from specactor.protocol.frames import Reply
from specactor.protocol.session import Session

WAIT = 10.0


async def test_a_reply_sent_before_anyone_waits_is_taken_without_a_channel() -> None:
    conn = RequestConn(Session())
    with pytest.raises(trio.WouldBlock):
        conn.take_nowait()
    await conn.reply(Reply(b'{"id":1}'))
    taken = conn.take_nowait()
    assert isinstance(taken, Reply) and taken.data == b'{"id":1}'
    assert conn._channel is None  # the inline path never made one


async def test_frames_sent_early_come_out_of_the_channel_in_order_before_later_ones() -> None:
    conn = RequestConn(Session())
    await conn.send(b"n1")
    await conn.send(b"n2")
    assert conn.take_nowait() == b"n1"
    with trio.fail_after(WAIT):
        assert await conn.frames.receive() == b"n2"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.reply, Reply(b"r"))
            got = await conn.frames.receive()
    assert isinstance(got, Reply) and got.data == b"r"


@pytest.mark.parametrize("channel_first", [False, True])
async def test_an_abandoned_request_gives_what_was_sent_then_the_end(channel_first: bool) -> None:
    conn = RequestConn(Session())
    if channel_first:
        conn.frames  # noqa: B018 - the POST waited before anything was sent
    await conn.send(b"n1")
    conn.abandon(1)
    await conn.reply(Reply(b"late"))  # dropped: the client left
    assert conn.take_nowait() == b"n1"
    with pytest.raises(trio.EndOfChannel):
        conn.take_nowait()
    with trio.fail_after(WAIT), pytest.raises(trio.EndOfChannel):
        await conn.frames.receive()


async def test_a_client_that_does_not_read_holds_the_sender_back_at_frames() -> None:
    conn = RequestConn(Session())
    sent = 0

    async def sender() -> None:
        nonlocal sent
        for i in range(FRAMES + 5):
            await conn.send(str(i).encode())
            sent += 1

    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            await trio.testing.wait_all_tasks_blocked()
            assert sent == FRAMES  # the next one waits for the reader, as the channel alone would do
            got = [await conn.frames.receive() for _ in range(FRAMES + 5)]
    assert got == [str(i).encode() for i in range(FRAMES + 5)]
