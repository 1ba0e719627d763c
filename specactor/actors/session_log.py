"""The session logger: every request and response as a JSONL line, in a daily file and a
per-session file (the AirsSpec seed's layout), under `<workspace>/.specactor/logs/`.

Lines are spliced from the raw frames (`{"timestamp":…,"type":…,"session":…,` + the frame's
own members), so nothing is decoded twice. Writes are batched and done on a worker thread;
the request path only casts.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import msgspec
import trio

from specactor.actors.mailbox import Mailbox
from specactor.logsetup import get_logger

log = get_logger("specactor.session_log")

BATCH = 512  # lines written per worker-thread hop at most


@dataclass(frozen=True)
class Entry:
    session: str
    kind: str  # request | response | notification
    raw: bytes
    at: float  # unix seconds


@dataclass(frozen=True)
class Flush:
    pass


def render(entry: Entry, max_bytes: int) -> bytes:
    stamp = dt.datetime.fromtimestamp(entry.at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    head = f'{{"timestamp":"{stamp}","type":"{entry.kind}","session":"{entry.session}"'.encode()
    raw = entry.raw.strip()
    if len(raw) > max_bytes:
        return head + b',"truncated":true,"bytes":' + str(len(raw)).encode() + b"}\n"
    if raw[:1] == b"[":
        return head + b',"batch":' + raw + b"}\n"
    if b'"timestamp"' in raw or b'"type"' in raw or b'"session"' in raw:
        raw = _without_reserved(raw)
    body = raw[1:].lstrip()
    return head + (b"," + body if body != b"}" else b"}") + b"\n"


_RESERVED = ("timestamp", "type", "session")


def _without_reserved(raw: bytes) -> bytes:
    """The frame without top-level members that would clash with the log line's own (a client
    could otherwise forge them); the line keeps ours."""
    try:
        frame = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return b"{}"
    if not isinstance(frame, dict) or not any(key in frame for key in _RESERVED):
        return raw
    return msgspec.json.encode({k: v for k, v in frame.items() if k not in _RESERVED})


class SessionLogActor:
    """Args:
        directory: where the files go; None switches the logger off.
        max_entry_bytes: larger frames are logged as a size only.
    """

    def __init__(self, directory: Path | None, *, max_entry_bytes: int = 256 * 1024) -> None:
        self.directory = directory
        self.max_entry_bytes = max_entry_bytes
        # Two entries per request; 2048 holds a 1,000-request burst before casts wait, which is
        # backpressure we prefer to dropping a log line.
        self.mailbox: Mailbox[Entry | Flush] = Mailbox("session-log", 2048)
        self._files: dict[str, IO[bytes]] = {}
        self._day = ""

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    async def record(self, session: str, kind: str, raw: bytes, at: float) -> None:
        if self.directory is not None:
            await self.mailbox.cast(Entry(session, kind, raw, at))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self.directory is not None:
            await trio.to_thread.run_sync(lambda: self.directory.mkdir(parents=True, exist_ok=True))  # type: ignore[union-attr]
        task_status.started()
        try:
            while True:
                letters = [await self.mailbox.receive()]
                while len(letters) < BATCH:
                    try:
                        letters.append(self.mailbox.receive_nowait())
                    except trio.WouldBlock:
                        break
                entries = [le.body for le in letters if isinstance(le.body, Entry)]
                try:
                    if entries and self.directory is not None:
                        await trio.to_thread.run_sync(self._write, entries)
                finally:
                    for le in letters:
                        with le:
                            le.reply(None)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._close)

    def _file(self, name: str, mode: str) -> IO[bytes]:
        handle = self._files.get(name)
        if handle is None:
            assert self.directory is not None
            handle = self._files[name] = open(self.directory / name, mode)
        return handle

    def _write(self, entries: list[Entry]) -> None:
        by_file: dict[str, list[bytes]] = {}
        for entry in entries:
            line = render(entry, self.max_entry_bytes)
            day = dt.datetime.fromtimestamp(entry.at, dt.UTC).strftime("%Y-%m-%d")
            if day != self._day:
                old = self._files.pop(f"{self._day}.jsonl", None)
                if old is not None:
                    old.close()
                self._day = day
            by_file.setdefault(f"{day}.jsonl", []).append(line)
            by_file.setdefault(f"session-{entry.session}.jsonl", []).append(line)
        for name, lines in by_file.items():
            handle = self._file(name, "ab")
            handle.write(b"".join(lines))
            handle.flush()

    def _close(self) -> None:
        for handle in self._files.values():
            try:
                handle.flush()
                os.fsync(handle.fileno())
                handle.close()
            except OSError as err:  # pragma: no cover - disk gone at shutdown
                log.warning("could not close a session log", error=str(err))
        self._files.clear()
