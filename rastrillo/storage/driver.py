"""The driver-level fast path: statements compiled once per driver and run on its cursor,
without SQLAlchemy's per-statement work, for the few hot reads and writes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from itertools import compress
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import (
    ClauseElement,
    Column,
    ColumnElement,
    Dialect,
    Engine,
    Executable,
    Insert,
    Row,
    text,
)
from sqlalchemy.engine.result import result_tuple
from sqlalchemy.exc import DBAPIError, ResourceClosedError, StatementError
from sqlalchemy.sql.compiler import SQLCompiler


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
def prepared_text(sql: str) -> Prepared:
    """SQL text as a statement, made once per distinct text (parsing it for its binds
    costs as much as a short SELECT)."""
    return Prepared(text(sql))


@functools.lru_cache(maxsize=1024)
def row_maker(keys: tuple[str, ...]) -> Callable[[Iterable[Any]], Row[Any]]:
    """SQLAlchemy `Row`s with these column names, as its results make for SQL text."""
    return result_tuple(keys)


def read_rows(
    engine: Engine, prepared: Prepared, params: Mapping[str, Any], first: bool
) -> list[Row[Any]] | None:
    """The rows of one read at the driver's level; None for a statement SQLAlchemy must
    run itself (a bind without a value: its error names it; an expanding bind)."""
    form = prepared.form(engine.dialect)
    if form.expands:
        return None
    try:
        values = form.params(params)
    except KeyError:
        return None
    raw = raw_connection(engine)
    cursor = raw.cursor()
    try:
        cursor.execute(form.sql, values)
        if cursor.description is None:
            raise ResourceClosedError(
                "This result object does not return rows. It has been closed automatically."
            )
        found = cursor.fetchmany(1) if first else cursor.fetchall()
        make_row = row_maker(tuple(column[0] for column in cursor.description))
    except engine.dialect.loaded_dbapi.Error as exc:
        raise driver_error(engine, raw, cursor, exc, form.sql, values) from exc
    finally:
        cursor.close()
        raw.close()
    return [make_row(form.row(raw_row)) for raw_row in found]


def raw_connection(engine: Engine) -> Any:
    """A pooled connection at the driver's level; failing to open one raises what
    SQLAlchemy's ``connect`` raises (a locked or unreachable database: a 503)."""
    dialect = engine.dialect
    try:
        return engine.raw_connection()
    except dialect.loaded_dbapi.Error as exc:
        gone = dialect.is_disconnect(exc, None, None)
        raise DBAPIError.instance(
            None, None, exc, dialect.loaded_dbapi.Error, connection_invalidated=gone
        ) from exc


def driver_error(
    engine: Engine, raw: Any, cursor: Any, exc: Any, sql: str | None, values: Any
) -> StatementError:
    """A driver's error as SQLAlchemy's Connection raises it; a connection found gone
    retires, as there, every connection opened before it and itself."""
    dialect = engine.dialect
    gone = dialect.is_disconnect(exc, raw.dbapi_connection, cursor)
    if gone:
        engine.pool._invalidate(raw, exc)
    return DBAPIError.instance(
        sql, values, exc, dialect.loaded_dbapi.Error, connection_invalidated=gone
    )


def rollback(raw: Any) -> None:
    with suppress(Exception):  # the connection is gone: the pool replaces it
        raw.rollback()
