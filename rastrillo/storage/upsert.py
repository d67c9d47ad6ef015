"""The framework's one upsert, one statement on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Table
from sqlalchemy.dialects import sqlite

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql


def upsert(
    conn: Connection,
    table: Table,
    values: Mapping[str, Any],
    *,
    key: Sequence[str],
    where: ColumnElement[bool] | None = None,
) -> bool:
    """Insert a row, or update the row with the same ``key`` (and only if ``where`` holds).

    The framework's one upsert: ``INSERT … ON CONFLICT DO UPDATE`` in one
    statement, on SQLite and PostgreSQL alike, so no reader ever sees the row
    missing and two writers never both insert. True when a row was written.
    """
    insert: Callable[[Table], sqlite.Insert | postgresql.Insert]
    if conn.dialect.name == "sqlite":
        insert = sqlite.insert
    else:  # imported here: PostgreSQL's dialect is a tenth of a second of a SQLite app's start
        from sqlalchemy.dialects import postgresql

        insert = postgresql.insert
    statement = insert(table).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=list(key),
        set_={name: statement.excluded[name] for name in values if name not in key},
        where=where,
    )
    written = statement.returning(*(table.c[name] for name in key))
    return conn.execute(written).first() is not None
