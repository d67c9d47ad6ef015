"""Errors of the database: what a caller may catch, and which failures mean the database
cannot serve now (a 503) rather than that the code or the data is wrong (a 500)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError

from rastrillo.errors import Problem, RastrilloError


class DatabaseUnavailable(RastrilloError):
    """The database cannot serve this process now; the message says why."""


class MigrationError(RastrilloError):
    """A statement of a migration file failed: the file, the statement's line and the
    database's words. The migrations of one start run in one transaction, so none of
    them was applied, and the next start runs them again."""

    def __init__(self, path: Path, line: int, reason: object) -> None:
        where = Problem(f"{path.parent.name}/{path.name}", line, str(reason).strip())
        super().__init__(f"{where}\nno migration was applied; fix the file and start again")


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
