"""A connection's peer: notifications out, server-to-client requests out, their replies in.

Each transport builds one `PeerLink` per connection around its `send`; `resolve` is fed the
client's responses to route them to the waiting request.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio

from specactor.protocol.errors import INTERNAL_ERROR, ProtocolError
from specactor.protocol.frames import Incoming
from specactor.wire.codec import any_decoder, encode, error_data_decoder
from specactor.wire.jsonrpc import JSONRPC_VERSION, Notification, Request

Send = Callable[[bytes], Awaitable[None]]
_ids = itertools.count(1)  # server-to-client request ids, unique in the process


Pending = dict[int | str, trio.MemorySendChannel[Incoming]]


class PeerLink:
    """Args:
        send: where this link's frames go.
        pending: the table of requests awaiting a reply; HTTP shares one per session, because
            the reply to a request sent on one POST's stream arrives on another POST.
    """

    def __init__(self, send: Send, pending: Pending | None = None) -> None:
        self._send = send
        self._ids = _ids
        self._pending: Pending = {} if pending is None else pending

    async def notify(self, method: str, params: Any) -> None:
        await self._send(encode(Notification(JSONRPC_VERSION, method, params)))

    async def request(self, method: str, params: Any, timeout: float) -> Any:
        ident = f"s-{next(self._ids)}"
        # One slot: exactly one reply is ever routed here.
        send, recv = trio.open_memory_channel[Incoming](1)
        self._pending[ident] = send
        try:
            await self._send(encode(Request(JSONRPC_VERSION, ident, method, params)))
            with trio.fail_after(timeout):
                reply = await recv.receive()
        except trio.TooSlowError:
            raise ProtocolError(INTERNAL_ERROR, f"the client did not answer {method} within {timeout:g} s") from None
        finally:
            self._pending.pop(ident, None)
        if reply.frame.error:
            err = error_data_decoder.decode(bytes(reply.frame.error))
            raise ProtocolError(err.code, err.message or f"the client refused {method}", err.data)
        return any_decoder.decode(bytes(reply.frame.result))

    def resolve(self, msg: Incoming) -> bool:
        """Route a client response; False when nothing was waiting for its id."""
        waiter = self._pending.pop(msg.id, None) if msg.id is not None else None
        if waiter is None:
            return False
        try:
            waiter.send_nowait(msg)
        except (trio.WouldBlock, trio.BrokenResourceError, msgspec.ValidationError):
            return False
        return True
