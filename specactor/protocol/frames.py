"""Bytes in, classified messages out; and the `Reply` record every answer travels in.

One line (stdio) or one body (HTTP) becomes a `Parsed`: the messages to act on and the error
replies to send at once. Nothing is raised to the transport; every failure is a reply. A
`Reply` carries its bytes with what they mean (the error code, the tool), so nobody downstream
reads the bytes back.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import Raw

from specactor.protocol.errors import INVALID_REQUEST, PARSE_ERROR
from specactor.wire.codec import any_decoder, decoder_for, encode, frame_decoder
from specactor.wire.jsonrpc import JSONRPC_VERSION, ErrorObject, ErrorResponse, Frame, ResultResponse

Kind = Literal["request", "notification", "response"]
_raw_list_decoder = decoder_for(list[Raw])


class Incoming(msgspec.Struct):
    """A well-formed JSON-RPC message. `params` is still raw; the core decodes it by method."""

    kind: Kind
    id: int | str | None
    method: str
    frame: Frame
    raw: bytes


class Reply(msgspec.Struct):
    """One answer as it goes out: `data`, the frame; `code`, its JSON-RPC error code when it is
    an error; `tool_error`, the envelope's code when it is a tool result with `isError`; `tool`,
    the tool a `tools/call` named (`""` otherwise)."""

    data: bytes
    code: int | None = None
    tool_error: str | None = None
    tool: str = ""

    @property
    def error(self) -> str | None:
        """The error the metrics count: the JSON-RPC code, else the tool envelope's code."""
        return self.tool_error if self.code is None else str(self.code)


class Parsed(msgspec.Struct):
    messages: list[Incoming] = msgspec.field(default_factory=list)
    errors: list[Reply] = msgspec.field(default_factory=list)
    batch: bool = False


def error_response(ident: int | str | None, code: int, message: str, data: Any = None) -> bytes:
    err = ErrorObject(code, message) if data is None else ErrorObject(code, message, data)
    return encode(ErrorResponse(jsonrpc=JSONRPC_VERSION, id=msgspec.UNSET if ident is None else ident, error=err))


def error_reply(ident: int | str | None, code: int, message: str, data: Any = None, *, tool: str = "") -> Reply:
    """A JSON-RPC error reply, its code kept beside its bytes."""
    return Reply(error_response(ident, code, message, data), code, None, tool)


def result_response(ident: int | str, result: Any) -> bytes:
    return encode(ResultResponse(JSONRPC_VERSION, ident, result))


def classify(frame: Frame, raw: bytes) -> Incoming | Reply:
    """The message `frame` is, or the error reply it earns."""
    ident = frame.id
    id_type = type(ident)
    if frame.jsonrpc != JSONRPC_VERSION:
        return error_reply(ident if id_type is int or id_type is str else None, INVALID_REQUEST,
                              'Invalid Request: "jsonrpc" must be "2.0"')
    if id_type is not int and id_type is not str:  # bool is a subclass of int, not int itself
        if ident is not msgspec.UNSET:
            return error_reply(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        ident = None
    if frame.method is not msgspec.UNSET:
        if type(frame.method) is not str or not frame.method:
            return error_reply(ident, INVALID_REQUEST, "Invalid Request: method must be a non-empty string")
        if frame.params and bytes(frame.params)[:1] not in (b"{", b"["):
            return error_reply(ident, INVALID_REQUEST, "Invalid Request: params must be an object")
        kind: Kind = "notification" if frame.id is msgspec.UNSET else "request"
        return Incoming(kind, ident, frame.method, frame, raw)
    if ident is not None and (frame.result or frame.error):
        return Incoming("response", ident, "", frame, raw)
    return error_reply(ident, INVALID_REQUEST, "Invalid Request: not a request, notification or response")


def _decode_frame(data: bytes) -> Frame | Reply:
    try:
        return frame_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError) as err:
        return error_reply(None, PARSE_ERROR, f"Parse error: {_why(err)}")


def _why(err: Exception) -> str:
    if isinstance(err, RecursionError):
        return "JSON nests too deeply"
    return str(err)


def parse(data: bytes, *, batches: bool) -> Parsed:
    """Classify one transport frame. `batches` says whether the session accepts JSON-RPC batches."""
    body = data.strip() if data[:1].isspace() or data[-1:].isspace() else data
    if not body:
        return Parsed()
    if not body.isascii():  # ASCII is valid UTF-8; only other bytes need the (allocating) check
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as err:
            return Parsed(errors=[error_reply(None, PARSE_ERROR,
                                                 f"Parse error: invalid UTF-8 at byte {err.start}")])
    head = body[:1]
    if head == b"{":
        frame = _decode_frame(body)
        if isinstance(frame, Reply):
            return Parsed(errors=[frame])
        item = classify(frame, body)
        return Parsed(errors=[item]) if isinstance(item, Reply) else Parsed(messages=[item])
    if head == b"[":
        return _parse_batch(body, batches)
    try:
        any_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError) as err:
        return Parsed(errors=[error_reply(None, PARSE_ERROR, f"Parse error: {_why(err)}")])
    return Parsed(errors=[error_reply(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object")])


def _parse_batch(body: bytes, batches: bool) -> Parsed:
    try:
        items = _raw_list_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError) as err:
        return Parsed(errors=[error_reply(None, PARSE_ERROR, f"Parse error: {_why(err)}")])
    if not batches:
        return Parsed(errors=[error_reply(None, INVALID_REQUEST,
                                             "Invalid Request: JSON-RPC batches are not supported by this "
                                             "protocol version (only 2025-03-26 accepts them)")])
    if not items:
        return Parsed(errors=[error_reply(None, INVALID_REQUEST, "Invalid Request: empty batch")])
    out = Parsed(batch=True)
    for item in items:
        raw = bytes(item)
        if raw[:1] != b"{":
            out.errors.append(error_reply(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object"))
            continue
        frame = _decode_frame(raw)
        classified = classify(frame, raw) if isinstance(frame, Frame) else frame
        if isinstance(classified, Reply):
            out.errors.append(classified)
        else:
            out.messages.append(classified)
    return out
