"""The session logger: every request and response as a JSONL line, in a daily file and a
per-session file (the AirsSpec seed's layout), under `<workspace>/.specactor/logs/`.

Lines are spliced from the raw frames (`{"timestamp":…,"type":…,"session":…,` + the frame's
own members), so most frames are never decoded. Two kinds are (`Abridger`): a list's reply
(`tools/list` …) is logged as a digest (count, size, sha256), and the arguments and results of
redacted tools (the memory toolset's, by default) as `{"redacted":true}`. Writes are batched
and done on a worker thread; the request path only casts. A folder that cannot be written is a
`ConfigError` at start. Old files are pruned, oldest first, past an age or a total size: at
start and whenever a new file is begun. `.specactor/.gitignore` lists the folder.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import msgspec
import trio
from msgspec.structs import replace as _replace

from specactor.actors.mailbox import Mailbox
from specactor.config import ConfigError
from specactor.fs.files import ignore_in_git
from specactor.logsetup import get_logger

log = get_logger("specactor.session_log")

BATCH = 512  # lines written per worker-thread hop at most
MAX_OPEN = 32  # files held open; a session's file is reopened (appending) when it is needed again
LOG_FILE = re.compile(r"(\d{4}-\d{2}-\d{2}|session-[^/]+)\.jsonl")  # the only names pruning deletes
# What `.specactor/.gitignore` lists: the write-ahead log's files (as wal.py writes them when it
# is first) and this folder. Whoever writes first, the file ends up naming all of them.
WAL_IGNORED = ("wal", "wal.new", "workspace.lock")
LISTS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
         "resources/templates/list": "resourceTemplates"}


class Entry(msgspec.Struct, frozen=True):
    session: str
    kind: str  # request | response | notification
    raw: bytes
    at: float  # unix seconds


class Flush(msgspec.Struct, frozen=True):
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


class _Params(msgspec.Struct):
    name: Any = None


class _Head(msgspec.Struct):
    """The members of a request the abridger reads (the rest is skipped, not built)."""

    id: Any = None
    method: Any = None
    params: _Params | None = None


class _Id(msgspec.Struct):
    id: Any = None


class Abridger:
    """What a line may hold. It remembers the requests whose replies it must shorten, by session
    and id (a request is always recorded before its reply). Call it from one thread at a time.

    Args:
        redacts: whether a tool's arguments and results stay out of the log; None: no tool's do.
    """

    WAITING = 4096  # replies awaited at most; a request never answered (cancelled) ages out

    def __init__(self, redacts: Callable[[str], bool] | None) -> None:
        self.redacts = redacts
        self._waiting: dict[tuple[str, int | str], str] = {}  # -> a list method, or "redact"

    def shape(self, entry: Entry) -> Entry:
        raw = entry.raw
        if entry.kind == "request":
            if b'/list"' not in raw and (self.redacts is None or b'"tools/call"' not in raw):
                return entry  # most requests: not decoded at all
            if raw.lstrip()[:1] == b"[":  # a 2025-03-26 batch
                frames = _decode(raw)
                if isinstance(frames, list):
                    return _replace(entry, raw=msgspec.json.encode([self._request(entry.session, f) for f in frames]))
                return entry
            try:
                head = msgspec.json.decode(raw, type=_Head)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return entry
            if self._wants(entry.session, head):
                return _replace(entry, raw=msgspec.json.encode(_without_arguments(_decode(raw))))
        elif entry.kind == "response" and self._waiting:
            if raw.lstrip()[:1] == b"[":  # a batch's replies: each shortened as a lone reply would be
                frames = _decode(raw)
                if not isinstance(frames, list):
                    return entry
                out = [self._one_reply(entry.session, f) for f in frames]
                return _replace(entry, raw=msgspec.json.encode(out))
            try:
                ident = msgspec.json.decode(raw, type=_Id).id
            except (msgspec.DecodeError, msgspec.ValidationError):
                return entry
            what = self._waiting.pop((entry.session, ident), None) if isinstance(ident, int | str) else None
            if what is not None:
                return _replace(entry, raw=self._reply(raw, what))
        return entry

    def _wants(self, session: str, head: _Head) -> bool:
        """Note a request whose reply is shortened; True when its own arguments must go."""
        if not isinstance(head.id, int | str):
            return False
        if head.method in LISTS:
            self._await(session, head.id, head.method)
        elif (head.method == "tools/call" and self.redacts is not None and head.params is not None
              and isinstance(head.params.name, str) and self.redacts(head.params.name)):
            self._await(session, head.id, "redact")
            return True
        return False

    def _request(self, session: str, frame: Any) -> Any:
        """A batch's item, noted and redacted as a lone request would be."""
        try:
            head = msgspec.convert(frame, _Head)
        except msgspec.ValidationError:
            return frame
        return _without_arguments(frame) if self._wants(session, head) else frame

    def _await(self, session: str, ident: int | str, what: str) -> None:
        if len(self._waiting) >= self.WAITING:
            del self._waiting[next(iter(self._waiting))]
        self._waiting[session, ident] = what

    def _one_reply(self, session: str, frame: Any) -> Any:
        ident = frame.get("id") if isinstance(frame, dict) else None
        what = self._waiting.pop((session, ident), None) if isinstance(ident, int | str) else None
        return frame if what is None else msgspec.json.decode(self._reply(msgspec.json.encode(frame), what))

    @staticmethod
    def _reply(raw: bytes, what: str) -> bytes:
        frame = _decode(raw)
        if not isinstance(frame, dict) or not isinstance(frame.get("result"), dict):
            return raw  # an error reply: codes and messages, logged as they are
        result = frame.pop("result")
        if what == "redact":
            frame["result"] = {"redacted": True, "isError": bool(result.get("isError", False))}
            return msgspec.json.encode(frame)
        items = result.get(LISTS[what])
        digest: dict[str, Any] = {"method": what, "count": len(items) if isinstance(items, list) else 0,
                                  "bytes": len(raw), "sha256": hashlib.sha256(msgspec.json.encode(result)).hexdigest()}
        if "nextCursor" in result:
            digest["nextCursor"] = result["nextCursor"]
        frame["digest"] = digest
        return msgspec.json.encode(frame)


def _without_arguments(frame: Any) -> Any:
    params = frame.get("params") if isinstance(frame, dict) else None
    if not isinstance(params, dict) or "arguments" not in params:
        return frame
    return {**frame, "params": {**params, "arguments": {"redacted": True}}}


def _decode(raw: bytes) -> Any:
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None


def plan_prune(files: list[tuple[str, float, int]], now: float, max_age: float, max_bytes: int,
               keep: set[str]) -> list[str]:
    """The files to delete, oldest first: those last written more than `max_age` seconds ago,
    then the oldest until the rest fit in `max_bytes` (0: no limit). Never one in `keep`."""
    total = sum(size for _, _, size in files)
    doomed: list[str] = []
    for name, mtime, size in sorted(files, key=lambda f: f[1]):
        if name in keep:
            continue
        if not ((max_age and mtime < now - max_age) or (max_bytes and total > max_bytes)):
            break  # every later file is newer, and the total only shrinks
        doomed.append(name)
        total -= size
    return doomed


class SessionLogActor:
    """Args:
        directory: where the files go; None switches the logger off.
        max_entry_bytes: larger frames are logged as a size only.
        max_age_days, max_total_bytes: the retention (0: no limit of that kind).
        redacts: tools whose arguments and results are logged as `{"redacted":true}`.
    """

    def __init__(self, directory: Path | None, *, max_entry_bytes: int = 256 * 1024, max_age_days: float = 7.0,
                 max_total_bytes: int = 50 * 1024 * 1024, redacts: Callable[[str], bool] | None = None) -> None:
        self.directory = directory
        self.max_entry_bytes = max_entry_bytes
        self.max_age = max_age_days * 86400
        self.max_total_bytes = max_total_bytes
        self.abridger = Abridger(redacts)
        # Two entries per request; 2048 holds a 1,000-request burst before casts wait, which is
        # backpressure we prefer to dropping a log line.
        self.mailbox: Mailbox[Entry | Flush] = Mailbox("session-log", 2048)
        self._files: dict[str, IO[bytes]] = {}  # least recently written first
        self._day = ""
        self._begun = False  # a new file was begun since the last prune

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    async def record(self, session: str, kind: str, raw: bytes, at: float) -> None:
        if self.directory is not None:
            await self.mailbox.cast(Entry(session, kind, raw, at))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Raises:
            ConfigError: the folder cannot be created or written (`session_log.dir`).
        """
        if self.directory is not None:
            await trio.to_thread.run_sync(self._open_folder)
        task_status.started()
        try:
            if self.directory is not None:
                await trio.to_thread.run_sync(self._prune)  # after started: it holds up no start-up
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

    def _open_folder(self) -> None:
        folder = self.directory
        assert folder is not None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            effective = os.access in os.supports_effective_ids
            if not os.access(folder, os.W_OK | os.X_OK, effective_ids=effective):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        except OSError as err:
            reason = "a file is in the way" if isinstance(err, FileExistsError) else err.strerror
            raise ConfigError(f"cannot write session logs to {folder} ({reason}); choose another folder with "
                              "--session-log-dir or SPECACTOR_SESSION_LOG_DIR, or turn the log off with "
                              "--no-session-log", setting="session_log.dir") from None
        if folder.parent.name == ".specactor":
            failed = ignore_in_git(folder.parent, (*WAL_IGNORED, f"{folder.name}/"))
            if failed is not None:
                log.warning("could not write .gitignore for the session logs", path=str(folder.parent),
                            error=str(failed))

    def _prune(self) -> None:
        """Delete the files past the age or size limit, oldest first (another server sharing the
        folder may be pruning too: a file already gone is no error)."""
        folder = self.directory
        assert folder is not None
        self._begun = False
        if not self.max_age and not self.max_total_bytes:
            return
        files: list[tuple[str, float, int]] = []
        try:
            with os.scandir(folder) as listing:
                for item in listing:
                    if LOG_FILE.fullmatch(item.name) and item.is_file(follow_symlinks=False):
                        stat = item.stat(follow_symlinks=False)
                        files.append((item.name, stat.st_mtime, stat.st_size))
        except OSError as err:
            log.warning("could not list the session logs to prune them", folder=str(folder), error=str(err))
            return
        removed = 0
        for name in plan_prune(files, time.time(), self.max_age, self.max_total_bytes, set(self._files)):
            try:
                os.unlink(folder / name)
                removed += 1
            except FileNotFoundError:
                pass
            except OSError as err:
                log.warning("could not prune a session log", file=name, error=str(err))
                break
        if removed:
            log.info("session logs pruned", files=removed, kept=len(files) - removed)

    def _file(self, name: str) -> IO[bytes]:
        handle = self._files.pop(name, None)
        if handle is None:
            assert self.directory is not None
            path = self.directory / name
            self._begun = self._begun or not path.exists()
            handle = open(path, "ab")
            if len(self._files) >= MAX_OPEN:
                self._files.pop(next(iter(self._files))).close()
        self._files[name] = handle  # now the most recently written
        return handle

    def _write(self, entries: list[Entry]) -> None:
        by_file: dict[str, list[bytes]] = {}
        for entry in entries:
            line = render(self.abridger.shape(entry), self.max_entry_bytes)
            day = dt.datetime.fromtimestamp(entry.at, dt.UTC).strftime("%Y-%m-%d")
            if day != self._day:
                old = self._files.pop(f"{self._day}.jsonl", None)
                if old is not None:
                    old.close()
                self._day = day
            by_file.setdefault(f"{day}.jsonl", []).append(line)
            by_file.setdefault(f"session-{entry.session}.jsonl", []).append(line)
        for name, lines in by_file.items():
            handle = self._file(name)
            handle.write(b"".join(lines))
            handle.flush()
        if self._begun:
            self._prune()

    def _close(self) -> None:
        for handle in self._files.values():
            try:
                handle.flush()
                os.fsync(handle.fileno())
                handle.close()
            except OSError as err:  # pragma: no cover - disk gone at shutdown
                log.warning("could not close a session log", error=str(err))
        self._files.clear()
