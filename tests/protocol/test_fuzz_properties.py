"""Property: whatever one frame holds (random bytes, random text, a mutated valid request), the
server answers it with at most one well-formed JSON-RPC reply and then still serves.

Each example gets a fresh in-memory server (a few milliseconds), so one example's session
state never masks another's bug. `SPECACTOR_FUZZ=1` raises the example count (tests/conftest.py).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from specactor.protocol.versions import META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROTOCOL_VERSION
from tests.protocol.support import ERROR_CODES, NO_SESSION_LOG, serve, settle

META = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}


def _req(ident: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


VALID: list[dict[str, Any]] = [
    _req(1, "ping"),
    _req(2, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "fuzz", "version": "0"}}),
    _req(3, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {}}),
    _req("d", "server/discover", {"_meta": META}),
    _req(4, "tools/list", {"_meta": META, "cursor": None}),
    _req(5, "tools/call", {"name": "echo", "arguments": {"text": "hi"}, "_meta": META}),
    _req(6, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2},
                           "_meta": {**META, "progressToken": "p", META_LOG_LEVEL: "debug"}}),
    _req(7, "resources/read", {"uri": "test://template/1/data", "_meta": META}),
    _req(8, "prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"},
                            "_meta": META}),
    _req(9, "completion/complete", {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                                    "argument": {"name": "arg1", "value": "h"}, "_meta": META}),
    _req(10, "tools/list", {"cursor": "dG9vbHM6Mg=="}),
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": "s-1", "result": {}},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)


def _containers(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, (dict, list)):
        out.append(node)
        for child in node.values() if isinstance(node, dict) else node:
            _containers(child, out)
    return out


@st.composite
def mutated_requests(draw: st.DrawFn) -> bytes:
    """A valid message with one JSON-level change, then maybe one byte-level change."""
    msg = copy.deepcopy(draw(st.sampled_from(VALID)))
    target = draw(st.sampled_from(_containers(msg, [])))
    action = draw(st.sampled_from(["replace", "delete", "add", "wrap"]))
    if isinstance(target, dict) and target:
        key = draw(st.sampled_from(sorted(target)))
        if action == "replace":
            target[key] = draw(json_values)
        elif action == "delete":
            del target[key]
        elif action == "wrap":
            target[key] = [target[key]]
        else:
            target[draw(st.text(max_size=8))] = draw(json_values)
    elif isinstance(target, list) and target:
        target[draw(st.integers(0, len(target) - 1))] = draw(json_values)
    data = msgspec.json.encode(draw(st.sampled_from([msg, [msg], msg.get("params", msg)])))
    damage = draw(st.sampled_from(["none", "none", "truncate", "insert", "flip"]))
    at = draw(st.integers(0, len(data)))
    if damage == "truncate":
        data = data[:at]
    elif damage == "insert":
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    elif damage == "flip" and at < len(data):
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    return data


def _sent_id(data: bytes) -> Any:
    """The id the frame carries as Python's json sees it, or a marker when it has none."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return ...
    return value.get("id", ...) if isinstance(value, dict) else ...


def check_one_frame(tmp_path: Path, data: bytes) -> None:
    async def body() -> None:
        async with serve(tmp_path, session_log=NO_SESSION_LOG) as client:
            await client.send_raw(data)
            barrier = await settle(client)  # the server still answers
            frames = [msgspec.json.decode(raw) for raw in client.raw]
            replies = [f for f in frames
                       if not (isinstance(f, dict) and "method" in f) and f is not None
                       and not (isinstance(f, dict) and f.get("id") == barrier["id"])]
            assert len(replies) <= 1, replies
            for reply in replies:
                assert isinstance(reply, dict), reply  # a single frame is never answered with a batch
                assert reply["jsonrpc"] == "2.0" and ("result" in reply) != ("error" in reply), reply
                if "error" in reply:
                    assert reply["error"]["code"] in ERROR_CODES, reply
                    assert isinstance(reply["error"]["message"], str), reply
                    if reply["error"]["code"] == -32700:
                        assert reply.get("id") is None, reply
                if reply.get("id") is not None:
                    assert reply.get("id") == _sent_id(data), (reply, data)

    trio.run(body)


@settings(database=None)  # no example files outside tests/protocol
@given(st.binary(max_size=300))
@example(b"")
@example(b"\n\n")
@example(b"[" * 5000)
def test_random_bytes_never_break_the_server(tmp_path: Path, data: bytes) -> None:
    check_one_frame(tmp_path, data)


@settings(database=None)  # no example files outside tests/protocol
@given(st.text(max_size=300))
@example('{"jsonrpc":"2.0","id":1,"method":"ping"}')
@example('{"jsonrpc":"2.0","id":"\u00e9\u6f22\U0001f600","method":"ping"}')
def test_random_text_never_breaks_the_server(tmp_path: Path, text: str) -> None:
    check_one_frame(tmp_path, text.encode())


@settings(database=None)  # no example files outside tests/protocol
@given(mutated_requests())
def test_mutated_requests_never_break_the_server(tmp_path: Path, data: bytes) -> None:
    check_one_frame(tmp_path, data)
