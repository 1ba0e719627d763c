"""The OpenAI-compatible `/v1/embeddings` exchange, pure: the request, the reply, what a failure means.

Vectors are asked for as base64 (`encoding_format`), as the OpenAI SDKs ask by default: each is its
float32 numbers, little-endian, about a quarter of the JSON's size and read without parsing a
number. A reply of JSON numbers is read too (an endpoint that ignores the field sends those), and
an endpoint that refuses the field altogether (`refuses_base64`) is then asked for floats.

The actor does the HTTP; this module decides. A 429 is *rate limited* (wait `Retry-After`
seconds, given as seconds or an HTTP date); 408, 5xx and transport errors are *transient*
(retried with backoff); any other status, or a reply we cannot read, is *fatal*.
"""

from __future__ import annotations

import array
import binascii
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from specactor.domain.retry_after import retry_after

Kind = Literal["rate_limited", "transient", "fatal"]
Encoding = Literal["base64", "float"]


@dataclass(frozen=True)
class Failure:
    kind: Kind
    message: str
    status: int | None = None
    retry_after: float = 0.0


class _Datum(msgspec.Struct):
    embedding: list[float] | str  # str: base64 of float32 numbers, little-endian
    index: int = 0


class _Reply(msgspec.Struct):
    data: list[_Datum]


def request_body(model: str, texts: Sequence[str], encoding: Encoding = "base64") -> bytes:
    return msgspec.json.encode({"model": model, "input": list(texts), "encoding_format": encoding})


def _floats(embedding: list[float] | str) -> list[float] | None:
    """The numbers of one embedding, or None when its base64 is not whole float32 numbers."""
    if not isinstance(embedding, str):
        return embedding
    try:
        raw = binascii.a2b_base64(embedding, strict_mode=True)
    except binascii.Error:
        return None
    if len(raw) % 4:
        return None
    out = unpack(raw)
    if sys.byteorder == "big":
        out.byteswap()
    return out.tolist()


def parse_reply(body: bytes, expected: int) -> list[list[float]] | Failure:
    """The vectors in input order, or a fatal Failure naming what was wrong with the reply."""
    try:
        reply = msgspec.json.decode(body, type=_Reply)
    except msgspec.DecodeError as err:
        return Failure("fatal", f"the embeddings endpoint sent an unreadable reply: {err}")
    vectors = [_floats(d.embedding) for d in sorted(reply.data, key=lambda d: d.index)]
    # A NaN or an infinity anywhere makes the sum one (as does a sum past 1.8e308: no embedding is that big).
    usable = [v for v in vectors if v and math.isfinite(sum(v))]
    if len(usable) != expected or len(vectors) != expected:
        return Failure("fatal", f"the embeddings endpoint sent {len(usable)} usable vectors for {expected} inputs")
    return usable


def refuses_base64(status: int, body: bytes) -> bool:
    """Whether a refusal (a 4xx other than 408 and 429) is about `encoding_format`: an endpoint that
    validates its fields strictly and does not know base64; asked for floats, it may answer."""
    return 400 <= status < 500 and status not in (408, 429) and b"encoding_format" in body[:4096]


def classify(status: int, headers: Mapping[str, str], body: bytes, now: float) -> Failure:
    """What an HTTP error status means for the caller."""
    snippet = body[:200].decode("utf-8", "replace")
    if status == 429:
        return Failure("rate_limited", "the embeddings endpoint is rate limiting us", status,
                       retry_after(headers, now))
    if status == 408 or status >= 500:
        return Failure("transient", f"the embeddings endpoint failed with HTTP {status}: {snippet}", status)
    return Failure("fatal", f"the embeddings endpoint refused the request with HTTP {status}: {snippet}", status)


def pack(vector: Sequence[float]) -> bytes:
    """A unit-length float32 blob (so that cosine similarity is a dot product)."""
    norm = math.sqrt(math.fsum(x * x for x in vector)) or 1.0
    return array.array("f", (x / norm for x in vector)).tobytes()


def unpack(blob: bytes) -> array.array[float]:
    out = array.array("f")
    out.frombytes(blob)
    return out
