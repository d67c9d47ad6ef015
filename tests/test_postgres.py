"""The framework's own tables and guarantees on a real PostgreSQL server.

`make test` runs these against a throwaway server (scripts/with-postgres sets
RASTRILLO_TEST_POSTGRES_URL). Each test gets a database of its own.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import rastrillo
from rastrillo.sessions import create_session, revoke_user
from rastrillo.sessions.store import find_session
from rastrillo.sidecar import Lease
from rastrillo.storage import Database
from rastrillo.tools import ApprovalInvalid, Call, ConfirmRequired, audit, consent, dispatch
from tests.tools._tools_app import build

AGENT = rastrillo.Actor.agent("concierge")

pytestmark = pytest.mark.postgres


def test_framework_tables_and_migrations_apply_once(pg_url, tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_notes.sql").write_text(
        "CREATE TABLE notes (id SERIAL PRIMARY KEY, body TEXT NOT NULL);\n"
        "INSERT INTO notes (body) VALUES ('first');\n"
    )
    db = Database(pg_url)
    db.open(migrations)
    Database(pg_url).open(migrations)  # a second process starting: nothing applied twice
    assert [r.body for r in db.query("SELECT body FROM notes")] == ["first"]
    tables = {r.tablename for r in db.query("SELECT tablename FROM pg_tables")}
    assert {"rastrillo_sessions", "rastrillo_audit", "rastrillo_migrations"} <= tables
    db.dispose()


def test_sessions_find_and_revoke(pg_url):
    db = Database(pg_url)
    db.open()
    first, second = create_session(db, "7"), create_session(db, 7)
    assert find_session(db, first).user_id == "7"
    assert find_session(db, "not-a-session") is None
    assert revoke_user(db, "7") == 2
    assert find_session(db, second) is None
    db.dispose()


def test_one_lease_holder_at_a_time(pg_url):
    db = Database(pg_url)
    db.open()
    leases = [Lease(Database(pg_url), "default", ttl=30) for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        held = list(pool.map(lambda lease: lease.acquire(), leases))
    assert held.count(True) == 1
    winner = leases[held.index(True)]
    winner.release()
    assert leases[held.index(False)].acquire()
    db.dispose()


def test_an_approved_write_runs_once_of_50_and_is_audited(pg_url, tmp_path):
    f = build(tmp_path, db=pg_url)
    session = f.session("3")
    call = Call(tool="orders_id_cancel_post", args={"id": "5", "reason": "r"}, actor=AGENT,
                session=session)
    with pytest.raises(ConfirmRequired) as info:
        asyncio.run(dispatch(f.app, f.defs, call))
    consent.decide(f.app.db, "3", info.value.approval_id, True)
    approved = Call(**{**call.__dict__, "approval": info.value.approval_id})

    def one(_: int) -> object:
        try:
            return asyncio.run(dispatch(f.app, f.defs, approved)).status
        except ApprovalInvalid as exc:
            return exc.reason

    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(one, range(50)))
    assert outcomes.count(303) == 1 and outcomes.count("used") == 49
    assert len(f.ran("cancel")) == 1
    ran = [r for r in audit.latest(f.app.db, limit=100) if r.status == 303]
    assert len(ran) == 1 and ran[0].approved_by == "3"
    f.app.db.dispose()


def test_two_write_transactions_run_at_once_on_postgresql(pg_url):
    """The process-wide write lock is SQLite's need; PostgreSQL writers overlap."""
    db = Database(pg_url)
    db.open()
    inside, release = threading.Semaphore(0), threading.Event()

    def writer() -> None:
        with db.write():
            inside.release()
            release.wait(30)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        assert inside.acquire(timeout=30) and inside.acquire(timeout=30), "a writer was kept out"
    finally:
        release.set()
        for thread in threads:
            thread.join()
    db.dispose()
