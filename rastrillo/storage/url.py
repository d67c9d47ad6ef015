"""Where the database is: a path or a URL, and whether it names one the framework runs on."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from rastrillo.errors import ConfigError


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
    shown = shown_url(parsed)
    backend = parsed.get_backend_name()
    if backend == "postgres":  # Heroku's and libpq's spelling, which SQLAlchemy refuses
        meant = shown_url(parsed.set(drivername="postgresql+psycopg"))
        raise ConfigError(f"{shown}: SQLAlchemy reads no postgres:// URL; write {meant}")
    if backend not in ("sqlite", "postgresql"):
        raise ConfigError(f"{shown}: Rastrillo runs on SQLite and PostgreSQL only")
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise ConfigError(
            f"{shown}: each connection would open its own empty database in memory; "
            "give a SQLite file (app.db) or a PostgreSQL URL"
        )
    return parsed


def shown_url(url: str | URL) -> str:
    """A database URL as an error shows it: without its password."""
    return make_url(url).render_as_string(hide_password=True)
