"""The SQLite file a process opened, which must stay the one it writes to."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rastrillo.storage.errors import DatabaseUnavailable


class SQLiteFile:
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
