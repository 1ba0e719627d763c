"""The handshake-era session table every HTTP worker process reads: SQLite in WAL mode.

With `--workers N > 1` any worker may take any connection, so a session's protocol state
(negotiated version, client facts, log level, `initialized`), its resource subscriptions, its
end (DELETE or idle), which worker holds its GET stream, and the client's replies to requests a
worker on another connection is waiting for all live here. The parent creates the file (`create`)
in its private runtime folder; each worker opens one connection. Every call is one short indexed
statement on the event loop's thread: a point read costs a few microseconds in WAL mode (readers
never wait for the writer), less than a hop to a worker thread. A single process never opens it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from specactor.protocol.session import Era, Session
from specactor.sqlite.wal_mode import use_wal

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,          -- the Mcp-Session-Id
    version INTEGER NOT NULL,     -- bumped by every change of state or subscriptions
    state BLOB NOT NULL,          -- SessionState, msgpack
    ended INTEGER NOT NULL DEFAULT 0,
    last_seen REAL NOT NULL,      -- wall clock: workers compare it across processes
    stream_pid INTEGER            -- the worker holding the session's GET stream
);
CREATE TABLE IF NOT EXISTS subscriptions (
    session TEXT NOT NULL, uri TEXT NOT NULL, PRIMARY KEY (session, uri)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS replies (  -- client responses that reached a worker not waiting for them
    session TEXT NOT NULL, ident TEXT NOT NULL, frame BLOB NOT NULL, PRIMARY KEY (session, ident)
) WITHOUT ROWID;
"""
BUSY_MS = 2000  # writes are single statements of microseconds; a wait this long means a stuck peer


class SessionState(msgspec.Struct, array_like=True, frozen=True):
    """What a worker needs of a session it did not start (subscriptions are kept apart, as rows,
    so two workers adding different ones at once both keep theirs)."""

    session_id: str  # `Session.id`: the dispatcher's and session log's key, the same in every worker
    era: Era
    protocol_version: str | None
    client_info: dict[str, Any] | None
    client_capabilities: dict[str, Any]
    initialized: bool
    log_level: str

    @classmethod
    def of(cls, s: Session) -> SessionState:
        return cls(s.id, s.era, s.protocol_version, s.client_info, s.client_capabilities, s.initialized, s.log_level)

    def apply(self, s: Session) -> None:
        s.id, s.era, s.protocol_version = self.session_id, self.era, self.protocol_version
        s.client_info, s.client_capabilities = self.client_info, self.client_capabilities
        s.initialized, s.log_level = self.initialized, self.log_level


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(SessionState)


@dataclass(frozen=True)
class Head:
    """A session's row as a request needs it: whether it is over, and whether state changed."""

    version: int
    ended: bool


@dataclass(frozen=True)
class Stored:
    version: int
    state: SessionState
    subscriptions: frozenset[str]


def create(path: Path) -> None:
    """Make the table (the parent, before any worker starts)."""
    conn = _connect(path)
    try:
        use_wal(conn)
        conn.executescript(SCHEMA)
    finally:
        conn.close()


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    conn.execute("PRAGMA synchronous=OFF")  # runtime state of one server run: nothing to keep past a crash
    return conn


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process reuses the pid
        return True
    return True


class SharedSessions:
    """One worker's connection to the table.

    Args:
        path: the file `create` made.
        pid: this worker's pid (the GET stream holder it records).
    """

    def __init__(self, path: Path, pid: int | None = None) -> None:
        self.path = path
        self.pid = os.getpid() if pid is None else pid
        self.db = _connect(path)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ state

    def head(self, sid: str) -> Head | None:
        row = self.db.execute("SELECT version, ended FROM sessions WHERE id = ?", (sid,)).fetchone()
        return None if row is None else Head(row[0], bool(row[1]))

    def load(self, sid: str) -> Stored | None:
        """A live session's state and subscriptions; None when it never existed or has ended."""
        row = self.db.execute("SELECT version, state FROM sessions WHERE id = ? AND ended = 0", (sid,)).fetchone()
        if row is None:
            return None
        subs = frozenset(u for (u,) in self.db.execute("SELECT uri FROM subscriptions WHERE session = ?", (sid,)))
        return Stored(row[0], _dec.decode(row[1]), subs)

    def insert(self, sid: str, state: SessionState, subscriptions: Iterable[str] = ()) -> int:
        """A new session's row; its version (1)."""
        self.db.execute("INSERT INTO sessions (id, version, state, last_seen) VALUES (?, 1, ?, ?)",
                        (sid, _enc.encode(state), time.time()))
        self.db.executemany("INSERT OR IGNORE INTO subscriptions VALUES (?, ?)", [(sid, u) for u in subscriptions])
        return 1

    def update(self, sid: str, state: SessionState | None, added: Iterable[str] = (),
               removed: Iterable[str] = ()) -> int:
        """Store what changed (a new `state`, subscriptions added or removed); the new version."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            if state is not None:
                self.db.execute("UPDATE sessions SET state = ? WHERE id = ?", (_enc.encode(state), sid))
            self.db.executemany("INSERT OR IGNORE INTO subscriptions VALUES (?, ?)", [(sid, u) for u in added])
            self.db.executemany("DELETE FROM subscriptions WHERE session = ? AND uri = ?", [(sid, u) for u in removed])
            row = self.db.execute("UPDATE sessions SET version = version + 1, last_seen = ? WHERE id = ? "
                                  "RETURNING version", (time.time(), sid)).fetchone()
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return int(row[0]) if row is not None else 0

    def end(self, sid: str) -> None:
        self.db.execute("UPDATE sessions SET ended = 1, stream_pid = NULL WHERE id = ?", (sid,))

    def ended_among(self, sids: Iterable[str]) -> set[str]:
        ids = list(sids)
        if not ids:
            return set()
        marks = ",".join("?" * len(ids))
        return {sid for (sid,) in self.db.execute(f"SELECT id FROM sessions WHERE id IN ({marks}) AND ended = 1",
                                                   ids)}

    def live(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM sessions WHERE ended = 0").fetchone()[0])

    # ------------------------------------------------------------------ idleness

    def touch(self, sids: Iterable[str]) -> None:
        now = time.time()
        self.db.executemany("UPDATE sessions SET last_seen = ? WHERE id = ? AND ended = 0", [(now, s) for s in sids])

    def expire(self, idle: float) -> list[str]:
        """End every session no worker has seen for `idle` seconds (whoever started it may be gone),
        and forget those ended long ago; the ids ended now."""
        now = time.time()
        ended = [sid for (sid,) in self.db.execute(
            "UPDATE sessions SET ended = 1, stream_pid = NULL WHERE ended = 0 AND last_seen < ? RETURNING id",
            (now - idle,))]
        old = now - 2 * idle
        self.db.execute("DELETE FROM subscriptions WHERE session IN "
                        "(SELECT id FROM sessions WHERE ended = 1 AND last_seen < ?)", (old,))
        self.db.execute("DELETE FROM replies WHERE session IN "
                        "(SELECT id FROM sessions WHERE ended = 1 AND last_seen < ?)", (old,))
        self.db.execute("DELETE FROM sessions WHERE ended = 1 AND last_seen < ?", (old,))
        return ended

    # ------------------------------------------------------------------ GET streams

    def claim_stream(self, sid: str) -> bool:
        """Record this worker as the holder of `sid`'s GET stream; False when a live worker holds it."""
        row = self.db.execute("SELECT stream_pid FROM sessions WHERE id = ? AND ended = 0", (sid,)).fetchone()
        if row is None:
            return False
        holder = row[0]
        if holder is not None and holder != self.pid and alive(holder):
            return False
        taken = self.db.execute("UPDATE sessions SET stream_pid = ? WHERE id = ? AND stream_pid IS ?",
                                (self.pid, sid, holder)).rowcount
        return taken == 1

    def release_stream(self, sid: str) -> None:
        self.db.execute("UPDATE sessions SET stream_pid = NULL WHERE id = ? AND stream_pid = ?", (sid, self.pid))

    def forget_worker(self, pid: int) -> None:
        """A worker died: the GET streams it held are gone."""
        self.db.execute("UPDATE sessions SET stream_pid = NULL WHERE stream_pid = ?", (pid,))

    # ------------------------------------------------------------------ replies to server-to-client requests

    def post_reply(self, sid: str, ident: int | str, frame: bytes) -> None:
        self.db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?, ?)", (sid, _key(ident), frame))

    def take_replies(self, sid: str, idents: Iterable[int | str]) -> list[bytes]:
        """The stored replies to any of `idents` in `sid`, removed from the table."""
        keys = [_key(i) for i in idents]
        if not keys:
            return []
        marks = ",".join("?" * len(keys))
        return [bytes(frame) for (frame,) in self.db.execute(
            f"DELETE FROM replies WHERE session = ? AND ident IN ({marks}) RETURNING frame", [sid, *keys])]


def _key(ident: int | str) -> str:
    return f"i:{ident}" if isinstance(ident, int) else f"s:{ident}"
