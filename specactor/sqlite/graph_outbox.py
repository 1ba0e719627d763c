"""Graph sync's durable outbox and state map: SQLite statements the graph-sync actor runs on its
worker threads (`specactor.actors.graph_sync`). Nothing here touches the network or the event loop.

`outbox` holds what the graph must still be told, one row per object or relationship (a newer
projection of the same key replaces the row: ten edits of one file send one patch). `synced` is
the state map: each key's `canonical_id` in Emergent and the digest of what was sent, so only
real differences are queued. `dead` keeps what the server refused, with its error. A row leaves
the outbox only in the transaction that records its effect, and only if no newer projection
replaced it meanwhile (`seq`), so a crash at any point loses nothing and repeats at most a lookup.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from specactor.domain.graph.model import Edge, Graph, Node
from specactor.sqlite.wal_mode import use_wal

Kind = Literal["node", "edge"]
Op = Literal["put", "delete"]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
    # enqueued: when this key first waited (the oldest pending age); seq: the last projection's order
    "CREATE TABLE IF NOT EXISTS outbox (kind TEXT NOT NULL, key TEXT NOT NULL, op TEXT NOT NULL, "
    "unit TEXT NOT NULL, type TEXT NOT NULL, body BLOB, digest TEXT, enqueued REAL NOT NULL, "
    "seq INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT, sent INTEGER NOT NULL DEFAULT 0, "
    "PRIMARY KEY (kind, key))",
    "CREATE INDEX IF NOT EXISTS outbox_unit ON outbox (unit)",
    "CREATE INDEX IF NOT EXISTS outbox_seq ON outbox (kind, op, seq)",
    "CREATE TABLE IF NOT EXISTS synced (kind TEXT NOT NULL, key TEXT NOT NULL, unit TEXT NOT NULL, "
    "type TEXT NOT NULL, canonical_id TEXT NOT NULL, digest TEXT NOT NULL, body BLOB, "
    "deleted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (kind, key))",
    "CREATE INDEX IF NOT EXISTS synced_unit ON synced (unit)",
    "CREATE TABLE IF NOT EXISTS dead (kind TEXT NOT NULL, key TEXT NOT NULL, op TEXT NOT NULL, "
    "unit TEXT NOT NULL, type TEXT NOT NULL, body BLOB, digest TEXT, code TEXT NOT NULL, "
    "status INTEGER, message TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (kind, key))",
)


@dataclass(frozen=True)
class Pending:
    """One outbox row, as the drain reads it."""

    kind: Kind
    key: str
    op: Op
    unit: str
    type: str
    body: bytes | None
    digest: str | None
    seq: int
    attempts: int
    sent: bool = False  # a create for this key went out at least once: it may have landed

    def node(self) -> Node:
        assert self.body is not None
        return msgspec.json.decode(self.body, type=Node)

    def edge(self) -> Edge:
        assert self.body is not None
        return msgspec.json.decode(self.body, type=Edge)


@dataclass(frozen=True)
class Known:
    """One state-map row: what the graph holds for a key, as far as this workspace knows."""

    kind: Kind
    key: str
    unit: str
    type: str
    canonical_id: str
    digest: str
    body: bytes | None
    deleted: bool  # its removal is settled
    deleting: bool = False  # its removal went out and is not settled: the graph may hold it or not


@dataclass
class Queued:
    """What one enqueue did: keys queued to put or delete, and desired keys already in the graph."""

    puts: int = 0
    deletes: int = 0
    unchanged: int = 0

    def add(self, other: Queued) -> None:
        self.puts += other.puts
        self.deletes += other.deletes
        self.unchanged += other.unchanged


class Depth(msgspec.Struct, frozen=True):
    pending: int
    oldest: float | None  # unix seconds the oldest pending key first waited
    dead: int
    synced: int


def connect(path: Path) -> sqlite3.Connection:
    """The outbox database (created, with its folder), in WAL mode with `synchronous=FULL`: a row
    written is on disk before the write's reply goes out. Autocommit; transactions are explicit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    try:
        use_wal(conn)  # a second server may be creating the same outbox
        conn.execute("PRAGMA synchronous=FULL")
        with transaction(conn):
            for statement in SCHEMA:
                conn.execute(statement)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(outbox)")}
            if "sent" not in columns:  # an outbox written before the column existed
                conn.execute("ALTER TABLE outbox ADD COLUMN sent INTEGER NOT NULL DEFAULT 1")
    except BaseException:
        conn.close()
        raise
    return conn


class transaction:  # a statement, like `with open(...)`: lower case
    """`BEGIN IMMEDIATE` … `COMMIT`, or `ROLLBACK` on any error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        elif self.conn.in_transaction:
            self.conn.execute("ROLLBACK")


class _Seq:
    """The outbox's order counter, read once and written once per transaction (not per row)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT v FROM meta WHERE k = 'seq'").fetchone()
        self.conn, self.value = conn, int(row[0]) if row else 0

    def next(self) -> int:
        self.value += 1
        return self.value

    def save(self) -> None:
        self.conn.execute("INSERT INTO meta (k, v) VALUES ('seq', ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                          (str(self.value),))


def _items(graph: Graph) -> Iterator[tuple[Kind, str, str, bytes, str]]:
    for node in graph.nodes.values():
        yield "node", node.key, node.type, msgspec.json.encode(node), node.digest()
    for edge in graph.edges.values():
        yield "edge", edge.key, edge.type, msgspec.json.encode(edge), edge_digest(edge)


def edge_digest(edge: Edge) -> str:
    """A relationship carries no properties of ours: it is what it connects."""
    return edge.key


def enqueue_units(conn: sqlite3.Connection, graphs: dict[str, Graph], now: float | None = None) -> Queued:
    """Queue what makes the graph match each unit's projection (`graphs`: unit → its graph, empty
    for a unit that is gone), in one transaction. A key whose desired digest the state map already
    holds is not queued; a key the unit no longer projects is queued for deletion.
    """
    stamp = time.time() if now is None else now
    done = Queued()
    with transaction(conn):
        seq = _Seq(conn)
        for unit, graph in graphs.items():
            done.add(_enqueue_unit(conn, seq, unit, graph, stamp))
        seq.save()
    return done


def _enqueue_unit(conn: sqlite3.Connection, seq: _Seq, unit: str, graph: Graph, stamp: float) -> Queued:
    done = Queued()
    synced = {(k, key): (digest, deleted, type_) for k, key, digest, deleted, type_ in conn.execute(
        "SELECT kind, key, digest, deleted, type FROM synced WHERE unit = ?", (unit,))}
    pending = {(k, key): (op, digest, attempts, type_) for k, key, op, digest, attempts, type_ in conn.execute(
        "SELECT kind, key, op, digest, sent, type FROM outbox WHERE unit = ?", (unit,))}
    refused = {(k, key): (op, digest) for k, key, op, digest in conn.execute(
        "SELECT kind, key, op, digest FROM dead WHERE unit = ?", (unit,))}
    wanted: set[tuple[str, str]] = set()
    for kind, key, type_, body, digest in _items(graph):
        wanted.add((kind, key))
        queued = pending.get((kind, key))
        known = synced.get((kind, key))
        in_graph = known is not None and not known[1] and known[0] == digest
        if queued is not None and queued[0] == "put" and queued[1] == digest:
            continue  # already on its way
        if refused.get((kind, key)) == ("put", digest):
            continue  # refused as it is: a new version, or a forced sync, tries again
        if in_graph:
            if queued is not None:  # a queued change is undone: the graph already says this
                conn.execute("DELETE FROM outbox WHERE kind = ? AND key = ?", (kind, key))
            done.unchanged += 1
            continue
        _put_row(conn, seq, kind, key, "put", unit, type_, body, digest, stamp)
        conn.execute("DELETE FROM dead WHERE kind = ? AND key = ?", (kind, key))  # a new version gets a new try
        done.puts += 1
    gone = [(kind, key) for (kind, key), (_, deleted, _) in synced.items() if deleted != 1]
    gone += [(kind, key) for (kind, key), (op, _, _, _) in pending.items() if op == "put"]
    for kind, key in dict.fromkeys(gone):
        if (kind, key) in wanted:
            continue
        queued = pending.get((kind, key))
        if refused.get((kind, key), ("",))[0] == "delete" and queued is None:
            continue  # its removal was refused; a forced sync tries again
        if (kind, key) not in synced and queued is not None and not queued[2]:
            # never sent, so nothing in the graph to remove
            conn.execute("DELETE FROM outbox WHERE kind = ? AND key = ?", (kind, key))
            continue
        type_ = synced[(kind, key)][2] if (kind, key) in synced else queued[3] if queued else ""
        _put_row(conn, seq, kind, key, "delete", unit, type_, None, None, stamp)
        done.deletes += 1
    return done


def _put_row(conn: sqlite3.Connection, seq: _Seq, kind: str, key: str, op: str, unit: str, type_: str,
             body: bytes | None, digest: str | None, stamp: float) -> None:
    conn.execute(
        "INSERT INTO outbox (kind, key, op, unit, type, body, digest, enqueued, seq) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (kind, key) DO UPDATE SET op = excluded.op, unit = excluded.unit, type = excluded.type, "
        "body = excluded.body, digest = excluded.digest, seq = excluded.seq, attempts = 0, last_error = NULL",
        # `sent` is kept: an earlier version's create may have landed, and a lookup must find it
        (kind, key, op, unit, type_, body, digest, stamp, seq.next()))


def take(conn: sqlite3.Connection, kind: Kind, op: Op, limit: int, after_seq: int = 0) -> list[Pending]:
    """The oldest `limit` pending rows of one kind and operation, past `after_seq`."""
    rows = conn.execute("SELECT kind, key, op, unit, type, body, digest, seq, attempts, sent FROM outbox "
                        "WHERE kind = ? AND op = ? AND seq > ? ORDER BY seq LIMIT ?", (kind, op, after_seq, limit))
    return [Pending(kind=r[0], key=r[1], op=r[2], unit=r[3], type=r[4], body=r[5], digest=r[6], seq=r[7],
                    attempts=r[8], sent=bool(r[9])) for r in rows]


def mark_sent(conn: sqlite3.Connection, keys: Iterable[str]) -> None:
    """Record, before the request goes out, that creates of these object keys are being sent: from
    now on a lookup must precede another create of them (the reply may be lost)."""
    with transaction(conn):
        conn.executemany("UPDATE outbox SET sent = 1 WHERE kind = 'node' AND key = ?", [(k,) for k in keys])


def known(conn: sqlite3.Connection, kind: Kind, keys: Iterable[str]) -> dict[str, Known]:
    """State-map rows of `keys` (missing keys are absent)."""
    out: dict[str, Known] = {}
    keys = list(keys)
    for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
        chunk = keys[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(f"SELECT kind, key, unit, type, canonical_id, digest, body, deleted FROM synced "
                                f"WHERE kind = ? AND key IN ({marks})", (kind, *chunk)):
            out[row[1]] = Known(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7] == 1, row[7] == 2)
    return out


def mark_deleting(conn: sqlite3.Connection, kind: Kind, keys: Iterable[str]) -> None:
    """Record, before the requests go out, that these keys' removals are being sent: until one is
    settled the state map no longer vouches that the graph holds the key (`deleted = 2`), so a unit
    that wants it back sends it again (restore, then patch) even if the process dies meanwhile."""
    with transaction(conn):
        conn.executemany("UPDATE synced SET deleted = 2 WHERE kind = ? AND key = ? AND deleted = 0",
                         [(kind, key) for key in keys])


def is_pending(conn: sqlite3.Connection, kind: Kind, key: str) -> bool:
    return conn.execute("SELECT 1 FROM outbox WHERE kind = ? AND key = ?", (kind, key)).fetchone() is not None


@dataclass(frozen=True)
class Done:
    """A pending row's effect in the graph: record `canonical_id` (put), or that the key is gone."""

    item: Pending
    canonical_id: str | None
    deleted: bool = False


@dataclass(frozen=True)
class Failed:
    """A pending row that failed: `dead` moves it to the dead letters, else it waits for a retry."""

    item: Pending
    code: str
    message: str
    status: int | None = None
    dead: bool = False


def settle(conn: sqlite3.Connection, done: Iterable[Done] = (), failed: Iterable[Failed] = (),
           now: float | None = None) -> None:
    """Record effects and failures in one transaction. A row leaves the outbox only if it is still
    the projection that was sent (`seq`); a newer one stays queued, against the new state map."""
    stamp = time.time() if now is None else now
    with transaction(conn):
        seq = _Seq(conn)
        for d in done:
            it = d.item
            if it.op == "put" and d.canonical_id is not None and conn.execute(
                    "SELECT 1 FROM outbox WHERE kind = ? AND key = ?", (it.kind, it.key)).fetchone() is None:
                # The unit stopped projecting this key while its create was out (the row was dropped as
                # never sent): it is in the graph now, so its removal is queued.
                _put_row(conn, seq, it.kind, it.key, "delete", it.unit, it.type, None, None, stamp)
            if d.canonical_id is None:  # a delete of something the graph never had
                conn.execute("DELETE FROM synced WHERE kind = ? AND key = ?", (it.kind, it.key))
            else:
                conn.execute(
                    "INSERT INTO synced (kind, key, unit, type, canonical_id, digest, body, deleted) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, key) DO UPDATE SET unit = excluded.unit, "
                    "type = excluded.type, canonical_id = excluded.canonical_id, digest = excluded.digest, "
                    "body = excluded.body, deleted = excluded.deleted",
                    (it.kind, it.key, it.unit, it.type, d.canonical_id, it.digest or "", it.body, int(d.deleted)))
            conn.execute("DELETE FROM outbox WHERE kind = ? AND key = ? AND seq = ?", (it.kind, it.key, it.seq))
        for f in failed:
            it = f.item
            if f.dead:
                conn.execute("INSERT OR REPLACE INTO dead (kind, key, op, unit, type, body, digest, code, status, "
                             "message, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (it.kind, it.key, it.op, it.unit, it.type, it.body, it.digest, f.code, f.status,
                              f.message, stamp))
                conn.execute("DELETE FROM outbox WHERE kind = ? AND key = ? AND seq = ?", (it.kind, it.key, it.seq))
            else:
                conn.execute("UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE kind = ? AND key = ? "
                             "AND seq = ?", (f"{f.code}: {f.message}", it.kind, it.key, it.seq))
        seq.save()


def requeue_dead(conn: sqlite3.Connection, now: float | None = None) -> int:
    """Every dead letter back in the outbox for another try (a forced sync); returns how many."""
    stamp = time.time() if now is None else now
    with transaction(conn):
        rows = conn.execute("SELECT kind, key, op, unit, type, body, digest FROM dead").fetchall()
        seq = _Seq(conn)
        for kind, key, op, unit, type_, body, digest in rows:
            _put_row(conn, seq, kind, key, op, unit, type_, body, digest, stamp)
        seq.save()
        conn.execute("DELETE FROM dead")
    return len(rows)


def forget(conn: sqlite3.Connection, kind: Kind, keys: Iterable[str]) -> None:
    """Drop state-map rows (the graph no longer has them as recorded): the next enqueue sends them again."""
    with transaction(conn):
        conn.executemany("DELETE FROM synced WHERE kind = ? AND key = ?", [(kind, key) for key in keys])


def adopt(conn: sqlite3.Connection, rows: Iterable[Known]) -> None:
    """Record what a remote listing found (a key's canonical id and content) in the state map."""
    with transaction(conn):
        conn.executemany(
            "INSERT INTO synced (kind, key, unit, type, canonical_id, digest, body, deleted) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, key) DO UPDATE SET "
            "canonical_id = excluded.canonical_id, digest = excluded.digest, "
            "body = excluded.body, deleted = excluded.deleted, type = excluded.type",
            [(r.kind, r.key, r.unit, r.type, r.canonical_id, r.digest, r.body, int(r.deleted)) for r in rows])


def synced_keys(conn: sqlite3.Connection, kind: Kind) -> dict[str, Known]:
    """Every live state-map row of a kind."""
    return {row[1]: Known(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7] == 1, row[7] == 2)
            for row in conn.execute(
        "SELECT kind, key, unit, type, canonical_id, digest, body, deleted FROM synced WHERE kind = ? AND deleted = 0",
        (kind,))}


def wanted_keys(conn: sqlite3.Connection, keys: Iterable[str]) -> set[str]:
    """Which object `keys` the workspace still projects: live in the state map, or queued to be put."""
    out: set[str] = set()
    keys = list(keys)
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        marks = ",".join("?" * len(chunk))
        out.update(row[0] for row in conn.execute(
            f"SELECT key FROM synced WHERE kind = 'node' AND deleted = 0 AND key IN ({marks}) "
            f"AND key NOT IN (SELECT key FROM outbox WHERE kind = 'node' AND op = 'delete') "
            f"UNION SELECT key FROM outbox WHERE kind = 'node' AND op = 'put' AND key IN ({marks})", (*chunk, *chunk)))
    return out


def units(conn: sqlite3.Connection) -> set[str]:
    """Every unit the state map or the outbox knows (a unit gone from disk is still here until deleted)."""
    return {row[0] for row in conn.execute("SELECT unit FROM synced WHERE deleted = 0 UNION SELECT unit FROM outbox")}


def depth(conn: sqlite3.Connection) -> Depth:
    pending, oldest = conn.execute("SELECT count(*), min(enqueued) FROM outbox").fetchone()
    dead = conn.execute("SELECT count(*) FROM dead").fetchone()[0]
    synced = conn.execute("SELECT count(*) FROM synced WHERE deleted = 0").fetchone()[0]
    return Depth(pending=pending, oldest=oldest, dead=dead, synced=synced)


def dead_letters(conn: sqlite3.Connection, limit: int = 20) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT kind, key, op, type, code, status, message, at FROM dead ORDER BY at DESC LIMIT ?",
                        (limit,))
    return [{"kind": r[0], "key": r[1], "op": r[2], "type": r[3], "code": r[4], "status": r[5], "message": r[6],
             "at": r[7]} for r in rows]


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT v FROM meta WHERE k = ?", (key,)).fetchone()
    return str(row[0]) if row else None


def set_meta_now(conn: sqlite3.Connection, key: str, value: str) -> None:
    """`set_meta` in a transaction of its own."""
    with transaction(conn):
        set_meta(conn, key, value)


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT INTO meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v", (key, value))
