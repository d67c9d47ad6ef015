"""The tickets sidecar releases expired holds and reports the next expiry as its next due."""

import asyncio
import importlib
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rastrillo.loader import load_options
from rastrillo.sidecar import PassContext, SidecarLoop, read_state
from rastrillo.testing import TestApp

TOKEN = "tickets-platform-token"

APP_DIR = Path(__file__).resolve().parent.parent
release_expired_holds = load_options(APP_DIR).sidecar
ticketing = importlib.import_module("ticketing")  # imported by app.py above
sidecar_jobs = importlib.import_module("sidecar_jobs")


def pass_context(db, at):
    return PassContext(
        stopping=threading.Event(), started_at=at, scheduled_for=at, pass_id=1, first=True, db=db
    )


def expire(db, order_id, at):
    db.execute(
        "UPDATE orders SET hold_expires_at = :at WHERE id = :id", at=at.isoformat(), id=order_id
    )


def tickets_left(db, event_id):
    return db.query_one("SELECT tickets_left FROM events WHERE id = :id", id=event_id).tickets_left


def test_an_expired_hold_is_released_once_and_the_next_expiry_is_returned(tmp_path):
    db = TestApp(APP_DIR, tmp_path).db
    now = datetime.now(UTC)
    stale = ticketing.buy(db, "1", "1", "3")
    pending = ticketing.buy(db, "2", "1", "2")
    expire(db, stale, now - timedelta(seconds=1))
    assert tickets_left(db, 1) == 118 - 5

    for _ in range(2):  # a second pass changes nothing
        due = release_expired_holds(pass_context(db, now))
        assert tickets_left(db, 1) == 118 - 2
        assert ticketing.get_order(db, "1", str(stale))["status"] == "expired"
        assert ticketing.get_order(db, "2", str(pending))["status"] == "held"
        held_until = ticketing.get_order(db, "2", str(pending))["hold_expires_at"]
        assert due == datetime.fromisoformat(held_until)
        assert due.tzinfo is not None


def test_a_paid_order_is_never_released_and_no_holds_is_nothing_scheduled(tmp_path):
    db = TestApp(APP_DIR, tmp_path).db
    order = ticketing.buy(db, "1", "2", "1")
    ticketing.pay(db, "1", str(order))
    later = datetime.now(UTC) + timedelta(hours=1)
    assert release_expired_holds(pass_context(db, later)) is None
    assert ticketing.get_order(db, "1", str(order))["status"] == "paid"


def test_a_pass_records_the_next_expiry_as_its_next_due(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    order = ticketing.buy(app.db, "1", "3", "2")
    held_until = datetime.fromisoformat(
        ticketing.get_order(app.db, "1", str(order))["hold_expires_at"]
    )

    async def stop_after_one_pass(seconds, wake):
        wake.set()

    loop = SidecarLoop(release_expired_holds, db=app.db, sleeper=stop_after_one_pass)
    assert asyncio.run(loop.run(handle_signals=False)) == 0
    assert read_state(app.db).next_due == held_until


def test_next_due_reports_the_earliest_pending_hold_to_the_platform(tmp_path, monkeypatch):
    monkeypatch.setenv("CARLOS_ADMIN_TOKEN", TOKEN)
    app = TestApp(APP_DIR, tmp_path)
    ask = {"Authorization": f"Bearer {TOKEN}"}
    assert app.client.get("/api/next-due", headers=ask).json() == {"due": 0}
    order = ticketing.buy(app.db, "1", "3", "2")
    held_until = datetime.fromisoformat(
        ticketing.get_order(app.db, "1", str(order))["hold_expires_at"]
    )
    assert app.client.get("/api/next-due", headers=ask).json() == {
        "due": int(held_until.timestamp())
    }
    assert app.client.get("/api/next-due").status_code == 403


def held_orders(db, count, expired_at):
    """``count`` one-ticket holds on event 1 (its stock grown by as many), all run out at
    ``expired_at``."""
    with db.write() as conn:
        conn.exec_driver_sql(
            "UPDATE events SET tickets_total = tickets_total + ? WHERE id = 1", (count,)
        )
        conn.exec_driver_sql(
            "INSERT INTO orders (user_id, event_id, quantity, status, created_at, hold_expires_at)"
            " VALUES (1, 1, 1, 'held', ?, ?)",
            [(expired_at.isoformat(), expired_at.isoformat())] * count,
        )


def test_a_long_catch_up_works_in_batches_to_the_end(tmp_path):
    db = TestApp(APP_DIR, tmp_path).db
    now = datetime.now(UTC)
    before = tickets_left(db, 1)
    held_orders(db, 2 * sidecar_jobs.BATCH + 7, now - timedelta(minutes=1))
    assert release_expired_holds(pass_context(db, now)) is None
    assert tickets_left(db, 1) == before + 2 * sidecar_jobs.BATCH + 7
    assert db.query_one("SELECT COUNT(*) AS n FROM orders WHERE status = 'held'").n == 0


def test_a_catch_up_asked_to_stop_stops_and_leaves_the_rest_past_due(tmp_path):
    db = TestApp(APP_DIR, tmp_path).db
    now = datetime.now(UTC)
    expired_at = now - timedelta(minutes=1)
    held_orders(db, sidecar_jobs.BATCH + 1, expired_at)
    ctx = pass_context(db, now)
    ctx.stopping.set()
    assert release_expired_holds(ctx) == expired_at  # the next pass carries on at once
    assert db.query_one("SELECT COUNT(*) AS n FROM orders WHERE status = 'held'").n == (
        sidecar_jobs.BATCH + 1
    )
