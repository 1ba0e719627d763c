"""What a line of bytes sent to the server must earn, and what a line the server writes must be.

`expect` reads the bytes a fuzz example writes the way the server's parser does (bytes
whitespace stripped, UTF-8 checked, msgspec JSON) and says which ids must be answered exactly
once, which may be answered at most once (cancelled, open-ended, or named by a cancel), and how
many id-less error replies the unreadable lines earn. `check_line` holds every stdout line to
one complete JSON-RPC message.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgspec

Id = int | str
MISSING: Any = object()
_decode = msgspec.json.Decoder().decode


def valid_id(value: Any) -> bool:
    return type(value) is int or type(value) is str


@dataclass
class Expectation:
    """Replies a run of lines earns: `must` ids exactly once, `may` ids at most once, and
    between `anon_min` and `anon_max` error replies without an id."""

    batches: bool
    max_line: int
    must: Counter[Id] = field(default_factory=Counter)
    may: Counter[Id] = field(default_factory=Counter)
    anon_min: int = 0
    anon_max: int = 0
    open_ended: list[Id] = field(default_factory=list)  # listen streams: cancelled after the example

    def anonymous(self) -> None:
        self.anon_min += 1
        self.anon_max += 1

    def one_reply(self, ident: Any) -> None:
        if valid_id(ident):
            self.must[ident] += 1
        else:
            self.anonymous()

    def cancel(self, params: Any) -> None:
        """A cancel makes an earlier request's reply optional (it may already be on its way)."""
        if isinstance(params, dict) and valid_id(params.get("requestId")):
            target = params["requestId"]
            if self.must[target] > 0:
                self.must[target] -= 1
                self.may[target] += 1

    def line(self, line: bytes) -> None:
        if len(line) > self.max_line:
            self.anonymous()  # skipped unread, answered with one error
            return
        body = line.strip()
        if not body:
            return
        try:
            body.decode("utf-8")
            value = _decode(body)
        except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):
            self.anonymous()  # parse error
            return
        if isinstance(value, list):
            if not self.batches or not value:
                self.anonymous()
                return
            for item in value:  # a 2025-03-26 batch: one array whose items are the replies
                if isinstance(item, dict):
                    self.message(item)
                else:
                    self.anonymous()
            return
        if not isinstance(value, dict):
            self.anonymous()
            return
        self.message(value)

    def message(self, msg: dict[str, Any]) -> None:
        """The server's `classify`, read from the outside: which reply one JSON object earns."""
        ident = msg.get("id", MISSING)
        method = msg.get("method", MISSING)
        if msg.get("jsonrpc") != "2.0":
            self.one_reply(ident)
            return
        if ident is not MISSING and not valid_id(ident):
            self.anonymous()
            return
        if method is MISSING:
            if ident is MISSING or not ("result" in msg or "error" in msg):
                self.one_reply(ident)
            return  # a response to nothing of ours: dropped
        if type(method) is not str or not method or not isinstance(msg.get("params", {}), (dict, list)):
            self.one_reply(ident)
            return
        if method == "notifications/cancelled":  # acted on even when it carries an id
            self.cancel(msg.get("params"))
        if ident is MISSING:
            return  # a notification: never answered
        if method == "subscriptions/listen":  # open-ended by design: no reply until cancelled
            self.may[ident] += 1
            self.open_ended.append(ident)
            return
        self.must[ident] += 1


def expect(data: bytes, *, batches: bool, max_line: int) -> Expectation:
    exp = Expectation(batches, max_line)
    for line in data.split(b"\n"):
        exp.line(line)
    return exp


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_line(raw: bytes, *, batches: bool) -> list[dict[str, Any]]:
    """The messages one stdout line holds; AssertionError when it is anything but JSON-RPC."""
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise AssertionError(f"stdout corrupted: {raw[:300]!r}: {err}") from None
    if isinstance(value, list):
        assert batches and value, f"an array reply outside a 2025-03-26 batch session: {raw[:300]!r}"
        assert all(isinstance(item, dict) and "method" not in item for item in value), raw[:300]
        items = value
    else:
        items = [value]
    for item in items:
        assert isinstance(item, dict), f"stdout line is no JSON object: {raw[:300]!r}"
        assert item.get("jsonrpc") == "2.0", f"jsonrpc is not '2.0': {raw[:300]!r}"
        if "method" in item:  # the server's own notification (or request)
            assert isinstance(item["method"], str) and "result" not in item and "error" not in item, raw[:300]
            assert "id" not in item or valid_id(item["id"]), raw[:300]
            continue
        assert ("result" in item) != ("error" in item), f"not exactly one of result/error: {raw[:300]!r}"
        assert item.get("id") is None or valid_id(item["id"]), f"odd reply id: {raw[:300]!r}"
        if "error" in item:
            error = item["error"]
            assert isinstance(error, dict) and type(error.get("code")) is int, raw[:300]
            assert isinstance(error.get("message"), str), raw[:300]
        else:
            assert item.get("id") is not None, f"a result without an id: {raw[:300]!r}"
    return items
