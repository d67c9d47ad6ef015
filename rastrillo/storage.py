"""Storage: SQLAlchemy Core over SQLite by default, the same code on PostgreSQL.

SQLite is tuned for a web app serving concurrent requests: WAL (readers never
block the writer), foreign keys on, a busy timeout, and write transactions
that start with ``BEGIN IMMEDIATE`` behind a process-wide lock, so two writers
queue instead of failing with "database is locked" half-way through. On
PostgreSQL writers do not queue: each statement takes the row locks it needs,
so processes and threads write concurrently, and code that reads before it
writes serialises itself with :func:`serialize`.

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

import functools
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import compress
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from sqlalchemy import (
    Boolean,
    ClauseElement,
    Column,
    ColumnElement,
    Connection,
    DateTime,
    Dialect,
    Engine,
    Executable,
    Float,
    Insert,
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
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.result import result_tuple
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    NoSuchModuleError,
    OperationalError,
    ResourceClosedError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.schema import CreateColumn
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import TypeEngine

from rastrillo.clock import SYSTEM_CLOCK, Clock, as_instant
from rastrillo.errors import ConfigError, Problem, RastrilloError

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql
    from sqlparse.sql import Statement


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
            # isoformat(" ", "microseconds") of the naive UTC time, at a third of its cost
            # (an audit row stores one per call).
            return "%04d-%02d-%02d %02d:%02d:%02d.%06d" % (  # noqa: UP031
                instant.year,
                instant.month,
                instant.day,
                instant.hour,
                instant.minute,
                instant.second,
                instant.microsecond,
            )
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

_MIGRATION_NAME = re.compile(r"(?P<name>\d{4}_[A-Za-z0-9_\-]+)(?:\.(?P<dialect>[a-z]+))?\.sql")
DIALECTS = ("mssql", "mysql", "oracle", "postgresql", "sqlite")
"""SQLAlchemy's dialect names: what may stand between a migration's name and ``.sql``."""
_ADVISORY_LOCK_KEY = 0x7261_7374  # "rast": serialises start-up across processes on PostgreSQL
_BUSY_TIMEOUT_MS = 10_000
_POOL_TIMEOUT_SECONDS = 10  # a request waits this long for a free connection, then fails
POOL_SIZE = 15
"""PostgreSQL connections a process opens at most, by default, and keeps open. Load comes
in waves: a pool that closed what it opened for one would start backends again (a fork,
authentication, settings) for the next."""
PING_AFTER_IDLE_SECONDS = 1.0
"""A PostgreSQL connection idle in the pool this long is checked before it is handed out."""
_IDLE_SINCE = "rastrillo.idle_since"
_SQLITE_POOL_SIZE = 48
"""SQLite connections kept open: one for each of Starlette's worker threads (anyio's
default limit, 40) and the framework's own (audit writer, sidecar, start-up), so load
reuses connections instead of opening (and setting up) new ones."""


class DatabaseUnavailable(RastrilloError):
    """The database cannot serve this process now; the message says why."""


class MigrationError(RastrilloError):
    """A statement of a migration file failed: the file, the statement's line and the
    database's words. The migrations of one start run in one transaction, so none of
    them was applied, and the next start runs them again."""

    def __init__(self, path: Path, line: int, reason: object) -> None:
        where = Problem(f"{path.parent.name}/{path.name}", line, str(reason).strip())
        super().__init__(f"{where}\nno migration was applied; fix the file and start again")


def database_url(db: str, base: Path | None = None) -> str:
    """A SQLAlchemy URL as given, else a SQLite file path (relative to ``base`` if given).

    The one place that decides whether a database setting is a path or a URL.
    """
    if "://" in db:
        return db
    return f"sqlite:///{(base / db).resolve() if base is not None else db}"


def supported_url(url: str) -> URL:
    """``url`` parsed, if it names a database the framework runs on: SQLite or PostgreSQL."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"cannot read the database URL: {exc}") from exc
    shown = _shown(parsed)
    backend = parsed.get_backend_name()
    if backend == "postgres":  # Heroku's and libpq's spelling, which SQLAlchemy refuses
        meant = _shown(parsed.set(drivername="postgresql+psycopg"))
        raise ConfigError(f"{shown}: SQLAlchemy reads no postgres:// URL; write {meant}")
    if backend not in ("sqlite", "postgresql"):
        raise ConfigError(f"{shown}: Rastrillo runs on SQLite and PostgreSQL only")
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise ConfigError(
            f"{shown}: each connection would open its own empty database in memory; "
            "give a SQLite file (app.db) or a PostgreSQL URL"
        )
    return parsed


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

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        pool_size: int = POOL_SIZE,
        max_overflow: int = 0,
    ) -> None:
        """``pool_size`` and ``max_overflow`` size the PostgreSQL pool of this process:
        at most their sum connections are open at once. SQLite opens what it needs."""
        self.url = database_url(url)
        self.clock = clock
        parsed = supported_url(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        # SQLite allows one writer per file: queue this process's writers here.
        self._write_lock: AbstractContextManager[object] = (
            threading.Lock() if self.is_sqlite else nullcontext()
        )
        self.gate: WriteGate | None = None
        """Asked before each write transaction and told after each commit (the server's
        drain, which refuses new writes while it stops)."""
        self._file: _SQLiteFile | None = None
        if self.is_sqlite:
            assert parsed.database  # supported_url refused a database in memory
            self._file = _SQLiteFile(Path(parsed.database).resolve())
            self.engine: Engine = create_engine(
                self.url,
                connect_args={"check_same_thread": False, "timeout": 10},
                pool_size=_SQLITE_POOL_SIZE,
            )
            event.listen(self.engine, "connect", _sqlite_on_connect)
            event.listen(self.engine, "begin", _sqlite_on_begin)
            if self._file is not None:
                # The file's listeners, not the database's: the dialect they are kept on
                # outlives this database (`Prepared` statements hold it), and must not keep
                # the database alive.
                event.listen(self.engine, "do_connect", self._file.before_connect)
                event.listen(self.engine, "connect", self._file.connected)
            # One statement reads one consistent snapshot by itself (WAL, autocommit):
            # it needs no BEGIN and ROLLBACK around it, which cost more than a short SELECT.
            self._one_statement: Engine = self.engine.execution_options(
                rastrillo_one_statement=True
            )
        else:
            try:
                self.engine = create_engine(
                    self.url,
                    pool_size=pool_size,
                    max_overflow=max_overflow,
                    pool_timeout=_POOL_TIMEOUT_SECONDS,
                )
            except (ImportError, NoSuchModuleError) as exc:
                raise ConfigError(
                    f"no driver for {_shown(parsed)} ({exc}): install psycopg and write the URL as "
                    "postgresql+psycopg://user:password@host/database"
                ) from exc
            dialect = self.engine.dialect
            event.listen(self.engine, "connect", lambda c, _r: _postgres_on_connect(dialect, c))
            event.listen(self.engine, "checkin", _checked_in)
            event.listen(self.engine, "checkout", lambda c, r, _p: _ping_if_idle(dialect, c, r))
            # Outside a transaction, as read() runs: one round trip, no BEGIN and ROLLBACK.
            self._one_statement = self.engine.execution_options(isolation_level="AUTOCOMMIT")

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reads, never for writes.

        On SQLite its statements share one transaction, rolled back at the end. On
        PostgreSQL each statement is its own read-only transaction (autocommit), so
        a one-query read is one round trip, with no BEGIN and ROLLBACK around it;
        a write there fails (SQLSTATE 25006) instead of being thrown away.
        """
        with self.engine.connect() as conn:
            yield conn if self.is_sqlite else conn.execution_options(isolation_level="AUTOCOMMIT")

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

    @contextmanager
    def driver_write(self) -> Iterator[DriverTransaction]:
        """A write transaction at the driver's level, for the few `Prepared` statements of
        a hot path: what `write` promises (serialised on SQLite, the gate asked and told,
        the file checked; commit on success, rollback on error, a driver's error raised as
        SQLAlchemy's), without SQLAlchemy's per-statement and per-transaction work, which
        costs several times what the driver takes."""
        self._check_file()
        dialect = self.engine.dialect
        with self._write_lock:
            if self.gate is not None:
                self.gate.before_write()
            raw = self._raw_connection()
            cursor = raw.cursor()
            try:
                if self.is_sqlite:
                    cursor.execute("BEGIN IMMEDIATE")
                yield DriverTransaction(cursor, dialect)
                raw.commit()
            except dialect.loaded_dbapi.Error as exc:
                _rollback(raw)
                raise self._driver_error(raw, cursor, exc, None, None) from exc
            except BaseException:
                _rollback(raw)
                raise
            finally:
                cursor.close()
                raw.close()
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
        if self._file is not None:
            self._file.check()

    def query(self, sql: str | Executable | Prepared, /, **params: Any) -> Sequence[Row[Any]]:
        """Run one read query (SQL text, a built statement or a `Prepared` one) and return
        all its rows."""
        return self._one_read(sql, params, first=False)

    def query_one(self, sql: str | Executable | Prepared, /, **params: Any) -> Row[Any] | None:
        """Run one read query (SQL text, a built statement or a `Prepared` one) and return its
        first row, or None. Like `query`, it sees every write committed before it, and on
        SQLite runs with no transaction around it: a single statement reads one snapshot
        anyway."""
        rows = self._one_read(sql, params, first=True)
        return rows[0] if rows else None

    def _one_read(
        self, sql: str | Executable | Prepared, params: Mapping[str, Any], *, first: bool
    ) -> Sequence[Row[Any]]:
        prepared = _prepared(sql) if isinstance(sql, str) else sql
        if self.is_sqlite and isinstance(prepared, Prepared):
            # SQL text and `Prepared` statements, compiled once, go straight to the driver:
            # SQLAlchemy's connection, events and result machinery cost several times what
            # SQLite takes for a short SELECT. The rows are SQLAlchemy's `Row`s all the same.
            rows = self._driver_read(prepared, params, first)
            if rows is not None:
                return rows
        statement = prepared.statement if isinstance(prepared, Prepared) else prepared
        with self._one_statement.connect() as conn:
            result = conn.execute(statement, params)
            if not first:
                return result.all()
            row = result.first()
            return [] if row is None else [row]

    def _driver_read(
        self, prepared: Prepared, params: Mapping[str, Any], first: bool
    ) -> list[Row[Any]] | None:
        """The rows of one read at the driver's level; None for a statement SQLAlchemy must
        run itself (a bind without a value: its error names it; an expanding bind)."""
        form = prepared.form(self.engine.dialect)
        if form.expands:
            return None
        try:
            values = form.params(params)
        except KeyError:
            return None
        raw = self._raw_connection()
        cursor = raw.cursor()
        try:
            cursor.execute(form.sql, values)
            if cursor.description is None:
                raise ResourceClosedError(
                    "This result object does not return rows. It has been closed automatically."
                )
            found = cursor.fetchmany(1) if first else cursor.fetchall()
            make_row = _row_maker(tuple(column[0] for column in cursor.description))
        except self.engine.dialect.loaded_dbapi.Error as exc:
            raise self._driver_error(raw, cursor, exc, form.sql, values) from exc
        finally:
            cursor.close()
            raw.close()
        return [make_row(form.row(raw_row)) for raw_row in found]

    def _raw_connection(self) -> Any:
        """A pooled connection at the driver's level; failing to open one raises what
        SQLAlchemy's ``connect`` raises (a locked or unreachable database: a 503)."""
        dialect = self.engine.dialect
        try:
            return self.engine.raw_connection()
        except dialect.loaded_dbapi.Error as exc:
            gone = dialect.is_disconnect(exc, None, None)
            raise DBAPIError.instance(
                None, None, exc, dialect.loaded_dbapi.Error, connection_invalidated=gone
            ) from exc

    def _driver_error(
        self, raw: Any, cursor: Any, exc: Any, sql: str | None, values: Any
    ) -> StatementError:
        """A driver's error as SQLAlchemy's Connection raises it; a connection found gone
        retires, as there, every connection opened before it and itself."""
        dialect = self.engine.dialect
        gone = dialect.is_disconnect(exc, raw.dbapi_connection, cursor)
        if gone:
            self.engine.pool._invalidate(raw, exc)
        return DBAPIError.instance(
            sql, values, exc, dialect.loaded_dbapi.Error, connection_invalidated=gone
        )

    def execute(self, sql: str, /, **params: Any) -> int:
        """Run one write statement in its own transaction; returns rows affected."""
        with self.write() as conn:
            return conn.execute(text(sql), params).rowcount

    @contextmanager
    def startup_lock(self) -> Iterator[None]:
        """Held while a process creates tables, migrates and loads its first data.

        Processes on several hosts starting at once then take turns, so the
        second finds the work done. SQLite's write transactions already take
        turns; on PostgreSQL this is a session advisory lock.
        """
        if self.engine.dialect.name != "postgresql":
            yield
            return
        with self.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _ADVISORY_LOCK_KEY})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _ADVISORY_LOCK_KEY})
                conn.commit()

    def open(self, migrations_dir: Path | None = None) -> None:
        """Create the framework's tables, then apply the app's pending migrations.

        When nothing is missing, this only reads: a process starts even while
        another holds the write lock for long. Otherwise both happen in write
        transactions, so a web process and a sidecar opening a new database
        at the same moment do not race. A process starting calls it through
        :meth:`start`, which holds :meth:`startup_lock` around it.
        """
        dialect = self.engine.dialect.name
        files = migration_files(migrations_dir, dialect) if migrations_dir is not None else []
        if self._is_current(files):
            return
        try:
            self._make_tables()
        except DBAPIError as exc:
            if is_unavailable(exc):
                raise
            # A role that may use the rows but not make or alter the tables, say.
            said = " ".join(str(exc.orig).split())
            raise ConfigError(
                f"the database {_shown(self.url)} refused to make or bring up to date the "
                f"framework's tables ({said}): start this version once as a role that may "
                "create and alter them (their owner), then as this one again"
            ) from exc
        if migrations_dir is not None:
            self.migrate(migrations_dir)

    def _make_tables(self) -> None:
        """The framework's tables made, and one an earlier version made given the columns
        and indexes added since, in one write transaction. The tables are listed once: a
        table made here has all its columns and indexes, so only those found are inspected."""
        with self.write() as conn:
            inspector = inspect(conn)
            found = set(inspector.get_table_names())
            missing = [table for table in METADATA.sorted_tables if table.name not in found]
            METADATA.create_all(conn, tables=missing, checkfirst=False)
            for table in METADATA.sorted_tables:
                if table.name not in found:
                    continue
                columns = inspector.get_columns(table.name)
                for column in _columns_to_add(table, columns, self.url):
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

    def start(
        self, migrations_dir: Path | None, setup: Callable[[Database], object] | None = None
    ) -> None:
        """A process's start on this database (the server's and the sidecar's alike):
        :meth:`open`, then ``setup``, holding :meth:`startup_lock`. A database that does
        not answer raises `DatabaseUnavailable` saying so in the driver's words."""
        try:
            with self.startup_lock():
                self.open(migrations_dir)
                if setup is not None:
                    setup(self)
        except Exception as exc:
            if not is_unavailable(exc) or isinstance(exc, DatabaseUnavailable):
                raise
            reason = getattr(exc, "orig", None) or exc  # the driver's own words
            raise DatabaseUnavailable(
                f"cannot start: the database does not answer ({reason})"
            ) from exc

    def _is_current(self, files: list[tuple[str, Path]]) -> bool:
        """Every framework table exists with its columns and indexes, and every migration
        file is applied.

        A framework table made by an earlier version, in a shape this one cannot
        use, is a `ConfigError` naming it: refused at start, never a failure later.
        """
        with self.read() as conn:
            inspector = inspect(conn)
            _refuse_views(inspector, self.url)
            tables = set(inspector.get_table_names())
            to_add = [
                _columns_to_add(METADATA.tables[name], inspector.get_columns(name), self.url)
                for name in sorted(METADATA.tables.keys() & tables)
            ]
            if any(to_add) or not METADATA.tables.keys() <= tables:
                return False
            for table in METADATA.tables.values():
                made = {index["name"] for index in inspector.get_indexes(table.name)}
                if any(index.name not in made for index in table.indexes):
                    return False
            done = set(conn.execute(select(migrations_table.c.name)).scalars())
        return all(name in done for name, _ in files)

    def migrate(self, migrations_dir: Path) -> list[str]:
        """Apply every migration not applied before, in order; return their names.

        A migration is recorded under its plain name (``0001_init.sql``) whichever
        dialect's file ran, so one database never runs two versions of it.
        """
        pending = migration_files(migrations_dir, self.engine.dialect.name)
        applied: list[str] = []
        with self.write() as conn:
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
                record = migrations_table.insert().values(name=name, applied_at=self.clock.now())
                conn.execute(record)
                applied.append(name)
        return applied

    def dispose(self) -> None:
        self.engine.dispose()


def _rollback(raw: Any) -> None:
    with suppress(Exception):  # the connection is gone: the pool replaces it
        raw.rollback()


@dataclass(frozen=True)
class _Form:
    """A statement as one database's driver takes it."""

    sql: str
    order: tuple[str, ...] | None
    """The binds in the order of the driver's positional parameters; None when it takes
    named ones."""
    fixed: dict[str, Any]
    """The values the statement itself holds, ready for the driver."""
    convert: dict[str, Callable[[Any], Any]]
    """For a bind whose value the driver does not take as it is (an instant): the
    conversion its column type makes."""
    read: tuple[Callable[[Any], Any] | None, ...]
    """For each column of a row it returns: the conversion its type makes, if any."""
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None
    """The positional parameters out of the binds by name (``order``'s, made once)."""
    converts_rows: bool
    """Some column of a row it returns needs a conversion."""
    expands: bool
    """A bind is expanded when the statement runs (``IN`` a list): only SQLAlchemy runs it."""
    columns: tuple[str, ...] | None
    """An INSERT's columns, in the order :meth:`by_column` takes their values."""
    by_index: tuple[tuple[int, Callable[[Any], Any]], ...]
    """The conversions of ``convert``, by the index of their column in ``columns``."""

    @classmethod
    def of(cls, statement: Executable, dialect: Dialect, columns: Sequence[str] | None) -> _Form:
        # A statement the framework prepares is a ClauseElement too, compiled by the
        # dialect's SQLCompiler, whose binds and positions are read here.
        compiled: SQLCompiler = cast(ClauseElement, statement).compile(  # type: ignore[assignment]
            dialect=dialect, column_keys=list(columns) if columns is not None else None
        )
        convert: dict[str, Callable[[Any], Any]] = {}
        fixed: dict[str, Any] = {}
        for name, bind in compiled.binds.items():
            processor = bind.type.bind_processor(dialect)
            if not bind.required:
                fixed[name] = bind.value if processor is None else processor(bind.value)
            elif processor is not None:
                convert[name] = processor
        exported = getattr(statement, "exported_columns", ())
        read = tuple(column.type.result_processor(dialect, None) for column in exported)
        order = tuple(compiled.positiontup or ()) if compiled.positional else None
        pick = None
        if order:
            pick = (lambda binds: (binds[order[0]],)) if len(order) == 1 else itemgetter(*order)
        expands = bool(compiled.post_compile_params or compiled.literal_execute_params)
        columns = tuple(columns) if columns is not None else None
        by_index = tuple(
            (index, convert[name]) for index, name in enumerate(columns or ()) if name in convert
        )
        return cls(
            compiled.string,
            order,
            fixed,
            convert,
            read,
            pick,
            any(read),
            expands,
            columns,
            by_index,
        )

    def params(self, values: Mapping[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        merged = {**self.fixed, **values} if self.fixed else dict(values)
        for name, convert in self.convert.items():
            merged[name] = convert(merged[name])
        return merged if self.pick is None else self.pick(merged)

    def by_column(self, values: list[Any]) -> list[Any] | dict[str, Any]:
        """The parameters of an INSERT of ``columns`` from their values in that order
        (left as they are): as they are for a driver whose positions are the columns', in
        its order for another positional driver, else by name."""
        if self.by_index:
            values = values.copy()
        for index, convert in self.by_index:
            values[index] = convert(values[index])
        if self.order == self.columns:
            return values
        assert self.columns is not None and not self.fixed
        named = dict(zip(self.columns, values, strict=True))
        return named if self.pick is None else list(self.pick(named))

    def row(self, raw: Sequence[Any]) -> tuple[Any, ...]:
        if not self.converts_rows:
            return tuple(raw)
        return tuple(
            value if read is None else read(value)
            for value, read in zip(raw, self.read, strict=True)
        )


class _SQLiteFile:
    """A SQLite database's file, which must stay the one first opened. Were it deleted,
    open connections would go on writing into a file nobody else sees, and a new
    connection would start an empty database beside it: both are refused."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.identity: tuple[int, int] | None = None
        """The file's device and inode, once a connection has opened it."""
        path.parent.mkdir(parents=True, exist_ok=True)

    def check(self) -> None:
        if self.identity is None:
            return
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            raise DatabaseUnavailable(
                f"the database file {self.path} was deleted while in use; "
                "restore it and restart the process"
            ) from None
        if (found.st_dev, found.st_ino) != self.identity:
            raise DatabaseUnavailable(
                f"the database file {self.path} was replaced while in use; "
                "restart the process to use the new file"
            )

    def before_connect(self, *_args: Any) -> None:
        self.check()

    def connected(self, _dbapi_connection: Any, _record: Any) -> None:
        if self.identity is None:
            found = os.stat(self.path)
            self.identity = (found.st_dev, found.st_ino)


class Prepared:
    """A Core statement compiled once for each database driver, run by
    :meth:`DriverTransaction.run`: its values go to the driver as the column types
    convert them (an `Instant` as it is stored), and its rows come back converted too.

    ``columns``: for an INSERT without values, the columns it sets, each bound by name
    (or, by :meth:`DriverTransaction.run_many`, by position).
    """

    def __init__(self, statement: Executable, *, columns: Sequence[str] | None = None) -> None:
        self.statement = statement
        self.columns = tuple(columns) if columns is not None else None
        self._forms: dict[tuple[str, str], _Form] = {}
        self._setting: dict[tuple[bool, ...], tuple[Prepared, list[bool] | None]] = {}

    def form(self, dialect: Dialect) -> _Form:
        key = (dialect.name, dialect.driver)
        found = self._forms.get(key)
        if found is None:
            found = self._forms.setdefault(key, _Form.of(self.statement, dialect, self.columns))
        return found

    def setting(self, nulls: tuple[bool, ...]) -> tuple[Prepared, list[bool] | None]:
        """This INSERT without the columns that ``nulls`` marks (in ``columns`` order) and
        whose default is NULL, which get NULL without a parameter; and which of
        ``columns`` it keeps (None: all). Made once per set."""
        found = self._setting.get(nulls)
        if found is None:
            assert self.columns is not None and isinstance(self.statement, Insert)
            table = self.statement.table
            kept = [
                not null or not _defaults_to_null(table.c[name])
                for name, null in zip(self.columns, nulls, strict=True)
            ]
            columns = tuple(compress(self.columns, kept))
            found = (Prepared(self.statement, columns=columns), None if all(kept) else kept)
            found = self._setting.setdefault(nulls, found)
        return found


def _defaults_to_null(column: ColumnElement[Any]) -> bool:
    return (
        isinstance(column, Column)
        and column.nullable is True
        and column.default is None
        and column.server_default is None
    )


class DriverTransaction:
    """What :meth:`Database.driver_write` yields: run `Prepared` statements in it."""

    __slots__ = ("_cursor", "dialect")

    def __init__(self, cursor: Any, dialect: Dialect) -> None:
        self._cursor, self.dialect = cursor, dialect

    def run(self, statement: Prepared, /, **values: Any) -> list[tuple[Any, ...]]:
        """Run ``statement`` with ``values`` for its binds; the rows it returns, if any."""
        form = statement.form(self.dialect)
        self._cursor.execute(form.sql, form.params(values))
        if not form.read:
            return []
        return [form.row(raw) for raw in self._cursor.fetchall()]

    def run_many(self, statement: Prepared, rows: Iterable[list[Any]], /) -> None:
        """Run ``statement``, an INSERT prepared with ``columns``, once for each of ``rows``
        (each its columns' values, in that order): a batch of rows, in one call to the
        driver for each set of NULL columns among them.

        A NULL is written by leaving its column out of the INSERT (where the column's
        default is NULL), not as a parameter: the sqlite3 driver adapts each ``None`` it is
        given through attribute lookups that fail, which for a row of mostly empty columns
        costs more than inserting the row."""
        alike: dict[tuple[bool, ...], list[list[Any]]] = {}
        for values in rows:
            nulls = tuple([value is None for value in values])
            group = alike.get(nulls)
            if group is None:
                group = alike[nulls] = []
            group.append(values)
        for nulls, group in alike.items():
            setting, kept = statement.setting(nulls)
            form = setting.form(self.dialect)
            if kept is None:
                params = [form.by_column(values) for values in group]
            else:
                params = [form.by_column(list(compress(values, kept))) for values in group]
            self._cursor.executemany(form.sql, params)


@functools.lru_cache(maxsize=1024)
def _prepared(sql: str) -> Prepared:
    """SQL text as a statement, made once per distinct text (parsing it for its binds
    costs as much as a short SELECT)."""
    return Prepared(text(sql))


@functools.lru_cache(maxsize=1024)
def _row_maker(keys: tuple[str, ...]) -> Callable[[Iterable[Any]], Row[Any]]:
    """SQLAlchemy `Row`s with these column names, as its results make for SQL text."""
    return result_tuple(keys)


_HOLD = Prepared(text("SELECT pg_advisory_xact_lock(:key)"))


def serialize(conn: Connection | DriverTransaction, name: str) -> None:
    """Make the write transaction of ``conn`` the only one holding ``name`` until it ends.

    For a read-then-write that must not interleave with another process's:
    a transaction-level advisory lock on PostgreSQL; on SQLite the write
    transaction is already the only one.
    """
    if conn.dialect.name == "postgresql":
        key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
        if isinstance(conn, DriverTransaction):
            conn.run(_HOLD, key=key)
        else:
            conn.execute(_HOLD.statement, {"key": key})


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
                f"the database {_shown(url)} was made by an earlier Rastrillo, or changed "
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
            f"the database {_shown(url)} is not one this version can use: its {views[0]} is a "
            "view, not the framework's table; rename or drop the view and start again"
        )


def _shown(url: str | URL) -> str:
    """A database URL as an error shows it: without its password."""
    return make_url(url).render_as_string(hide_password=True)


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


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from the driver so "begin" below decides the mode.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _postgres_on_connect(dialect: Dialect, dbapi_connection: Any) -> None:
    # Instants come back in UTC whatever the server's zone, so every one that
    # was stored, up to 9999-12-31 in UTC, can be read back. A statement outside
    # a transaction (Database.read's autocommit) is read-only; every transaction
    # psycopg begins says READ WRITE, so writes run in transactions only.
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'UTC'")
        cursor.execute("SET default_transaction_read_only = on")
    dbapi_connection.commit()
    dialect.set_readonly(dbapi_connection, False)  # type: ignore[attr-defined]


def _checked_in(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info[_IDLE_SINCE] = time.monotonic()


def _ping_if_idle(dialect: Dialect, dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
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


def _sqlite_on_begin(conn: Connection) -> None:
    options = conn.get_execution_options()
    if options.get("rastrillo_one_statement", False):
        return
    conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get("rastrillo_write", False) else "BEGIN")


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


def rows_as_dicts(rows: Sequence[Row[Any]]) -> list[dict[str, Any]]:
    """Rows as plain dicts, ready for a template or ``ctx.json``."""
    return [r._asdict() for r in rows]
