"""The `Database`: SQLAlchemy Core over SQLite by default, the same code on PostgreSQL.

SQLite is tuned for a web app serving concurrent requests: WAL (readers never
block the writer), foreign keys on, a busy timeout, and write transactions
that start with ``BEGIN IMMEDIATE`` behind a process-wide lock, so two writers
queue instead of failing with "database is locked" half-way through. On
PostgreSQL writers do not queue: each statement takes the row locks it needs,
so processes and threads write concurrently, and code that reads before it
writes serialises itself with :func:`serialize`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import (
    Connection,
    Engine,
    Executable,
    Row,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import (
    DBAPIError,
    NoSuchModuleError,
    ResourceClosedError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.schema import CreateColumn

from rastrillo.clock import SYSTEM_CLOCK, Clock
from rastrillo.errors import ConfigError
from rastrillo.storage.driver import DriverTransaction, Prepared, prepared_text, row_maker
from rastrillo.storage.errors import DatabaseUnavailable, MigrationError, is_unavailable
from rastrillo.storage.hooks import (
    checked_in,
    ping_if_idle,
    postgres_on_connect,
    sqlite_on_begin,
    sqlite_on_connect,
)
from rastrillo.storage.migrations import (
    METADATA,
    WHEN_ADDED,
    columns_to_add,
    migration_files,
    migrations_table,
    refuse_views,
    split_sql,
)
from rastrillo.storage.sqlite_file import SQLiteFile
from rastrillo.storage.url import database_url, shown_url, supported_url

_ADVISORY_LOCK_KEY = 0x7261_7374  # "rast": serialises start-up across processes on PostgreSQL


_POOL_TIMEOUT_SECONDS = 10  # a request waits this long for a free connection, then fails
POOL_SIZE = 15
"""PostgreSQL connections a process opens at most, by default, and keeps open. Load comes
in waves: a pool that closed what it opened for one would start backends again (a fork,
authentication, settings) for the next."""


_SQLITE_POOL_SIZE = 48
"""SQLite connections kept open: one for each of Starlette's worker threads (anyio's
default limit, 40) and the framework's own (audit writer, sidecar, start-up), so load
reuses connections instead of opening (and setting up) new ones."""


class WriteGate(Protocol):
    def before_write(self) -> None: ...

    def committed(self) -> None: ...


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
        self._file: SQLiteFile | None = None
        if self.is_sqlite:
            assert parsed.database  # supported_url refused a database in memory
            self._file = SQLiteFile(Path(parsed.database).resolve())
            self.engine: Engine = create_engine(
                self.url,
                connect_args={"check_same_thread": False, "timeout": 10},
                pool_size=_SQLITE_POOL_SIZE,
            )
            event.listen(self.engine, "connect", sqlite_on_connect)
            event.listen(self.engine, "begin", sqlite_on_begin)
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
                    f"no driver for {shown_url(parsed)} ({exc}): install psycopg and write the URL "
                    "as postgresql+psycopg://user:password@host/database"
                ) from exc
            dialect = self.engine.dialect
            event.listen(self.engine, "connect", lambda c, _r: postgres_on_connect(dialect, c))
            event.listen(self.engine, "checkin", checked_in)
            event.listen(self.engine, "checkout", lambda c, r, _p: ping_if_idle(dialect, c, r))
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
        prepared = prepared_text(sql) if isinstance(sql, str) else sql
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
            make_row = row_maker(tuple(column[0] for column in cursor.description))
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
                f"the database {shown_url(self.url)} refused to make or bring up to date the "
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
                for column in columns_to_add(table, columns, self.url):
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
            refuse_views(inspector, self.url)
            tables = set(inspector.get_table_names())
            to_add = [
                columns_to_add(METADATA.tables[name], inspector.get_columns(name), self.url)
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


def rows_as_dicts(rows: Sequence[Row[Any]]) -> list[dict[str, Any]]:
    """Rows as plain dicts, ready for a template or ``ctx.json``."""
    return [r._asdict() for r in rows]
