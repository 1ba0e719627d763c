"""Bytes in, classified messages out: parse errors, invalid requests and batches decided here.

One line (stdio) or one body (HTTP) becomes a `Parsed`: the messages to act on and the error
replies to send at once. Nothing is raised to the transport; every failure is a reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
from msgspec import Raw

from specactor.protocol.errors import INVALID_REQUEST, PARSE_ERROR
from specactor.wire.codec import any_decoder, decoder_for, encode, frame_decoder
from specactor.wire.jsonrpc import JSONRPC_VERSION, ErrorObject, ErrorResponse, Frame, ResultResponse

Kind = Literal["request", "notification", "response"]
_raw_list_decoder = decoder_for(list[Raw])


@dataclass
class Incoming:
    """A well-formed JSON-RPC message. `params` is still raw; the core decodes it by method."""

    kind: Kind
    id: int | str | None
    method: str
    frame: Frame
    raw: bytes
    decoded: Any = None  # the typed params, once the core has decoded them
    tool_error: str | None = None  # the envelope's error code when a tool result has isError


@dataclass
class Parsed:
    messages: list[Incoming] = field(default_factory=list)
    errors: list[bytes] = field(default_factory=list)
    batch: bool = False


def error_response(ident: int | str | None, code: int, message: str, data: Any = None) -> bytes:
    err = ErrorObject(code, message) if data is None else ErrorObject(code, message, data)
    return encode(ErrorResponse(jsonrpc=JSONRPC_VERSION, id=msgspec.UNSET if ident is None else ident, error=err))


def result_response(ident: int | str, result: Any) -> bytes:
    return encode(ResultResponse(JSONRPC_VERSION, ident, result))


def classify(frame: Frame, raw: bytes) -> Incoming | bytes:
    """The message `frame` is, or the error reply it earns."""
    ident = frame.id
    id_type = type(ident)
    if frame.jsonrpc != JSONRPC_VERSION:
        return error_response(ident if id_type is int or id_type is str else None, INVALID_REQUEST,
                              'Invalid Request: "jsonrpc" must be "2.0"')
    if id_type is not int and id_type is not str:  # bool is a subclass of int, not int itself
        if ident is not msgspec.UNSET:
            return error_response(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        ident = None
    if frame.method is not msgspec.UNSET:
        if type(frame.method) is not str or not frame.method:
            return error_response(ident, INVALID_REQUEST, "Invalid Request: method must be a non-empty string")
        if frame.params and bytes(frame.params)[:1] not in (b"{", b"["):
            return error_response(ident, INVALID_REQUEST, "Invalid Request: params must be an object")
        kind: Kind = "notification" if frame.id is msgspec.UNSET else "request"
        return Incoming(kind, ident, frame.method, frame, raw)
    if ident is not None and (frame.result or frame.error):
        return Incoming("response", ident, "", frame, raw)
    return error_response(ident, INVALID_REQUEST, "Invalid Request: not a request, notification or response")


def _decode_frame(data: bytes) -> Frame | bytes:
    try:
        return frame_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError) as err:
        return error_response(None, PARSE_ERROR, f"Parse error: {_why(err)}")


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
            return Parsed(errors=[error_response(None, PARSE_ERROR,
                                                 f"Parse error: invalid UTF-8 at byte {err.start}")])
    head = body[:1]
    if head == b"{":
        frame = _decode_frame(body)
        if isinstance(frame, bytes):
            return Parsed(errors=[frame])
        item = classify(frame, body)
        return Parsed(errors=[item]) if isinstance(item, bytes) else Parsed(messages=[item])
    if head == b"[":
        return _parse_batch(body, batches)
    try:
        any_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError) as err:
        return Parsed(errors=[error_response(None, PARSE_ERROR, f"Parse error: {_why(err)}")])
    return Parsed(errors=[error_response(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object")])


def _parse_batch(body: bytes, batches: bool) -> Parsed:
    try:
        items = _raw_list_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError) as err:
        return Parsed(errors=[error_response(None, PARSE_ERROR, f"Parse error: {_why(err)}")])
    if not batches:
        return Parsed(errors=[error_response(None, INVALID_REQUEST,
                                             "Invalid Request: JSON-RPC batches are not supported by this "
                                             "protocol version (only 2025-03-26 accepts them)")])
    if not items:
        return Parsed(errors=[error_response(None, INVALID_REQUEST, "Invalid Request: empty batch")])
    out = Parsed(batch=True)
    for item in items:
        raw = bytes(item)
        if raw[:1] != b"{":
            out.errors.append(error_response(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object"))
            continue
        frame = _decode_frame(raw)
        classified = classify(frame, raw) if isinstance(frame, Frame) else frame
        if isinstance(classified, bytes):
            out.errors.append(classified)
        else:
            out.messages.append(classified)
    return out
