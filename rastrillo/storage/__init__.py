"""The app's database: SQLAlchemy Core over SQLite by default, the same code on PostgreSQL.

One module for each concern, read bottom-up: where the database is (`url`), its errors
(`errors`), the instant column (`instant`), the tables and migrations (`migrations`),
what each connection gets (`hooks`), the SQLite file kept the same (`sqlite_file`), the
driver-level fast path (`driver`), the one upsert (`upsert`), and the `Database` over
them all (`database`). The names an app or the framework imports are here.
"""

from rastrillo.storage.database import POOL_SIZE, Database, rows_as_dicts, serialize
from rastrillo.storage.driver import DriverTransaction, Prepared
from rastrillo.storage.errors import DatabaseUnavailable, MigrationError, is_unavailable
from rastrillo.storage.instant import Instant
from rastrillo.storage.migrations import (
    METADATA,
    WHEN_ADDED,
    migrations_table,
    split_sql,
)
from rastrillo.storage.upsert import upsert
from rastrillo.storage.url import database_url, supported_url

__all__ = [
    "METADATA",
    "POOL_SIZE",
    "WHEN_ADDED",
    "Database",
    "DatabaseUnavailable",
    "DriverTransaction",
    "Instant",
    "MigrationError",
    "Prepared",
    "database_url",
    "is_unavailable",
    "migrations_table",
    "rows_as_dicts",
    "serialize",
    "split_sql",
    "supported_url",
    "upsert",
]
