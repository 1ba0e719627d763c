"""Switching a database to WAL safely while another process opens it (worker threads only)."""

from __future__ import annotations

import sqlite3

WAL_TRIES = 20  # each waits for the lock; two processes need two


def use_wal(conn: sqlite3.Connection) -> None:
    """`PRAGMA journal_mode=WAL`, waiting for another connection's switch instead of failing.

    Two connections switching a new database at once can each hold the shared lock and want the
    exclusive one; SQLite then fails one at once ("database is locked"), without the busy timeout,
    to break the deadlock. That one waits for the other's switch by taking the write lock and
    letting it go (which does wait, up to the busy timeout), and tries again: WAL is usually on by
    then.

    Raises:
        sqlite3.OperationalError: still refused after `WAL_TRIES` tries, or any other error.
    """
    for tries_left in reversed(range(WAL_TRIES)):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if err.sqlite_errorcode != sqlite3.SQLITE_BUSY or not tries_left:
                raise
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
