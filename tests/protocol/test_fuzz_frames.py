"""Malformed frames, in memory and over a real stdio process: every bad frame earns the right
error (or, for a notification, silence) and the server keeps serving; the stdio transport
bounds its memory, keeps stdout pure and exits cleanly at EOF."""

from __future__ import annotations

import gc
import warnings
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from specactor.actors.mailbox import Mailbox
from specactor.protocol.versions import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from specactor.testing import MemoryClient
from tests.protocol.stdio_support import StdioServer
from tests.protocol.support import serve, settle

MiB = 1 << 20
DEEP = 10_000
PING = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}'

# (frame, the id the error must carry, the acceptable codes); codes None: no reply at all.
CASES: dict[str, tuple[bytes, Any, set[int] | None]] = {
    "malformed-json": (b'{"jsonrpc":"2.0","id":1,"method":', None, {-32700}),
    "not-json": (b"hello", None, {-32700}),
    "trailing-garbage": (b'{"jsonrpc":"2.0","id":1,"method":"ping"} }', None, {-32700}),
    "single-quotes": (b"{'jsonrpc':'2.0','id':1,'method':'ping'}", None, {-32700}),
    "nan-id": (b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', None, {-32700}),
    "invalid-utf8": (b'\xff\xfe{"jsonrpc":"2.0"}', None, {-32700}),
    "invalid-utf8-in-string": (b'{"jsonrpc":"2.0","id":1,"method":"p\xc3\x28ng"}', None, {-32700}),
    "lone-surrogate": (rb'{"jsonrpc":"2.0","id":"\ud800","method":"ping"}', None, {-32700}),
    "deep-arrays": (b"[" * DEEP + b"]" * DEEP, None, {-32700}),
    "deep-objects": (b'{"a":' * DEEP + b"1" + b"}" * DEEP, None, {-32700}),
    "deep-params": (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + b"[" * DEEP + b"]" * DEEP + b"}}",
                    None, {-32700}),
    "wrong-jsonrpc": (b'{"jsonrpc":"1.0","id":2,"method":"ping"}', 2, {-32600}),
    "numeric-jsonrpc": (b'{"jsonrpc":2.0,"id":3,"method":"ping"}', 3, {-32600}),
    "missing-jsonrpc": (b'{"id":4,"method":"ping"}', 4, {-32600}),
    "empty-object": (b"{}", None, {-32600}),
    "number": (b"42", None, {-32600}),
    "string": (b'"ping"', None, {-32600}),
    "null": (b"null", None, {-32600}),
    "boolean": (b"true", None, {-32600}),
    "bool-id": (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, {-32600}),
    "float-id": (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, {-32600}),
    "object-id": (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', None, {-32600}),
    "array-id": (b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', None, {-32600}),
    "null-id-with-method": (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, {-32600}),
    "numeric-method": (b'{"jsonrpc":"2.0","id":5,"method":5}', 5, {-32600}),
    "empty-method": (b'{"jsonrpc":"2.0","id":6,"method":""}', 6, {-32600}),
    "neither-request-nor-response": (b'{"jsonrpc":"2.0","id":7}', 7, {-32600}),
    "unknown-method": (b'{"jsonrpc":"2.0","id":8,"method":"no/such/method"}', 8, {-32601}),
    "unknown-method-string-id": (b'{"jsonrpc":"2.0","id":"q-1","method":"tools/explode"}', "q-1", {-32601}),
    "scalar-params-number": (b'{"jsonrpc":"2.0","id":9,"method":"ping","params":5}', 9, {-32600, -32602}),
    "scalar-params-string": (b'{"jsonrpc":"2.0","id":10,"method":"ping","params":"x"}', 10, {-32600, -32602}),
    "scalar-params-null": (b'{"jsonrpc":"2.0","id":11,"method":"ping","params":null}', 11, {-32600, -32602}),
    "array-params": (b'{"jsonrpc":"2.0","id":12,"method":"ping","params":[1]}', 12, {-32600, -32602}),
    "meta-not-an-object": (b'{"jsonrpc":"2.0","id":13,"method":"ping","params":{"_meta":5}}', 13, {-32602}),
    "unknown-notification": (b'{"jsonrpc":"2.0","method":"notifications/unheard_of"}', None, None),
    "request-method-as-notification": (b'{"jsonrpc":"2.0","method":"tools/list"}', None, None),
    "cancel-for-nothing": (b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}',
                           None, None),
    "bad-cancel-params": (b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[1]}}',
                          None, None),
    "unsolicited-result": (b'{"jsonrpc":"2.0","id":"s-77","result":{}}', None, None),
    "unsolicited-error": (b'{"jsonrpc":"2.0","id":"s-78","error":{"code":-1,"message":"x"}}', None, None),
    "blank": (b"   \t ", None, None),
}


async def open_session(client: MemoryClient, era: str) -> None:
    if era == "legacy":
        await client.initialize()
    elif era == "modern":
        await client.modern("server/discover")


@pytest.mark.parametrize("era", ["new", "legacy", "modern"])
@pytest.mark.parametrize("case", list(CASES))
async def test_a_bad_frame_gets_its_error_and_the_server_keeps_serving(tmp_path: Path, era: str, case: str) -> None:
    frame, ident, codes = CASES[case]
    async with serve(tmp_path) as client:
        await open_session(client, era)
        await client.send_raw(frame)
        await settle(client)  # raises unless the server still answers
        if codes is None:
            assert client.replies == {}, f"a reply to a frame that must not get one: {client.replies}"
            return
        assert list(client.replies) == [ident], client.replies
        error = client.replies[ident]["error"]
        assert error["code"] in codes and isinstance(error["message"], str) and error["message"]
        assert client.conn.session.era == era


async def test_a_frame_split_across_sends_is_two_parse_errors_not_one_request(tmp_path: Path) -> None:
    async with serve(tmp_path) as client:
        await client.send_raw(b'{"jsonrpc":"2.0","id":1,')
        await client.send_raw(b'"method":"ping"}')
        await settle(client)
        assert 1 not in client.replies


# ------------------------------------------------------------------ actor hygiene


async def test_an_actor_cancelled_mid_letter_leaves_no_abandoned_async_generator() -> None:
    box: Mailbox[str] = Mailbox("test", 1)

    async def actor() -> None:
        async for _letter in box:
            await trio.sleep_forever()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(actor)
            await box.cast("work")
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        gc.collect()
    leaked = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
    assert not leaked, leaked


# ------------------------------------------------------------------ a real stdio process


def assert_stdout_is_jsonrpc(server: StdioServer) -> None:
    assert server.stdout_lines, "the server wrote nothing"
    for line in server.stdout_lines:
        assert line.endswith(b"\n")
        message = msgspec.json.decode(line)
        for item in message if isinstance(message, list) else [message]:
            assert item["jsonrpc"] == "2.0", line[:200]


def echo_line(ident: int, text: str) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                                "params": {"name": "echo", "arguments": {"text": text}}})


slow = pytest.mark.slow


@slow
def test_a_16_mib_line_gets_its_correct_reply(tmp_path: Path) -> None:
    text = "0123456789abcdef" * MiB
    with StdioServer(tmp_path) as server:
        server.initialize()
        server.send_line(echo_line(7, text))
        reply = server.reply_for(7)
        assert reply["result"]["structuredContent"] == {"success": True, "data": {"text": text}}
        assert server.request("ping")["result"] == {}
        server.close_stdin()
        assert server.wait() == 0
        assert_stdout_is_jsonrpc(server)


@slow
def test_a_70_mib_line_is_refused_naming_the_limit_without_holding_it(tmp_path: Path) -> None:
    with StdioServer(tmp_path) as server:
        server.request("ping")
        before = server.peak_rss_kib()
        server.send_line(b"x" * (70 * MiB))
        error = server.reply_for(None)["error"]
        assert error["code"] == -32600
        assert str(64 * MiB) in error["message"] and str(70 * MiB) in error["message"]
        assert server.request("ping")["result"] == {}
        growth = server.peak_rss_kib() - before
        assert growth < 2 * 64 * 1024, f"resident memory grew by {growth} KiB"  # less than twice the limit
        server.close_stdin()
        assert server.wait() == 0
        assert_stdout_is_jsonrpc(server)


@slow
def test_an_over_long_line_is_skipped_in_constant_memory(tmp_path: Path) -> None:
    with StdioServer(tmp_path, {"SPECACTOR_MAX_LINE_BYTES": str(MiB)}) as server:
        server.request("ping")
        before = server.peak_rss_kib()
        server.send_line(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"y" * (70 * MiB) + b'"}}')
        error = server.reply_for(None)["error"]
        assert error["code"] == -32600 and str(MiB) in error["message"]
        assert server.request("ping")["result"] == {}
        growth = server.peak_rss_kib() - before
        assert growth < 16 * 1024, f"resident memory grew by {growth} KiB for a 1 MiB limit"


@slow
def test_a_line_over_the_limit_is_refused_even_when_it_arrives_in_one_read(tmp_path: Path) -> None:
    with StdioServer(tmp_path, {"SPECACTOR_MAX_LINE_BYTES": "1024"}) as server:
        server.request("ping")
        line = b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"_meta":{"pad":"' + b"z" * 2000 + b'"}}}'
        server.send_line(line)  # one write below PIPE_BUF: the server reads it whole
        server.request("ping")
        assert "big" not in server.replies, "a 2 KiB line passed a 1 KiB limit"
        assert server.replies[None]["error"]["code"] == -32600


@slow
def test_stdio_answers_bad_bytes_and_stays_pure(tmp_path: Path) -> None:
    with StdioServer(tmp_path) as server:
        server.send_line(b"\xff\xfe\xfd not utf-8")
        assert server.reply_for(None)["error"]["code"] == -32700
        for frame, ident, codes in CASES.values():
            if b"\n" in frame:
                continue
            server.send_line(frame)
            reply = server.request("ping", ident="after")
            assert reply["result"] == {}
            if codes is not None:
                assert server.replies.pop(ident)["error"]["code"] in codes
            assert server.replies == {}, server.replies
        server.initialize()
        server.request("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
        server.request("tools/call", {"name": "test_tool_with_progress", "arguments": {},
                                      "_meta": {"progressToken": 1}})
        assert len(server.notifications) == 6
        server.close_stdin()
        assert server.wait() == 0
        assert_stdout_is_jsonrpc(server)
        assert b"Traceback" not in server.stderr


@slow
def test_stdin_eof_exits_zero_after_finishing_in_flight_requests(tmp_path: Path) -> None:
    with StdioServer(tmp_path) as server:
        server.initialize()
        server.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                     "params": {"name": "test_tool_with_progress", "arguments": {}}})
        server.close_stdin()
        assert server.reply_for("slow")["result"]["content"][0]["text"] == "0"
        assert server.wait() == 0
        assert_stdout_is_jsonrpc(server)


@slow
def test_a_modern_stdio_session_works_without_a_handshake(tmp_path: Path) -> None:
    meta = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
    with StdioServer(tmp_path) as server:
        discover = server.request("server/discover", {"_meta": meta})
        assert "2026-07-28" in discover["result"]["supportedVersions"]
        reply = server.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta})
        assert reply["result"]["structuredContent"]["data"] == {"text": "hi"}
        server.request("tools/call", {"name": "test_trigger_tool_change", "arguments": {}, "_meta": meta})
        server.request("tools/list", {"_meta": meta})
        assert server.notifications == []  # no list_changed outside a listen stream
        server.close_stdin()
        assert server.wait() == 0
        assert_stdout_is_jsonrpc(server)
