"""Cached msgspec codecs: one encoder, one frame decoder, one typed decoder per params type.

Decoders are built once per type and reused, as msgspec's performance notes advise; building
a decoder costs far more than using one.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

import msgspec

from specactor.wire.jsonrpc import ErrorData, Frame

T = TypeVar("T")

encoder = msgspec.json.Encoder()
frame_decoder = msgspec.json.Decoder(Frame)
any_decoder = msgspec.json.Decoder()
error_data_decoder = msgspec.json.Decoder(ErrorData)


@cache
def _decoder(tp: Any) -> Any:
    return msgspec.json.Decoder(tp)


def decoder_for(tp: type[T]) -> msgspec.json.Decoder[T]:
    """The cached JSON decoder for `tp`."""
    decoder: msgspec.json.Decoder[T] = _decoder(tp)  # type: ignore[arg-type]
    return decoder


def encode(obj: Any) -> bytes:
    return encoder.encode(obj)
