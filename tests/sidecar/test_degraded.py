"""A sidecar on a database it cannot use says why, and never splits from a deleted file."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from rastrillo.sidecar import Lease, PassContext, SidecarLoop
from rastrillo.storage import Database, DatabaseUnavailable


def run_until_sleep(loop: SidecarLoop) -> int:
    """Run the loop until its first sleep, then stop it."""

    async def main() -> int:
        return await loop.run(handle_signals=False)

    return asyncio.run(main())


async def stop(seconds: float, wake: asyncio.Event) -> None:
    wake.set()


def test_a_sidecar_that_cannot_take_the_lease_logs_the_real_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "rastrillo.sidecar")
    db = Database(str(tmp_path / "app.db"))
    db.open()
    # A database that refuses the lease's write, as a full disk or a revoked grant would.
    db.execute(
        "CREATE TRIGGER no_lease BEFORE INSERT ON rastrillo_sidecar_lease "
        "BEGIN SELECT RAISE(ABORT, 'disk quota exceeded'); END"
    )
    ran: list[PassContext] = []
    loop = SidecarLoop(ran.append, db=db, lease=Lease(db, ttl=60), sleeper=stop)
    assert run_until_sleep(loop) == 0
    assert ran == []
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "cannot take the lease" in errors[0] and "disk quota exceeded" in errors[0]
    assert "another process holds the lease" not in caplog.text


def test_a_deleted_database_file_is_detected_not_written_beside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "rastrillo.sidecar")
    path = tmp_path / "app.db"
    db = Database(str(path))
    db.open()
    db.check()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(DatabaseUnavailable, match="was deleted while in use"):
        db.check()
    with pytest.raises(DatabaseUnavailable, match="was deleted while in use"), db.write():
        pass
    ran: list[PassContext] = []
    assert run_until_sleep(SidecarLoop(ran.append, db=db, sleeper=stop)) == 0
    assert ran == []  # the pass does not run against a deleted file
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "was deleted while in use" in errors[0]
    db.engine.dispose()  # a fresh connection, too, refuses to start an empty database
    with pytest.raises(DatabaseUnavailable, match="was deleted while in use"):
        db.query("SELECT 1")
    assert not path.exists()


def test_a_replaced_database_file_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    db = Database(str(path))
    db.open()
    Database(str(tmp_path / "other.db")).open()
    (tmp_path / "other.db").replace(path)
    with pytest.raises(DatabaseUnavailable, match="was replaced while in use"):
        db.check()
    db.dispose()
