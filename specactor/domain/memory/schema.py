"""The memory database's schema, as numbered migrations (`PRAGMA user_version` records the last applied).

A memory's rowid is `scope id << 32 | sequence`, so every scope (a layer plus its identifiers)
owns one contiguous rowid range, and FTS5 can search one scope with a rowid range instead of
scoring every match in the store. The FTS index is contentless: the text lives in `memories`,
and a row leaves the index when it is deleted or its knowledge pointer is orphaned.
"""

from __future__ import annotations

from typing import Final

SCOPE_SHIFT: Final = 32

MIGRATIONS: Final[tuple[tuple[int, str], ...]] = (
    (1, """
CREATE TABLE scopes (
    id INTEGER PRIMARY KEY,
    layer TEXT NOT NULL,
    key TEXT NOT NULL,
    next_seq INTEGER NOT NULL DEFAULT 1,
    UNIQUE (layer, key)
);
CREATE TABLE memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    layer TEXT NOT NULL,
    content TEXT NOT NULL,
    tags TEXT NOT NULL,
    metadata TEXT NOT NULL,
    identifiers TEXT NOT NULL,
    knowledge_id TEXT UNIQUE,
    orphaned INTEGER NOT NULL DEFAULT 0,
    embedding BLOB,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE memory_tags (
    tag TEXT NOT NULL,
    memory INTEGER NOT NULL,
    PRIMARY KEY (tag, memory)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE memory_fts USING fts5(
    content, content='', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO counters VALUES ('fts_rows', 0);
CREATE TABLE sync_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL DEFAULT 0,
    last_commit TEXT,
    last_sync_at TEXT,
    stats TEXT NOT NULL DEFAULT '{}',
    last_result TEXT,
    failures TEXT NOT NULL DEFAULT '[]'
);
INSERT INTO sync_state (id) VALUES (1);
CREATE TABLE knowledge_items (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    entry TEXT NOT NULL
);
"""),
    # Every change to the rows a search reads moves `generation` on, in the change's own transaction:
    # a search run as two read transactions (`memory_db.lexical_pass`, then `finish` once the query's
    # vector is back) knows whether the second saw the first's data, and redoes the search if not.
    (2, """
INSERT INTO counters VALUES ('generation', 0);
CREATE TRIGGER memories_inserted AFTER INSERT ON memories BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'generation';
END;
CREATE TRIGGER memories_updated AFTER UPDATE ON memories BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'generation';
END;
CREATE TRIGGER memories_deleted AFTER DELETE ON memories BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'generation';
END;
CREATE TRIGGER memory_tags_inserted AFTER INSERT ON memory_tags BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'generation';
END;
CREATE TRIGGER memory_tags_deleted AFTER DELETE ON memory_tags BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'generation';
END;
"""),
)

LATEST: Final = MIGRATIONS[-1][0]


def pending(current: int) -> list[tuple[int, str]]:
    """The migrations a database at `user_version = current` still needs, in order.

    Raises:
        ValueError: the database is newer than this code (a downgrade is refused, not guessed at).
    """
    if current > LATEST:
        raise ValueError(f"the memory database is at schema version {current}, newer than this specactor "
                         f"(version {LATEST}); upgrade specactor")
    return [(version, sql) for version, sql in MIGRATIONS if version > current]
