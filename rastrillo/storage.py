"""Storage: SQLAlchemy Core over SQLite by default, the same code on PostgreSQL.

SQLite is tuned for a web app serving concurrent requests: WAL (readers never
block the writer), foreign keys on, a busy timeout, and write transactions
that start with ``BEGIN IMMEDIATE`` behind a process-wide lock, so two writers
queue instead of failing with "database is locked" half-way through. PostgreSQL
locks rows itself, so its write transactions take no process lock and overlap.

The framework keeps its own tables on :data:`METADATA` (each concern defines
its tables there); :meth:`Database.open` creates them and then applies the
app's ``migrations/NNNN_name.sql`` files, once each, in order.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import sqlparse
from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    DateTime,
    Dialect,
    Engine,
    Float,
    MetaData,
    Numeric,
    Row,
    String,
    Table,
    TypeDecorator,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError
from sqlalchemy.types import TypeEngine

from .clock import SYSTEM_CLOCK, Clock, as_instant
from .errors import ConfigError, RastrilloError


class Instant(TypeDecorator[datetime]):
    """The one column type for an instant in the framework's tables.

    Written from an aware ``datetime`` (a naive one is refused), kept in UTC,
    read back as an aware UTC ``datetime`` on SQLite and PostgreSQL alike.
    PostgreSQL keeps a ``timestamptz``. SQLite keeps fixed-width UTC text
    (``2030-01-01 00:00:00.000000``, SQLAlchemy's own form), which sorts in time
    order, so instants compare in SQL; it is parsed by ``datetime.fromisoformat``,
    as a session is looked up on every request.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(26))
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        instant = as_instant(value, "an Instant column was given")
        if dialect.name == "sqlite":
            return instant.replace(tzinfo=None).isoformat(" ", "microseconds")
        return instant

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return datetime.fromisoformat(value).replace(tzinfo=UTC)
        return value.astimezone(UTC)


METADATA = MetaData()
"""The framework's own tables; every concern (sessions, approvals, audit,
sidecar) defines its tables on this and :meth:`Database.open` creates them."""

migrations_table = Table(
    "rastrillo_migrations",
    METADATA,
    Column("name", String(255), primary_key=True),
    Column("applied_at", Instant, nullable=False),
)

_MIGRATION_NAME = re.compile(r"(\d{4})_[A-Za-z0-9_\-]+\.sql")
_BUSY_TIMEOUT_MS = 10_000
_SQLITE_POOL_SIZE = 48
"""SQLite connections kept open: one for each of Starlette's worker threads (anyio's
default limit, 40) and the framework's own (audit writer, sidecar, start-up), so load
reuses connections instead of opening (and setting up) new ones."""


class DatabaseUnavailable(RastrilloError):
    """The database cannot serve this process now; the message says why."""


def database_url(db: str, base: Path | None = None) -> str:
    """A SQLAlchemy URL as given, else a SQLite file path (relative to ``base`` if given).

    The one place that decides whether a database setting is a path or a URL.
    """
    if "://" in db:
        return db
    return f"sqlite:///{(base / db).resolve() if base is not None else db}"


class WriteGate(Protocol):
    def before_write(self) -> None: ...

    def committed(self) -> None: ...


_SQLITE_UNAVAILABLE = frozenset({5, 6, 10, 13, 14})
"""BUSY, LOCKED (a lock wait ran out), IOERR, FULL, CANTOPEN (the file is unreachable)."""
_POSTGRES_UNAVAILABLE_CLASSES = ("08", "53", "57")
"""Connection exception, insufficient resources, operator intervention (shutdown, cancel)."""
_POSTGRES_UNAVAILABLE = frozenset({"55P03", "40001", "40P01"})
"""Lock not available, serialization failure, deadlock: retrying may well succeed."""


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot serve now (unreachable, a lock wait ran
    out, out of room) rather than that the code or the data is wrong: a 503, not a 500."""
    if isinstance(exc, DatabaseUnavailable | SQLAlchemyTimeoutError):  # or no pooled connection
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    if not isinstance(exc, OperationalError):
        return False
    code = getattr(exc.orig, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _SQLITE_UNAVAILABLE
    state = getattr(exc.orig, "sqlstate", None)
    if state is None:  # no answer from the server at all: refused, reset, closed
        return True
    return state.startswith(_POSTGRES_UNAVAILABLE_CLASSES) or state in _POSTGRES_UNAVAILABLE


class Database:
    """One database for an app: an engine plus the framework's conventions.

    ``read()`` yields a connection for queries; ``write()`` yields one inside a
    write transaction that commits on success and rolls back on error.
    ``clock`` is the time everything working on this database goes by.
    """

    def __init__(self, url: str, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.url = database_url(url)
        self.clock = clock
        parsed = make_url(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        # SQLite allows one writer per file: queue this process's writers here.
        self._write_lock: AbstractContextManager[object] = (
            threading.Lock() if self.is_sqlite else nullcontext()
        )
        self.gate: WriteGate | None = None
        """Asked before each write transaction and told after each commit (the server's
        drain, which refuses new writes while it stops)."""
        self._file: Path | None = None
        self._file_identity: tuple[int, int] | None = None
        if self.is_sqlite:
            if parsed.database and parsed.database != ":memory:":
                self._file = Path(parsed.database).resolve()
                self._file.parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = create_engine(
                self.url,
                connect_args={"check_same_thread": False, "timeout": 10},
                pool_size=_SQLITE_POOL_SIZE,
            )
            event.listen(self.engine, "connect", _sqlite_on_connect)
            event.listen(self.engine, "do_connect", self._before_connect)
            event.listen(self.engine, "connect", self._remember_file)
            event.listen(self.engine, "begin", _sqlite_on_begin)
        else:
            self.engine = create_engine(self.url, pool_pre_ping=True)
            event.listen(self.engine, "connect", _postgres_on_connect)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reads; any transaction it opens is rolled back."""
        with self.engine.connect() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: commits on success, rolls back on error (serialised on SQLite)."""
        self._check_file()
        with self._write_lock:
            if self.gate is not None:
                self.gate.before_write()
            with self.engine.connect() as conn:
                conn = conn.execution_options(rastrillo_write=True)
                with conn.begin():
                    yield conn
            if self.gate is not None:
                self.gate.committed()

    def check(self) -> None:
        """Raise `DatabaseUnavailable` when the database cannot serve this process.

        That is: no answer to a query, or (SQLite) the file this process opened
        was deleted or replaced since. For a readiness check; the sidecar asks
        before every pass.
        """
        self._check_file()
        try:
            with self.read() as conn:
                conn.exec_driver_sql("SELECT 1")
        except SQLAlchemyError as exc:
            raise DatabaseUnavailable(f"the database does not answer: {exc}") from exc

    def _check_file(self) -> None:
        """SQLite: the file is still the one first opened. Were it deleted, open
        connections would go on writing into a file nobody else sees, and a new
        connection would start an empty database beside it: both are refused."""
        if self._file is None or self._file_identity is None:
            return
        try:
            found = os.stat(self._file)
        except FileNotFoundError:
            raise DatabaseUnavailable(
                f"the database file {self._file} was deleted while in use; "
                "restore it and restart the process"
            ) from None
        if (found.st_dev, found.st_ino) != self._file_identity:
            raise DatabaseUnavailable(
                f"the database file {self._file} was replaced while in use; "
                "restart the process to use the new file"
            )

    def _before_connect(self, *_args: Any) -> None:
        self._check_file()

    def _remember_file(self, _dbapi_connection: Any, _record: Any) -> None:
        if self._file is not None and self._file_identity is None:
            found = os.stat(self._file)
            self._file_identity = (found.st_dev, found.st_ino)

    def query(self, sql: str, /, **params: Any) -> Sequence[Row[Any]]:
        """Run one read query and return all its rows."""
        with self.read() as conn:
            return conn.execute(text(sql), params).all()

    def query_one(self, sql: str, /, **params: Any) -> Row[Any] | None:
        """Run one read query and return its first row, or None."""
        with self.read() as conn:
            return conn.execute(text(sql), params).first()

    def execute(self, sql: str, /, **params: Any) -> int:
        """Run one write statement in its own transaction; returns rows affected."""
        with self.write() as conn:
            return conn.execute(text(sql), params).rowcount

    def open(self, migrations_dir: Path | None = None) -> None:
        """Create the framework's tables, then apply the app's pending migrations.

        When nothing is missing, this only reads: a process starts even while
        another holds the write lock for long. Otherwise both happen in write
        transactions, so a web process and a sidecar opening a new database
        at the same moment do not race.
        """
        files = migration_files(migrations_dir) if migrations_dir is not None else []
        if self._is_current(files):
            return
        with self.write() as conn:
            METADATA.create_all(conn)
        if migrations_dir is not None:
            self.migrate(migrations_dir)

    def _is_current(self, files: list[Path]) -> bool:
        """Every framework table exists and every migration file is applied.

        A framework table made by an earlier version, in a shape this one cannot
        use, is a `ConfigError` naming it: refused at start, never a failure later.
        """
        with self.read() as conn:
            inspector = inspect(conn)
            tables = set(inspector.get_table_names())
            for name in sorted(METADATA.tables.keys() & tables):
                _check_shape(METADATA.tables[name], inspector.get_columns(name), self.url)
            if not METADATA.tables.keys() <= tables:
                return False
            done = set(conn.execute(select(migrations_table.c.name)).scalars())
        return all(path.name in done for path in files)

    def migrate(self, migrations_dir: Path) -> list[str]:
        """Apply every ``NNNN_name.sql`` not applied before, in order; return their names."""
        files = migration_files(migrations_dir)
        applied: list[str] = []
        with self.write() as conn:
            done = set(conn.execute(select(migrations_table.c.name)).scalars())
            for path in files:
                if path.name in done:
                    continue
                for statement in split_sql(path.read_text(encoding="utf-8")):
                    conn.exec_driver_sql(statement)
                conn.execute(
                    migrations_table.insert().values(name=path.name, applied_at=self.clock.now())
                )
                applied.append(path.name)
        return applied

    def dispose(self) -> None:
        self.engine.dispose()


def _check_shape(table: Table, found: list[Any], url: str) -> None:
    columns = {column["name"]: column["type"] for column in found}
    for column in table.columns:
        kind = columns.get(column.name)
        stale = kind is None or (
            isinstance(column.type, Instant) and isinstance(kind, Float | Numeric)
        )
        if stale:
            raise ConfigError(
                f"the database {make_url(url).render_as_string(hide_password=True)} was made "
                f"by an earlier Rastrillo: its table {table.name} has no usable column "
                f"{column.name}; move the database aside (a demo's can be deleted) and start again"
            )


def migration_files(migrations_dir: Path) -> list[Path]:
    """The ``NNNN_name.sql`` files of a folder in order; a `ConfigError` for a misnamed one."""
    if not migrations_dir.is_dir():
        return []
    files = sorted(p for p in migrations_dir.iterdir() if p.suffix == ".sql")
    bad = [p.name for p in files if not _MIGRATION_NAME.fullmatch(p.name)]
    if bad:
        raise ConfigError(
            f"migration files must be named NNNN_name.sql: {', '.join(bad)} in {migrations_dir}"
        )
    return files


def split_sql(script: str) -> list[str]:
    """Split a migration into its statements, as the database's own parser would.

    A `;` inside a comment, a string literal, a dollar-quoted body or a
    trigger's ``BEGIN … END`` does not end a statement. A piece holding only
    comments is dropped.
    """
    return [str(s).strip() for s in sqlparse.parse(script) if _has_code(s)]


def _has_code(statement: sqlparse.sql.Statement) -> bool:
    return any(
        not token.is_whitespace
        and token.ttype not in sqlparse.tokens.Comment
        and not (token.ttype is sqlparse.tokens.Punctuation and token.value == ";")
        for token in statement.flatten()
    )


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from the driver so "begin" below decides the mode.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _postgres_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Instants come back in UTC whatever the server's zone, so every one that
    # was stored, up to 9999-12-31 in UTC, can be read back.
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'UTC'")
    dbapi_connection.commit()


def _sqlite_on_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get("rastrillo_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


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
    insert = sqlite.insert if conn.dialect.name == "sqlite" else postgresql.insert
    statement = insert(table).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=list(key),
        set_={name: statement.excluded[name] for name in values if name not in key},
        where=where,
    )
    written = statement.returning(*(table.c[name] for name in key))
    return conn.execute(written).first() is not None


def rows_as_dicts(rows: Sequence[Row[Any]]) -> list[dict[str, Any]]:
    """Rows as plain dicts, ready for a template or ``ctx.json``."""
    return [dict(r._mapping) for r in rows]
