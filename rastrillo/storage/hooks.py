"""What each connection gets as it is opened, handed out and returned: SQLite's pragmas
and transaction modes, PostgreSQL's time zone and read-only default, the idle ping."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, Dialect
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry

_BUSY_TIMEOUT_MS = 10_000
PING_AFTER_IDLE_SECONDS = 1.0
"""A PostgreSQL connection idle in the pool this long is checked before it is handed out."""
_IDLE_SINCE = "rastrillo.idle_since"


def sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from the driver so "begin" below decides the mode.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def postgres_on_connect(dialect: Dialect, dbapi_connection: Any) -> None:
    # Instants come back in UTC whatever the server's zone, so every one that
    # was stored, up to 9999-12-31 in UTC, can be read back. A statement outside
    # a transaction (Database.read's autocommit) is read-only; every transaction
    # psycopg begins says READ WRITE, so writes run in transactions only.
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'UTC'")
        cursor.execute("SET default_transaction_read_only = on")
    dbapi_connection.commit()
    dialect.set_readonly(dbapi_connection, False)  # type: ignore[attr-defined]


def checked_in(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info[_IDLE_SINCE] = time.monotonic()


def ping_if_idle(dialect: Dialect, dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    """Replace a pooled connection that sat idle long enough for the server to have
    dropped it (a restart, a proxy's idle timeout) before a request gets it.

    One that was in use a moment ago is not asked: under load that round trip would
    come with every request. Should the server have dropped it all the same, the
    request fails as while the server is down (503) and the pool replaces every
    connection it opened before the failure.
    """
    idle_since = record.info.get(_IDLE_SINCE)
    if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS:
        return
    try:
        dialect.do_ping(dbapi_connection)
    except Exception as exc:
        raise DisconnectionError("the pooled connection is gone") from exc


def sqlite_on_begin(conn: Connection) -> None:
    options = conn.get_execution_options()
    if options.get("rastrillo_one_statement", False):
        return
    conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get("rastrillo_write", False) else "BEGIN")
