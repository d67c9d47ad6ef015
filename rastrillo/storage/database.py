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
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, Executable, Row, create_engine, event, text
from sqlalchemy.exc import DBAPIError, NoSuchModuleError, SQLAlchemyError

from rastrillo.awaitable import refuse_awaitable
from rastrillo.clock import SYSTEM_CLOCK, Clock
from rastrillo.errors import ConfigError
from rastrillo.storage.driver import (
    DriverTransaction,
    Prepared,
    driver_error,
    prepared_text,
    raw_connection,
    read_rows,
    rollback,
)
from rastrillo.storage.errors import DatabaseUnavailable, is_unavailable
from rastrillo.storage.hooks import (
    checked_in,
    ping_if_idle,
    postgres_on_connect,
    sqlite_on_begin,
    sqlite_on_connect,
)
from rastrillo.storage.migrations import apply_migrations, is_current, make_tables, migration_files
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
default limit, 40) and the framework's own (audit writer, sidecar, start-up, the event
loop's session reads), so load reuses connections instead of opening (and setting up)
new ones."""


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
            raw = raw_connection(self.engine)
            cursor = raw.cursor()
            try:
                if self.is_sqlite:
                    cursor.execute("BEGIN IMMEDIATE")
                yield DriverTransaction(cursor, dialect)
                raw.commit()
            except dialect.loaded_dbapi.Error as exc:
                rollback(raw)
                raise driver_error(self.engine, raw, cursor, exc, None, None) from exc
            except BaseException:
                rollback(raw)
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

    def reads_without_waiting(self) -> bool:
        """Whether a read made now waits on nothing, and so may run on the event loop: a
        SQLite (WAL) database, whose readers never wait on its writer, with a connection
        open and idle in the pool (none to wait for, and none to open now). A PostgreSQL
        query waits on the network: never."""
        return self.is_sqlite and self.engine.pool.checkedin() > 0  # type: ignore[attr-defined]

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
            rows = read_rows(self.engine, prepared, params, first)
            if rows is not None:
                return rows
        statement = prepared.statement if isinstance(prepared, Prepared) else prepared
        with self._one_statement.connect() as conn:
            result = conn.execute(statement, params)
            if not first:
                return result.all()
            row = result.first()
            return [] if row is None else [row]

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
        with self.read() as conn:
            if is_current(conn, files, self.url):
                return
        try:
            with self.write() as conn:
                make_tables(conn, self.url)
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
                    refuse_awaitable(setup(self), "Options.setup")
        except Exception as exc:
            if not is_unavailable(exc) or isinstance(exc, DatabaseUnavailable):
                raise
            reason = getattr(exc, "orig", None) or exc  # the driver's own words
            raise DatabaseUnavailable(
                f"cannot start: the database does not answer ({reason})"
            ) from exc

    def migrate(self, migrations_dir: Path) -> list[str]:
        """Apply every migration not applied before, in order, in one write transaction;
        return their names."""
        pending = migration_files(migrations_dir, self.engine.dialect.name)
        with self.write() as conn:
            return apply_migrations(conn, pending, self.clock)

    def dispose(self) -> None:
        self.engine.dispose()


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
