"""The session logger: every request and response as a JSONL line, in the daily and session files;
list replies as digests, redacted tools without their arguments and results; the folder ignored
by git and pruned by age and size."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from specactor.actors.session_log import MAX_OPEN, Abridger, Entry, Flush, SessionLogActor, plan_prune, render
from specactor.app import build, register_deferred
from specactor.config import Config, ConfigError, SessionLogConfig, load
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


# ---------------------------------------------------------------------- what a line may hold


async def test_a_list_reply_is_logged_as_a_digest_of_its_count_size_and_hash(tmp_path: Path) -> None:
    async with logged_server(tmp_path) as client:
        with trio.fail_after(10):
            await client.initialize()
            reply = await client.request("tools/list", ident="list")
        await settle(client)
        daily, per_session = log_files(tmp_path / "logs", client.conn.session.id)
        raw = per_session.read_bytes()
    [line] = [e for e in lines(per_session) if e["type"] == "response" and e["id"] == "list"]
    assert "result" not in line
    digest = line["digest"]
    assert digest["method"] == "tools/list" and digest["count"] == len(reply["result"]["tools"]) > 10
    assert digest["sha256"] == hashlib.sha256(msgspec.json.encode(reply["result"])).hexdigest()
    assert digest["bytes"] > 10_000 and len(raw) < 4_000  # the listing itself is in neither file
    assert b'"inputSchema"' not in daily.read_bytes()


async def test_a_redacted_tools_arguments_and_result_stay_out_of_the_log_but_its_name_and_outcome_do_not(
        tmp_path: Path) -> None:
    actor = SessionLogActor(tmp_path / "logs", redacts=lambda tool: tool == "memory_add")
    call = (b'{"jsonrpc":"2.0","id":5,"method":"tools/call",'
            b'"params":{"name":"memory_add","arguments":{"content":"pin 0000"}}}')
    result = b'{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"pin 0000"}],"isError":false}}'
    other = b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"visible"}}}'
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        with trio.fail_after(10):
            for kind, raw in (("request", call), ("request", other), ("response", result)):
                await actor.record("s", kind, raw, time.time())
            await actor.mailbox.call(Flush(), 10)
        nursery.cancel_scope.cancel()
    text = (tmp_path / "logs" / "session-s.jsonl").read_bytes()
    assert b"pin 0000" not in text and b"visible" in text
    request, _, response = lines(tmp_path / "logs" / "session-s.jsonl")
    assert request["params"] == {"name": "memory_add", "arguments": {"redacted": True}}
    assert response["result"] == {"redacted": True, "isError": False} and response["id"] == 5


async def test_the_memory_toolset_is_redacted_by_default_and_logged_when_redaction_is_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECACTOR_MEMORY_DB", str(tmp_path / "memory.db"))
    monkeypatch.setenv("SPECACTOR_KNOWLEDGE_REPO", str(tmp_path / "knowledge"))
    for redact in (True, False):
        logs = tmp_path / f"logs-{redact}"
        base = load({"root": str(tmp_path)}, os.environ)
        config = msgspec.structs.replace(base, session_log=SessionLogConfig(dir=str(logs), redact_memory=redact))
        async with open_memory_server(config) as client:
            with trio.fail_after(30):
                await client.initialize()
                await client.request("tools/call", {"name": "memory_add", "arguments": {
                    "content": f"the launch code is {redact}"}}, timeout=30)
                found = await client.request("tools/call", {"name": "memory_search", "arguments": {
                    "query": "launch code"}}, timeout=30)
                assert f"the launch code is {redact}" in json.dumps(found)
            await settle(client)
        written = b"".join(path.read_bytes() for path in logs.iterdir())
        assert (b"the launch code" in written) is not redact
        # two calls, a request and a reply each, in the daily file and the session's
        assert written.count(b'"redacted":true') == (8 if redact else 0)


# ---------------------------------------------------------------------- the folder


async def start_and_flush(actor: SessionLogActor, *entries: Entry) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        with trio.fail_after(10):
            for entry in entries:
                await actor.record(entry.session, entry.kind, entry.raw, entry.at)
            await actor.mailbox.call(Flush(), 10)
        nursery.cancel_scope.cancel()


PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


async def test_the_specactor_gitignore_lists_the_logs_whoever_writes_it_first(tmp_path: Path) -> None:
    fresh, after_wal = tmp_path / "fresh", tmp_path / "after-wal"
    (after_wal / ".specactor").mkdir(parents=True)
    (after_wal / ".specactor" / ".gitignore").write_text("wal\nwal.new\nworkspace.lock\n")  # as wal.py writes it
    for root in (fresh, after_wal):
        for _ in range(2):  # a second start adds nothing
            await start_and_flush(SessionLogActor(root / ".specactor" / "logs"))
        assert (root / ".specactor" / ".gitignore").read_text().splitlines() == [
            "wal", "wal.new", "workspace.lock", "logs/"]


async def test_a_session_that_only_reads_still_leaves_the_logs_ignored(tmp_path: Path) -> None:
    config = fixture_config(tmp_path)  # the default folder, <root>/.specactor/logs
    async with open_memory_server(config, everything.register) as client:
        with trio.fail_after(10):
            await client.initialize()
            await client.request("tools/list")
        await settle(client)
    assert "logs/" in (tmp_path / ".specactor" / ".gitignore").read_text().splitlines()
    if shutil.which("git"):
        with trio.fail_after(30):
            await trio.run_process(["git", "init", "-q", str(tmp_path)])
            done = await trio.run_process(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                                          capture_stdout=True)
        assert b".specactor/logs" not in done.stdout  # only the .gitignore itself shows


def aged(folder: Path, name: str, days: float, size: int = 10) -> Path:
    path = folder / name
    path.write_bytes(b"x" * size)
    stamp = time.time() - days * 86400
    os.utime(path, (stamp, stamp))
    return path


async def test_files_past_the_age_limit_are_pruned_at_start_and_nothing_else_is(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    old = [aged(logs, "2026-01-01.jsonl", 9), aged(logs, "session-a.jsonl", 8)]
    young = [aged(logs, "2026-01-08.jsonl", 2), aged(logs, "session-b.jsonl", 6.5)]
    foreign = aged(logs, "notes.txt", 30)  # not a log file: never ours to delete
    await start_and_flush(SessionLogActor(logs, max_age_days=7))
    assert not any(path.exists() for path in old)
    assert all(path.exists() for path in (*young, foreign))


async def test_past_the_size_limit_the_oldest_files_go_first_until_the_rest_fit(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    files = [aged(logs, f"session-{n}.jsonl", days=5 - n, size=100) for n in range(5)]  # session-0 oldest
    await start_and_flush(SessionLogActor(logs, max_total_bytes=350))
    assert [path.exists() for path in files] == [False, False, True, True, True]


async def test_beginning_a_new_file_prunes_the_folder_again(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    actor = SessionLogActor(logs, max_age_days=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        with trio.fail_after(10):
            await actor.record("first", "request", PING, time.time())
            await actor.mailbox.call(Flush(), 10)
            stale = aged(logs, "session-stale.jsonl", 3)  # written by another server meanwhile
            await actor.record("first", "request", PING, time.time())  # no new file: no pruning
            await actor.mailbox.call(Flush(), 10)
            assert stale.exists()
            await actor.record("second", "request", PING, time.time())  # a new session's file
            await actor.mailbox.call(Flush(), 10)
        nursery.cancel_scope.cancel()
    assert not stale.exists()
    assert (logs / "session-first.jsonl").exists() and (logs / "session-second.jsonl").exists()


def test_pruning_plans_by_age_then_size_and_spares_the_open_files() -> None:
    now = 1_000_000.0
    files = [("a", now - 50, 10), ("b", now - 40, 10), ("c", now - 30, 10), ("d", now - 20, 10)]
    assert plan_prune(files, now, max_age=45, max_bytes=0, keep=set()) == ["a"]
    assert plan_prune(files, now, max_age=0, max_bytes=25, keep=set()) == ["a", "b"]
    assert plan_prune(files, now, max_age=0, max_bytes=25, keep={"a"}) == ["b", "c"]
    assert plan_prune(files, now, max_age=0, max_bytes=0, keep=set()) == []


async def test_many_sessions_hold_a_bounded_number_of_files_open_and_lose_no_line(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    actor = SessionLogActor(logs)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        with trio.fail_after(10):
            for _ in range(2):
                for n in range(MAX_OPEN + 8):
                    await actor.record(f"s{n}", "request", PING, time.time())
                    if n % 5 == 0:
                        await actor.mailbox.call(Flush(), 10)
                        assert len(actor._files) <= MAX_OPEN
            await actor.mailbox.call(Flush(), 10)
        nursery.cancel_scope.cancel()
    assert all(len(lines(logs / f"session-s{n}.jsonl")) == 2 for n in range(MAX_OPEN + 8))


async def test_a_folder_that_cannot_be_created_is_a_configuration_error_at_start(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            with pytest.raises(ConfigError) as info:
                await nursery.start(SessionLogActor(tmp_path / "file" / "logs").run)
    assert info.value.setting == "session_log.dir" and "Not a directory" in info.value.message


async def test_before_the_toolsets_are_registered_every_tool_is_redacted_and_after_only_memorys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECACTOR_MEMORY_DB", str(tmp_path / "memory.db"))
    built = build(load({"root": str(tmp_path)}, os.environ), everything.register, defer=True)
    redacts = built.session_log.abridger.redacts
    assert redacts is not None
    assert redacts("memory_add") and redacts("echo")  # not known yet: hidden rather than leaked
    with trio.fail_after(30):
        await register_deferred(built)
    assert redacts("memory_add") and redacts("knowledge_show") and not redacts("echo")
    off = config_with(tmp_path, redact_memory=False)
    assert build(off).session_log.abridger.redacts is None


def config_with(root: Path, **log: Any) -> Config:
    return msgspec.structs.replace(load({"root": str(root)}, os.environ), session_log=SessionLogConfig(**log))


def test_a_batch_request_has_its_redacted_calls_arguments_replaced() -> None:
    abridger = Abridger(lambda tool: tool == "memory_add")
    batch = msgspec.json.encode([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_add", "arguments": {"c": "x"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "y"}}}])
    shaped = msgspec.json.decode(abridger.shape(Entry("s", "request", batch, 0.0)).raw)
    assert [item["params"]["arguments"] for item in shaped] == [{"redacted": True}, {"text": "y"}]


def test_a_batch_reply_has_its_redacted_calls_results_replaced_and_the_rest_kept() -> None:
    abridger = Abridger(lambda tool: tool == "memory_add")
    batch = msgspec.json.encode([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_add", "arguments": {"c": "x"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "y"}}}])
    abridger.shape(Entry("s", "request", batch, 0.0))
    replies = msgspec.json.encode([
        {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "a secret memory"}]}},
        {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "y"}]}}])
    shaped = abridger.shape(Entry("s", "response", replies, 0.0)).raw
    assert b"a secret memory" not in shaped
    assert [item["result"] for item in msgspec.json.decode(shaped)] == [
        {"redacted": True, "isError": False}, {"content": [{"type": "text", "text": "y"}]}]
