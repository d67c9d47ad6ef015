"""Bringing a database up to date: the framework's tables, then the app's migrations.

The framework keeps its own tables on :data:`METADATA` (each concern defines
its tables there); :meth:`Database.open` creates them, adds to a table an
earlier version made the indexes and the columns (each with a server default,
which the rows already there take) added since, and then applies the app's
``migrations/NNNN_name.sql`` files, once each, in order. A migration whose SQL
differs between databases is written once per dialect instead:
``NNNN_name.sqlite.sql`` and ``NNNN_name.postgresql.sql``, and the one for the
database in use runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Dialect,
    Float,
    Index,
    MetaData,
    Numeric,
    Sequence,
    String,
    Table,
    inspect,
    select,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.schema import CreateColumn, CreateIndex, CreateTable
from sqlalchemy.types import SchemaType, TypeEngine

from rastrillo.clock import Clock
from rastrillo.errors import ConfigError
from rastrillo.storage.errors import MigrationError, is_unavailable
from rastrillo.storage.instant import Instant
from rastrillo.storage.url import shown_url

if TYPE_CHECKING:
    from sqlparse.sql import Statement


METADATA = MetaData()
"""The framework's own tables; every concern (sessions, approvals, audit,
sidecar) defines its tables on this and :meth:`Database.open` creates them."""

WHEN_ADDED = "rastrillo_when_added"
"""A key of a framework column's ``info``: a function :meth:`Database.open` calls with the
connection just after it added the column to a table an earlier version made, in the same
transaction, for rows already there whose value is not the column's server default."""

migrations_table = Table(
    "rastrillo_migrations",
    METADATA,
    Column("name", String(255), primary_key=True),
    Column("applied_at", Instant, nullable=False),
)

_CREATE: dict[tuple[Table | Index, str, str, object], str] = {}
"""The CREATE statement of each framework table and index, by database dialect, driver and
server version: compiled once a process, run again for each new database."""

_MIGRATION_NAME = re.compile(r"(?P<name>\d{4}_[A-Za-z0-9_\-]+)(?:\.(?P<dialect>[a-z]+))?\.sql")
DIALECTS = ("mssql", "mysql", "oracle", "postgresql", "sqlite")
"""SQLAlchemy's dialect names: what may stand between a migration's name and ``.sql``."""


def _columns_to_add(table: Table, found: list[Any], url: str) -> list[Column[Any]]:
    """The columns of ``table`` that the table as ``found`` lacks and that can be added:
    each has a server default, which every row already there takes. A column missing
    that has none, or one of a type this version cannot read, is a `ConfigError`."""
    columns = {column["name"]: column["type"] for column in found}
    to_add = []
    for column in table.columns:
        kind = columns.get(column.name)
        if kind is None and column.server_default is not None:
            to_add.append(column)
            continue
        if kind is None or not _readable(column.type, kind):
            raise ConfigError(
                f"the database {shown_url(url)} was made by an earlier Rastrillo, or changed "
                f"since: its table {table.name} has no usable column {column.name}; move "
                "the database aside (a demo's can be deleted) and start again"
            )
    return to_add


def _readable(declared: TypeEngine[Any], found: TypeEngine[Any]) -> bool:
    """Whether a column of the type ``found`` holds what this version reads as ``declared``.

    Instants were once kept as numbers. A flag must be a boolean: any other type (an app's
    own column under the framework's name) reads as true whatever was meant, or refuses
    the boolean written."""
    if isinstance(declared, Instant):
        return not isinstance(found, Float | Numeric)
    if isinstance(declared, Boolean):
        return isinstance(found, Boolean)
    return True


def _refuse_views(inspector: Any, url: str) -> None:
    """A view under a framework table's name (the app kept the table under another name) is
    refused by name: the framework would write through it, or fail to add to it."""
    views = sorted(METADATA.tables.keys() & set(inspector.get_view_names()))
    if views:
        raise ConfigError(
            f"the database {shown_url(url)} is not one this version can use: its {views[0]} is a "
            "view, not the framework's table; rename or drop the view and start again"
        )


def migration_files(migrations_dir: Path, dialect: str) -> list[tuple[str, Path]]:
    """``(recorded name, file to run)`` for each migration in order, for ``dialect``.

    Raises ConfigError for a badly named file, an unknown dialect, a migration
    with both a plain and a per-dialect file, or one with no file for ``dialect``.
    """
    if not migrations_dir.is_dir():
        return []
    variants: dict[str, dict[str | None, Path]] = {}
    problems: list[str] = []
    for path in sorted(p for p in migrations_dir.iterdir() if p.suffix == ".sql"):
        found = _MIGRATION_NAME.fullmatch(path.name)
        if found is None:
            problems.append(f"{path.name}: migration files are named NNNN_name.sql")
        elif found["dialect"] is not None and found["dialect"] not in DIALECTS:
            problems.append(
                f"{path.name}: {found['dialect']!r} is not a dialect ({', '.join(DIALECTS)})"
            )
        else:
            variants.setdefault(f"{found['name']}.sql", {})[found["dialect"]] = path
    chosen: list[tuple[str, Path]] = []
    for name, files in sorted(variants.items()):
        if None in files and len(files) > 1:
            problems.append(f"{name}: both a plain file and per-dialect files; keep one kind")
        elif None in files or dialect in files:
            chosen.append((name, files.get(None) or files[dialect]))
        else:
            problems.append(f"{name}: no file for {dialect} (add {name[:-4]}.{dialect}.sql)")
    if problems:
        raise ConfigError(f"migrations in {migrations_dir}:\n  " + "\n  ".join(problems))
    return chosen


def split_sql(script: str) -> list[str]:
    """Split a migration into its statements, as the database's own parser would.

    A `;` inside a comment, a string literal, a dollar-quoted body or a
    trigger's ``BEGIN … END`` does not end a statement. A piece holding only
    comments is dropped. The statements are split as ``sqlparse.parse`` splits them, but
    not grouped into clauses, which nothing here reads: a third of the parse's time.
    sqlparse is imported here, when a migration is applied: a start on a database already
    migrated (a restart, a wake from zero) needs none of it.
    """
    import sqlparse

    statements = sqlparse.engine.FilterStack().run(script)
    return [str(s).strip() for s in statements if _has_code(s)]


def _has_code(statement: Statement) -> bool:
    from sqlparse.tokens import Comment, Punctuation

    return any(
        not token.is_whitespace
        and token.ttype not in Comment
        and not (token.ttype is Punctuation and token.value == ";")
        for token in statement.flatten()
    )


def is_current(conn: Connection, files: list[tuple[str, Path]], url: str) -> bool:
    """Every framework table exists with its columns and indexes, and every migration
    file is applied.

    A framework table made by an earlier version, in a shape this one cannot
    use, is a `ConfigError` naming it: refused at start, never a failure later.
    """
    inspector = inspect(conn)
    _refuse_views(inspector, url)
    found = sorted(METADATA.tables.keys() & set(inspector.get_table_names()))
    if not found:
        return False
    # All the tables' columns in one read of the catalog, then all their indexes: on
    # PostgreSQL a read per table took most of a start on a database already made.
    columns = inspector.get_multi_columns(filter_names=found)
    to_add = [_columns_to_add(METADATA.tables[name], columns[None, name], url) for name in found]
    if any(to_add) or len(found) < len(METADATA.tables):
        return False
    indexes = inspector.get_multi_indexes(filter_names=found)
    for table in METADATA.tables.values():
        made = {index["name"] for index in indexes[None, table.name]}
        if any(index.name not in made for index in table.indexes):
            return False
    done = set(conn.execute(select(migrations_table.c.name)).scalars())
    return all(name in done for name, _ in files)


def make_tables(conn: Connection, url: str) -> None:
    """The framework's tables made, and one an earlier version made given the columns
    and indexes added since, in the write transaction of ``conn``. The tables are listed
    once: a table made here has all its columns and indexes, so only those found are
    inspected."""
    inspector = inspect(conn)
    found = set(inspector.get_table_names())
    _create([table for table in METADATA.sorted_tables if table.name not in found], conn)
    for table in METADATA.sorted_tables:
        if table.name not in found:
            continue
        columns = inspector.get_columns(table.name)
        for column in _columns_to_add(table, columns, url):
            name = conn.dialect.identifier_preparer.format_table(table)
            ddl = CreateColumn(column).compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN {ddl}")
            when_added: Callable[[Connection], object] | None
            if when_added := column.info.get(WHEN_ADDED):
                when_added(conn)
        made = {index["name"] for index in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in made:
                index.create(conn)


def _create(tables: list[Table], conn: Connection) -> None:
    """``tables`` (in the order of their foreign keys) made with their indexes, as
    ``METADATA.create_all`` makes them, its DDL events fired alike, but each statement
    compiled once a process (`_CREATE`): compiled for each new database, they took half its start.

    A listener's changes to a statement are compiled in, so one must change it alike for every
    database of a dialect, as ``grants.LIVE_NAME``'s do. tests/test_storage.py holds the
    schema made here to what ``create_all`` makes, on SQLite and PostgreSQL. Tables with
    what ``create_all`` makes in statements of their own (a sequence, a comment, a type
    of its own such as an enum, a foreign key added after the tables) are made by
    ``create_all`` itself (:func:`replayable`)."""
    if not all(replayable(table) for table in tables):
        METADATA.create_all(conn, tables=tables, checkfirst=False)
        return
    METADATA.dispatch.before_create(METADATA, conn, tables=tables, checkfirst=False)
    for table in tables:
        table.dispatch.before_create(table, conn, checkfirst=False, _is_metadata_operation=True)
        conn.exec_driver_sql(_compiled(table, conn.dialect))
        for index in table.indexes:
            index.dispatch.before_create(index, conn)
            conn.exec_driver_sql(_compiled(index, conn.dialect))
            index.dispatch.after_create(index, conn)
        table.dispatch.after_create(table, conn, checkfirst=False, _is_metadata_operation=True)
    METADATA.dispatch.after_create(METADATA, conn, tables=tables, checkfirst=False)


def replayable(table: Table) -> bool:
    """Whether ``create_all`` makes ``table`` with its CREATE TABLE and CREATE INDEX alone,
    which :func:`_create` replays: no sequence, no comment, no column type that makes a
    type of its own (an enum; a boolean's CHECK, if any, is part of CREATE TABLE), no
    foreign key added by ALTER after the tables."""
    return not (
        table.comment is not None
        or any(
            column.comment is not None
            or isinstance(column.default, Sequence)
            or (isinstance(column.type, SchemaType) and not isinstance(column.type, Boolean))
            for column in table.columns
        )
        or any(key.use_alter for key in table.foreign_key_constraints)
    )


def _compiled(target: Table | Index, dialect: Dialect) -> str:
    key = (target, dialect.name, dialect.driver, dialect.server_version_info)
    found = _CREATE.get(key)
    if found is None:
        statement = CreateTable(target) if isinstance(target, Table) else CreateIndex(target)
        found = _CREATE.setdefault(key, str(statement.compile(dialect=dialect)))
    return found


def apply_migrations(conn: Connection, pending: list[tuple[str, Path]], clock: Clock) -> list[str]:
    """Apply, in the write transaction of ``conn``, each of ``pending`` (from
    `migration_files`) not applied before, in order; return their names.

    A migration is recorded under its plain name (``0001_init.sql``) whichever
    dialect's file ran, so one database never runs two versions of it.
    """
    applied: list[str] = []
    done = set(conn.execute(select(migrations_table.c.name)).scalars())
    for name, path in pending:
        if name in done:
            continue
        script = path.read_text(encoding="utf-8")
        for statement in split_sql(script):
            try:
                conn.exec_driver_sql(statement)
            except DBAPIError as exc:
                if is_unavailable(exc):
                    raise
                line = script[: script.find(statement)].count("\n") + 1
                raise MigrationError(path, line, exc.orig) from exc
        record = migrations_table.insert().values(name=name, applied_at=clock.now())
        conn.execute(record)
        applied.append(name)
    return applied
