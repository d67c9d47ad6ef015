"""One clock: sessions, approvals, the audit log, sign-in limits and the sidecar all go by
the clock the app is given, and store its instants alike."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select
from sqlalchemy.exc import StatementError

import rastrillo
from rastrillo.clock import InstantError
from rastrillo.sessions import throttle
from rastrillo.sidecar import PassContext, SidecarLoop, read_state
from rastrillo.storage import Database, migrations_table
from rastrillo.testing import ManualClock
from rastrillo.tools import Call, ConfirmRequired, audit, consent, dispatch_sync
from tests.tools._tools_app import build

START = datetime(2031, 7, 1, 12, 0, tzinfo=UTC)


def test_every_part_of_the_framework_goes_by_the_clock_it_is_given(tmp_path) -> None:
    clock = ManualClock(START)
    f = build(tmp_path, clock=clock)
    session = f.session("3")
    row = f.app.db.query_one("SELECT created, expires FROM rastrillo_sessions")
    assert row is not None
    clock.advance(60)
    call = Call(
        tool="orders_id_cancel_post",
        args={"id": "7", "reason": "r"},
        actor=rastrillo.Actor.agent("concierge"),
        session=session,
    )
    with pytest.raises(ConfirmRequired) as info:
        dispatch_sync(f.app, f.defs, call)
    approval = consent.get(f.app.db, info.value.approval_id)
    assert approval is not None
    assert approval.created_at == START + timedelta(seconds=60)
    assert [r.at for r in audit.latest(f.app.db)] == [START + timedelta(seconds=60)]

    clock.advance(60)
    throttle.take_attempt(f.app.db, {"account:x": 1}, timedelta(minutes=1))
    with pytest.raises(throttle.TooManyAttempts) as refused:
        throttle.take_attempt(f.app.db, {"account:x": 1}, timedelta(minutes=1))
    assert refused.value.retry_after == 60
    clock.advance(60)
    throttle.take_attempt(f.app.db, {"account:x": 1}, timedelta(minutes=1))

    async def stop(seconds: float, wake: asyncio.Event) -> None:
        wake.set()

    loop = SidecarLoop(lambda ctx: None, db=f.app.db, sleeper=stop)
    assert asyncio.run(loop.run(handle_signals=False)) == 0
    state = read_state(f.app.db)
    assert state is not None and state.last_pass_at == START + timedelta(seconds=180)


def test_a_pass_context_carries_the_injected_clocks_time(tmp_path) -> None:
    clock = ManualClock(START)
    seen: list[PassContext] = []

    async def stop(seconds: float, wake: asyncio.Event) -> None:
        wake.set()

    loop = SidecarLoop(seen.append, clock=clock, sleeper=stop)
    assert asyncio.run(loop.run(handle_signals=False)) == 0
    assert (seen[0].started_at, seen[0].scheduled_for) == (START, START)


def store_instant(db: Database, value: object) -> None:
    with db.write() as conn:
        conn.execute(migrations_table.insert().values(name="x", applied_at=value))


@pytest.mark.parametrize(
    "value",
    [datetime(2030, 1, 1), "2030-01-01T00:00:00Z", 1.5e9],
    ids=["naive", "text", "float"],
)
def test_an_instant_column_refuses_what_is_not_an_aware_datetime(tmp_path, value) -> None:
    db = Database(str(tmp_path / "app.db"))
    db.open()
    with pytest.raises(StatementError, match="Instant column was given") as info:
        store_instant(db, value)
    assert isinstance(info.value.orig, InstantError)
    assert db.query("SELECT name FROM rastrillo_migrations") == []


def test_instants_come_back_aware_in_utc_on_both_backends(db_url: str) -> None:
    db = Database(db_url)
    db.open()
    in_madrid = datetime(2031, 1, 1, 13, 0, tzinfo=UTC).astimezone(ZoneInfo("Europe/Madrid"))
    store_instant(db, in_madrid)
    with db.read() as conn:
        stored = conn.execute(select(migrations_table.c.applied_at)).scalar_one()
    assert stored == in_madrid
    assert stored.tzinfo is UTC
    db.dispose()
