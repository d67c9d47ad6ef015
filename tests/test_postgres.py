"""The framework's own tables and guarantees on a real PostgreSQL server.

`make test` runs these against a throwaway server (scripts/with-postgres sets
RASTRILLO_TEST_POSTGRES_URL). Each test gets a database of its own (the
``pg_url`` fixture in conftest.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import Integer, event, literal_column, select, text
from sqlalchemy.exc import DBAPIError

import rastrillo
from rastrillo import storage
from rastrillo.cli.new import scaffold
from rastrillo.loader import load_options
from rastrillo.sessions import create_session, revoke_user
from rastrillo.sessions.store import find_session
from rastrillo.sidecar import Lease
from rastrillo.storage import Database, hooks
from rastrillo.tools import ApprovalInvalid, Call, ConfirmRequired, audit, consent, dispatch
from tests.support import until
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
    assert find_session(db, first, tool_call=False).user_id == "7"
    assert find_session(db, "not-a-session", tool_call=False) is None
    assert revoke_user(db, "7") == 2
    assert find_session(db, second, tool_call=False) is None
    db.dispose()


def test_one_lease_holder_at_a_time(pg_url):
    db = Database(pg_url)
    db.open()
    leases = [Lease(Database(pg_url), "default", ttl=30) for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        held = list(pool.map(lambda lease: lease.hold(), leases))
    assert held.count(True) == 1
    winner = leases[held.index(True)]
    winner.release()
    assert leases[held.index(False)].hold()
    db.dispose()


def test_an_approved_write_runs_once_of_50_and_is_audited(pg_url, tmp_path):
    f = build(tmp_path, db=pg_url)
    session = f.session("3")
    call = Call(
        tool="orders_id_cancel_post", args={"id": "5", "reason": "r"}, actor=AGENT, session=session
    )
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


TICKETS = Path(__file__).resolve().parent.parent / "examples" / "tickets"


def test_the_tickets_demo_runs_unchanged_on_postgresql(pg_url, tmp_path, serve):
    app_dir = tmp_path / "tickets"
    shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("*.db*", "__pycache__"))
    server = serve(app_dir, "--db", pg_url, "--workers", "2")
    with server.client(headers={"Origin": server.base_url}) as browser:
        assert "118 of 120 tickets left" in browser.get("/").text
        signed_in = browser.post(
            "/signin", data={"email": "bob@example.com", "password": "tickets-demo"}
        )
        assert signed_in.status_code == 303
        first = browser.post("/events/1/buy", data={"quantity": "3"})
        second = browser.post("/events/1/buy", data={"quantity": "1"})
        ids = [int(r.headers["location"].rsplit("/", 1)[1]) for r in (first, second)]
        assert ids == [4, 5]  # the seeded orders are 1 to 3: ids come from the database
        assert browser.post(f"/orders/{ids[0]}/cancel").status_code == 303
        assert "cancelled" in browser.get(f"/orders/{ids[0]}").text
        assert "117 of 120 tickets left" in browser.get("/events/1").text
    assert server.stop() == 0
    migrations = Database(pg_url).query("SELECT name FROM rastrillo_migrations")
    assert [r.name for r in migrations] == ["0001_tickets.sql"]


def test_a_new_app_runs_unchanged_on_postgresql(pg_url, tmp_path, serve):
    app_dir = scaffold(tmp_path / "shop")
    server = serve(app_dir, "--db", pg_url)
    with server.client(headers={"Origin": server.base_url}) as browser:
        signed_up = browser.post(
            "/signup",
            data={"email": "ana@example.com", "name": "Ana", "password": "a long password"},
        )
        assert signed_up.status_code == 303
        for body in ("first", "second"):
            assert browser.post("/notes", data={"body": body}).status_code == 303
        assert browser.get("/").text.index("second") < browser.get("/").text.index("first")
    assert server.stop() == 0
    notes = Database(pg_url).query("SELECT id, body FROM notes ORDER BY id")
    assert [(n.id, n.body) for n in notes] == [(1, "first"), (2, "second")]


def test_hosts_starting_at_once_migrate_and_seed_once(pg_url, tmp_path):
    app_dir = tmp_path / "tickets"
    shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("*.db*", "__pycache__"))
    options = load_options(app_dir)

    def start(_: int) -> int:
        app = rastrillo.handler(dataclasses.replace(options, db=pg_url))
        app.db.dispose()
        return 0

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(start, range(4))) == [0] * 4
    db = Database(pg_url)
    assert db.query_one("SELECT COUNT(*) AS n FROM events").n == 3
    assert db.query_one("SELECT COUNT(*) AS n FROM users").n == 2


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


def test_a_write_through_a_read_connection_is_refused_and_leaves_nothing(pg_url):
    db = Database(pg_url, pool_size=1)  # one connection, used by every step below
    db.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(DBAPIError) as refused, db.read() as conn:
        conn.execute(text("INSERT INTO notes VALUES ('slipped in')"))
    assert refused.value.orig.sqlstate == "25006"  # read-only transaction
    with pytest.raises(DBAPIError):  # nor through a one-query read
        db.query_one("INSERT INTO notes VALUES ('slipped in') RETURNING body")
    db.execute("INSERT INTO notes VALUES ('written')")
    with db.engine.begin() as conn:  # the engine's own transactions still write
        conn.execute(text("INSERT INTO notes VALUES ('by the engine')"))
    with db.engine.connect() as conn:  # and so do those at an isolation level of their own
        serializable = conn.execution_options(isolation_level="SERIALIZABLE")
        level = serializable.exec_driver_sql("SHOW transaction_isolation").scalar_one()
        serializable.execute(text("INSERT INTO notes VALUES ('serializable')"))
        serializable.commit()
    assert level == "serializable"
    with pytest.raises(DBAPIError), db.read() as conn:  # the connection is reset on return
        conn.execute(text("INSERT INTO notes VALUES ('slipped in later')"))
    notes = sorted(r.body for r in db.query("SELECT body FROM notes"))
    assert notes == ["by the engine", "serializable", "written"]
    db.dispose()


def _backend(db: Database) -> int:
    return db.query_one("SELECT pg_backend_pid() AS pid").pid


def _terminate(pg_url: str, pid: int) -> None:
    admin = Database(pg_url)
    admin.execute("SELECT pg_terminate_backend(:pid)", pid=pid)
    until(
        lambda: not admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = :pid", pid=pid),
        "the backend to end",
    )
    admin.dispose()


def test_a_pooled_connection_dropped_while_idle_is_replaced_before_use(pg_url, monkeypatch):
    monkeypatch.setattr(hooks, "PING_AFTER_IDLE_SECONDS", 0.0)
    db = Database(pg_url)
    first = _backend(db)
    _terminate(pg_url, first)  # a restart or a proxy's idle timeout, while it sat in the pool
    assert _backend(db) != first  # no error: the dead connection was found and replaced
    db.dispose()


def test_a_connection_dropped_while_busy_fails_as_unavailable_and_the_pool_recovers(
    pg_url, monkeypatch
):
    monkeypatch.setattr(hooks, "PING_AFTER_IDLE_SECONDS", 3600.0)  # in use all along
    db = Database(pg_url)
    held = [db.engine.connect() for _ in range(3)]  # three connections, back in the pool after
    backends = {conn.execute(text("SELECT pg_backend_pid()")).scalar_one() for conn in held}
    for conn in held:
        conn.close()
    for pid in backends:
        _terminate(pg_url, pid)
    with pytest.raises(DBAPIError) as failed:
        _backend(db)
    assert storage.is_unavailable(failed.value)  # served as 503, not 500
    # The failure retires every connection opened before it: the next reads all work.
    assert not {_backend(db) for _ in range(3)} & backends
    db.dispose()


def test_a_driver_write_on_a_dropped_connection_fails_as_unavailable_and_the_pool_recovers(
    pg_url, monkeypatch
):
    """``Database.driver_write`` (an approval's use, a session's lookup with it) fails as
    a plain ``write`` does when the server dropped its connections: a 503, then recovery."""
    monkeypatch.setattr(hooks, "PING_AFTER_IDLE_SECONDS", 3600.0)  # in use all along
    db = Database(pg_url)
    held = [db.engine.connect() for _ in range(3)]
    backends = {conn.execute(text("SELECT pg_backend_pid()")).scalar_one() for conn in held}
    for conn in held:
        conn.close()
    for pid in backends:
        _terminate(pg_url, pid)
    alive = storage.Prepared(select(literal_column("1", Integer)))
    with pytest.raises(DBAPIError) as failed, db.driver_write() as tx:
        tx.run(alive)
    assert storage.is_unavailable(failed.value)
    for _ in range(3):
        with db.driver_write() as tx:
            assert tx.run(alive) == [(1,)]
    assert not {_backend(db) for _ in range(3)} & backends
    db.dispose()


def test_waves_of_requests_keep_reusing_the_pools_connections(pg_url):
    # A connection closed when a burst ends is a PostgreSQL backend to start again
    # (a fork, authentication, settings) for the next: load goes in waves, and a
    # pool that shrinks after each pays that on every wave.
    options = rastrillo.Options()
    db = Database(pg_url, pool_size=options.db_pool_size, max_overflow=options.db_max_overflow)
    opened: list[object] = []
    event.listen(db.engine, "connect", lambda conn, _record: opened.append(conn))
    wave = threading.Barrier(32)

    def requests(_: int) -> None:
        for _ in range(5):
            wave.wait()
            db.query_one("SELECT pg_sleep(0.02)")  # a query that takes a moment

    with ThreadPoolExecutor(32) as pool:  # more at once than the pool holds
        list(pool.map(requests, range(32)))
    assert len(opened) <= options.db_pool_size + options.db_max_overflow
    db.dispose()
