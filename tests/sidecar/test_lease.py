"""The lease row and the recorded state, on a fake wall clock."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rastrillo.sidecar import Lease, PassContext, SidecarLoop, read_state
from rastrillo.sidecar.lease import record_pass
from rastrillo.storage import Database
from rastrillo.testing import ManualClock
from tests.support import until


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db(tmp_path: Path, clock: ManualClock) -> Database:
    database = Database(str(tmp_path / "app.db"), clock=clock)
    database.open()
    return database


def test_one_holder_at_a_time_renewal_and_takeover_after_the_ttl(
    db: Database, clock: ManualClock
) -> None:
    a, b = Lease(db, ttl=10), Lease(db, ttl=10)
    assert a.hold()
    assert not b.hold()
    clock.advance(9)
    assert a.hold()  # renewed: good for another 10 s
    clock.advance(9)
    assert not b.hold()
    clock.advance(1.5)
    assert b.hold()  # a stopped renewing: b takes over
    assert not a.hold()  # and a learns it lost the lease


def test_a_wall_clock_step_neither_ends_a_lease_early_nor_delays_takeover(
    db: Database, clock: ManualClock
) -> None:
    a, b = Lease(db, ttl=10), Lease(db, ttl=10)
    assert a.hold()
    clock.step(3600)  # the wall clock jumps an hour ahead
    assert not b.hold()
    clock.step(-7200)  # and two hours back
    clock.advance(10.5)
    assert b.hold()


def test_release_hands_over_at_once_and_only_the_holder_can_release(db: Database) -> None:
    a, b = Lease(db, ttl=60), Lease(db, ttl=60)
    assert a.hold()
    b.release()
    assert not b.hold()
    a.release()
    assert b.hold()


def test_a_lease_left_before_a_reboot_is_expired(db: Database) -> None:
    assert Lease(db, ttl=3600).hold()
    db.execute("UPDATE rastrillo_sidecar_lease SET clock = 'boot:an-earlier-boot'")
    assert Lease(db, ttl=3600).hold()


def test_each_name_has_a_lease_of_its_own(db: Database) -> None:
    assert Lease(db, "shop").hold()
    assert Lease(db, "blog").hold()
    assert not Lease(db, "shop").hold()


def test_state_is_recorded_per_pass(db: Database) -> None:
    assert read_state(db) is None
    t1 = datetime(2030, 1, 1, tzinfo=UTC)
    due = t1 + timedelta(minutes=5, microseconds=250)
    record_pass(db, "default", started_at=t1, ok=True, consecutive_failures=0, next_due=due)
    t2 = t1 + timedelta(minutes=5)
    retry = t2 + timedelta(seconds=1)
    record_pass(db, "default", started_at=t2, ok=False, consecutive_failures=1, next_due=retry)
    state = read_state(db)
    assert state is not None
    assert (state.outcome, state.consecutive_failures) == ("error", 1)
    assert (state.last_pass_at, state.last_ok_at, state.last_error_at) == (t2, t1, t2)
    assert state.next_due == retry
    record_pass(db, "default", started_at=t2, ok=True, consecutive_failures=0, next_due=None)
    state = read_state(db)
    assert state is not None
    assert state.next_due is None


def test_the_loop_records_a_failure_with_the_retry_as_next_due(
    db: Database, clock: ManualClock
) -> None:
    def failing(ctx: PassContext) -> None:
        raise RuntimeError("down")

    async def stop_at_once(seconds: float, wake: asyncio.Event) -> None:
        wake.set()

    assert (
        asyncio.run(SidecarLoop(failing, db=db, sleeper=stop_at_once).run(handle_signals=False))
        == 0
    )
    state = read_state(db)
    assert state is not None
    assert (state.outcome, state.consecutive_failures) == ("error", 1)
    assert state.next_due == clock.now() + timedelta(seconds=1)


def test_a_holder_that_loses_the_lease_mid_pass_asks_the_pass_to_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = Database(str(tmp_path / "system-clock.db"))  # the loop renews on real time here
    db.open()
    thief = Lease(db, ttl=60)
    told_to_stop: list[bool] = []

    async def main() -> int:
        aio = asyncio.get_running_loop()

        def long_pass(ctx: PassContext) -> None:
            db.execute("UPDATE rastrillo_sidecar_lease SET expires_at = 0")  # as if it lapsed
            thief.hold()
            told_to_stop.append(ctx.stopping.wait(5))
            aio.call_soon_threadsafe(loop.request_stop)

        loop = SidecarLoop(long_pass, db=db, lease=Lease(db, ttl=3), shutdown_grace=0.75)
        return await loop.run(handle_signals=False)

    assert asyncio.run(main()) == 0
    assert told_to_stop == [True]
    assert "lease lost during a pass" in caplog.text


def test_on_postgresql_expiry_goes_by_the_database_clock_not_a_hosts(pg_url: str) -> None:
    here = Database(pg_url)
    here.open()
    skewed = Database(pg_url, clock=ManualClock(datetime(2100, 1, 1, tzinfo=UTC)))
    # Long enough that no stall of a loaded machine between the two holds outlasts it.
    a, b = Lease(here, ttl=2), Lease(skewed, ttl=2)
    assert a.hold()
    assert not b.hold()  # a host whose clock is a century ahead does not steal it
    # It takes over once the ttl has passed on the server's clock.
    until(b.hold, "the standby to take over", 10, every=0.05)
    assert not a.hold()
    here.dispose()
    skewed.dispose()


def test_two_processes_agree_on_the_lease_clock(db: Database) -> None:
    a, b = Lease(db, ttl=60), Lease(db, ttl=60)
    assert a.hold()
    clock = db.query_one("SELECT clock FROM rastrillo_sidecar_lease").clock
    assert clock in (f"boot:{Path('/proc/sys/kernel/random/boot_id').read_text().strip()}", "wall")
    assert not b.hold()  # the same clock name: b waits, never takes it as a stranger's


class _StuckRelease(Lease):
    """A lease whose release never reaches the database (until ``unstick``), and says when
    it has started waiting."""

    def __init__(self, db: Database, aio: asyncio.AbstractEventLoop) -> None:
        super().__init__(db, ttl=60)
        self.aio = aio
        self.stuck = asyncio.Event()
        self.unstick = threading.Event()

    def release(self) -> None:
        self.aio.call_soon_threadsafe(self.stuck.set)
        self.unstick.wait(10)  # real seconds: only so that a failing run ends


def test_a_release_that_never_answers_is_given_up_once_the_grace_passes_on_the_loops_clock(
    db: Database, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A stop gives the lease up within the shutdown grace, measured and waited on the loop's
    clock and sleeper: a fake clock ends it, with no real second waited."""
    slept: list[float] = []

    async def main() -> int:
        aio = asyncio.get_running_loop()
        lease = _StuckRelease(db, aio)

        def one_pass(ctx: PassContext) -> None:
            aio.call_soon_threadsafe(loop.request_stop)

        async def sleep(seconds: float, wake: asyncio.Event) -> None:
            # Time stands still until the release is stuck in the database (the pass returns
            # at once), then moves on by what the loop asks.
            stuck = asyncio.ensure_future(lease.stuck.wait())
            woken = asyncio.ensure_future(wake.wait())
            await asyncio.wait({stuck, woken}, return_when=asyncio.FIRST_COMPLETED)
            stuck.cancel()
            woken.cancel()
            if not wake.is_set():
                slept.append(seconds)
                clock.advance(seconds)

        loop = SidecarLoop(one_pass, db=db, lease=lease, clock=clock, sleeper=sleep)
        try:
            return await loop.run(handle_signals=False)
        finally:
            lease.unstick.set()

    assert asyncio.run(main()) == 0
    assert slept == [15.0]
    assert "the lease was not released (15 s passed)" in caplog.text


def test_a_standby_looks_at_a_held_lease_once_a_quarter_of_its_ttl(
    db: Database, clock: ManualClock
) -> None:
    """A standby does not spin: each look at the lease another process holds is followed by
    one sleep of a quarter of the ttl. (What that costs a standby in CPU is a figure of
    bench/bench_sidecar_takeover.py.)"""
    assert Lease(db, ttl=8).hold()  # another process's, held for the whole test
    looks: list[int] = []
    slept: list[float] = []

    class Looking(Lease):
        def hold(self) -> bool:
            looks.append(len(slept))
            return super().hold()

    def no_pass(ctx: PassContext) -> None:
        raise AssertionError("a standby ran a pass")

    async def main() -> int:
        async def sleep(seconds: float, wake: asyncio.Event) -> None:
            if len(slept) == 4:  # stopped: the release's wait, until the release is done
                await wake.wait()
                return
            slept.append(seconds)
            if len(slept) == 4:
                loop.request_stop()

        loop = SidecarLoop(
            no_pass, db=db, lease=Looking(db, ttl=8), shutdown_grace=2, clock=clock, sleeper=sleep
        )
        return await loop.run(handle_signals=False)

    assert asyncio.run(main()) == 0
    assert looks == [0, 1, 2, 3]  # one look before each sleep
    assert slept == [2.0] * 4
