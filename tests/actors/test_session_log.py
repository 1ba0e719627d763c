"""The session logger: every request and response as a JSONL line, in the daily and session files."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from specactor.actors.session_log import Entry, Flush, SessionLogActor, render
from specactor.config import SessionLogConfig
from specactor.testing import MemoryClient, everything, open_memory_server
from specactor.testing.memory import MemoryConnection
from tests.conftest import check_frames, fixture_config


@asynccontextmanager
async def logged_server(tmp_path: Path, **log: Any) -> AsyncIterator[MemoryClient]:
    config = fixture_config(tmp_path, session_log=SessionLogConfig(dir=str(tmp_path / "logs"), **log))
    async with open_memory_server(config, everything.register) as client:
        yield client
        check_frames(client)


async def settle(client: MemoryClient) -> None:
    """Every response recorded (the dispatcher is idle) and written (the logger flushed)."""
    with trio.fail_after(10):
        await client.app.dispatcher.wait_idle()
        await client.app.session_log.mailbox.call(Flush(), 10)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def log_files(logs: Path, session: str) -> tuple[Path, Path]:
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    return logs / f"{day}.jsonl", logs / f"session-{session}.jsonl"


async def test_every_request_and_response_is_a_jsonl_line_in_the_daily_and_the_session_file(
        tmp_path: Path) -> None:
    async with logged_server(tmp_path) as client:
        with trio.fail_after(10):
            await client.initialize()
            await client.request("tools/call", {"name": "echo", "arguments": {"text": "hello"}}, ident="e-1")
            await client.request("ping", ident=7)
            await client.request("no/such/method", ident=8)
        await settle(client)
        session = client.conn.session.id
    daily, per_session = log_files(tmp_path / "logs", session)
    assert daily.read_bytes() == per_session.read_bytes()
    entries = lines(per_session)
    for entry in entries:
        assert list(entry)[:3] == ["timestamp", "type", "session"]
        assert entry["session"] == session and entry["jsonrpc"] == "2.0"
        stamp = dt.datetime.strptime(entry["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
        assert abs(stamp - dt.datetime.now(dt.UTC).replace(tzinfo=None)) < dt.timedelta(minutes=5)
    kinds = [(e["type"], e.get("method"), e.get("id")) for e in entries]
    # A response is recorded just after it is sent, so it may land after the client's next
    # request; each request still precedes its own response.
    assert sorted(kinds, key=repr) == sorted([
        ("request", "initialize", 1), ("response", None, 1), ("notification", "notifications/initialized", None),
        ("request", "tools/call", "e-1"), ("response", None, "e-1"), ("request", "ping", 7),
        ("response", None, 7), ("request", "no/such/method", 8), ("response", None, 8)], key=repr)
    for ident in (1, "e-1", 7, 8):
        assert kinds.index(("response", None, ident)) > [k[2] for k in kinds].index(ident)
    by = {(e["type"], e.get("id")): e for e in entries}
    assert by["request", "e-1"]["params"] == {"name": "echo", "arguments": {"text": "hello"}}
    assert by["response", "e-1"]["result"]["structuredContent"] == {"success": True, "data": {"text": "hello"}}
    assert by["response", 8]["error"]["code"] == -32601
    assert by["response", 1]["result"]["serverInfo"]["name"] == "specactor"


async def test_each_session_gets_its_own_file_and_the_daily_file_gets_both(tmp_path: Path) -> None:
    async with logged_server(tmp_path) as first:
        send, recv = trio.open_memory_channel[bytes](64)
        second = MemoryClient(first.app, MemoryConnection(send), recv)
        with trio.fail_after(10):
            await first.initialize()
            await second.initialize()
            await second.request("ping")
        await settle(first)
        ids = first.conn.session.id, second.conn.session.id
    daily, one = log_files(tmp_path / "logs", ids[0])
    _, two = log_files(tmp_path / "logs", ids[1])
    assert {e["session"] for e in lines(one)} == {ids[0]} and len(lines(one)) == 3
    assert {e["session"] for e in lines(two)} == {ids[1]} and len(lines(two)) == 5
    assert len(lines(daily)) == 8


async def test_parse_errors_are_logged_as_responses_and_every_line_still_parses(tmp_path: Path) -> None:
    async with logged_server(tmp_path) as client:
        with trio.fail_after(10):
            await client.initialize()
            await client.send_raw(b'{"jsonrpc": "2.0", "id": 3, "method": "ping"')  # truncated JSON
            parse_error = await client.reply_for(None)
            assert parse_error["error"]["code"] == -32700
            await client.send_raw(b'  { "jsonrpc" : "2.0" , "id" : 4 , "method" : "ping" }  ')
            await client.reply_for(4)
        await settle(client)
        entries = lines(log_files(tmp_path / "logs", client.conn.session.id)[1])
    parse_errors = [e for e in entries if e.get("error", {}).get("code") == -32700]
    assert len(parse_errors) == 1 and parse_errors[0]["type"] == "response" and "id" not in parse_errors[0]
    assert [e["type"] for e in entries if e.get("id") == 4] == ["request", "response"]


async def test_with_the_log_switched_off_nothing_is_written(tmp_path: Path) -> None:
    async with logged_server(tmp_path, enabled=False) as client:
        assert client.app.session_log.enabled is False
        with trio.fail_after(10):
            await client.initialize()
            await client.request("tools/call", {"name": "echo", "arguments": {"text": "quiet"}})
        await settle(client)
    assert not (tmp_path / "logs").exists()
    assert not (tmp_path / ".specactor" / "logs").exists()


async def test_an_oversized_frame_is_logged_as_its_size_only(tmp_path: Path) -> None:
    big = "x" * 5000
    async with logged_server(tmp_path, max_entry_bytes=1024) as client:
        with trio.fail_after(10):
            await client.initialize()
            await client.request("tools/call", {"name": "echo", "arguments": {"text": big}}, ident="big")
            await client.request("ping", ident="small")
        await settle(client)
        raw = log_files(tmp_path / "logs", client.conn.session.id)[1].read_bytes()
    assert big.encode() not in raw
    entries = [json.loads(line) for line in raw.splitlines()]
    truncated = [e for e in entries if e.get("truncated")]
    assert sorted(e["type"] for e in truncated) == ["request", "response"]
    for entry in truncated:
        assert entry["truncated"] is True and entry["bytes"] > 5000
        assert set(entry) == {"timestamp", "type", "session", "truncated", "bytes"}
    small = [e for e in entries if e.get("id") == "small"]
    assert [e["type"] for e in small] == ["request", "response"] and small[0]["method"] == "ping"


def test_render_splices_the_frame_members_after_the_header() -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, dt.UTC).timestamp()
    line = render(Entry("s1", "request", b' {"jsonrpc":"2.0","id":1,"method":"ping"}\n', at), 1024)
    assert line == (b'{"timestamp":"2026-01-02T03:04:05.678Z","type":"request","session":"s1",'
                    b'"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    batch = render(Entry("s1", "request", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', at), 1024)
    assert json.loads(batch)["batch"] == [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
    empty = render(Entry("s1", "response", b"{}", at), 1024)
    assert json.loads(empty) == {"timestamp": "2026-01-02T03:04:05.678Z", "type": "response", "session": "s1"}
    cut = render(Entry("s1", "response", b'{"jsonrpc":"2.0","id":1,"result":{}}', at), 10)
    assert json.loads(cut)["bytes"] == 36


async def test_entries_are_written_to_the_file_of_their_own_day(tmp_path: Path) -> None:
    actor = SessionLogActor(tmp_path / "logs")
    day1 = dt.datetime(2026, 3, 1, 23, 59, 59, tzinfo=dt.UTC).timestamp()
    day2 = day1 + 2
    frame = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        with trio.fail_after(10):
            await actor.record("s", "notification", frame, day1)
            await actor.record("s", "notification", frame, day2)
            await actor.mailbox.call(Flush(), 10)
        nursery.cancel_scope.cancel()
    assert len(lines(tmp_path / "logs" / "2026-03-01.jsonl")) == 1
    assert len(lines(tmp_path / "logs" / "2026-03-02.jsonl")) == 1
    assert len(lines(tmp_path / "logs" / "session-s.jsonl")) == 2


async def test_a_frame_cannot_forge_the_header_members_of_its_log_line(tmp_path: Path) -> None:
    async with logged_server(tmp_path) as client:
        with trio.fail_after(10):
            await client.initialize()
            await client.send({"jsonrpc": "2.0", "id": 9, "method": "ping", "session": "forged",
                               "type": "response", "timestamp": "1970-01-01T00:00:00.000Z"})
            await client.reply_for(9)
        await settle(client)
        session = client.conn.session.id
    [entry] = [e for e in lines(log_files(tmp_path / "logs", session)[1]) if e.get("method") == "ping"]
    assert entry["id"] == 9 and entry["method"] == "ping"
    assert (entry["session"], entry["type"]) == (session, "request")
    assert entry["timestamp"] != "1970-01-01T00:00:00.000Z"
