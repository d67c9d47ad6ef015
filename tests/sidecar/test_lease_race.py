"""The lease's renewal racing the database, to the second, on a fake clock.

A real lease row on SQLite, measured on a clock that moves only when the test
sleeper or a slow answer moves it. A scripted lease answers each hold at once,
late (the statement ran, the answer took a while) or never (the database hangs),
and the sleeper advances the clock only once every hold in flight has answered
or hangs: so each run is the same, with no sleep and no wall clock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from rastrillo.errors import ConfigError
from rastrillo.sidecar import Lease, PassContext, Sidecar, SidecarLoop
from rastrillo.sidecar.lease import lease_table
from rastrillo.sidecar.loop import EXIT_ABANDONED
from rastrillo.storage import Database
from rastrillo.testing import ManualClock

TTL = 60.0  # renewed every 20 s; a renewal unanswered counts as lost 40 s after the last sent
HANG = "hang"


@dataclass(frozen=True)
class Fail:
    """A hold that fails (the database unreachable) after ``seconds``."""

    seconds: float


SAFETY = 10.0
"""Real seconds a pass waits to be told to stop before it gives up: only so that a failing
run ends; a passing run never waits on it."""


Step = float | str | Fail


class ScriptedLease(Lease):
    """A real lease whose holds answer as the script says: after N seconds (the statement ran
    at once, its answer arrives N seconds later), ``Fail(N)``, or ``HANG`` (no answer until
    ``unhang``)."""

    def __init__(self, db: Database, clock: ManualClock, script: list[Step]) -> None:
        super().__init__(db, ttl=TTL)
        self.clock = clock
        self.script = script
        self.unhang = threading.Event()
        self.hanging = asyncio.Event()
        self.aio = asyncio.get_running_loop()

    def hold(self) -> bool:
        step = self.script.pop(0) if self.script else 0.0
        if step == HANG:
            self.aio.call_soon_threadsafe(self.hanging.set)
            self.unhang.wait()
            return False
        if isinstance(step, Fail):
            self.clock.advance(step.seconds)
            raise OSError("the database is unreachable")
        held = super().hold()
        self.clock.advance(float(step))
        return held


class Race:
    """A sidecar loop with a scripted lease, a fake clock, and a record of each pass: when it
    started, and whether the lease row then named this holder unexpired.

    ``passes_return``: each pass returns at once (time stands still while it runs), rather
    than running until it is told to stop (time moves on while it runs). ``stubborn``: once
    told to stop, the pass runs on (time moves on through the grace) rather than returning."""

    def __init__(
        self,
        tmp_path: Path,
        script: list[Step],
        *,
        passes_return: bool,
        stubborn: bool = False,
        shutdown_grace: float = 15.0,
    ) -> None:
        self.clock = ManualClock()
        self.db = Database(str(tmp_path / "race.db"), clock=self.clock)
        self.db.open()
        self.script = script
        self.passes_return = passes_return
        self.stubborn = stubborn
        self.shutdown_grace = shutdown_grace
        self.late = 0.0
        """How late each timer fires, as on a loaded machine."""
        self.passes: list[tuple[float, bool]] = []
        self.running: PassContext | None = None

    def held_now(self) -> bool:
        row = self.db.query_one(f"SELECT holder, expires_at FROM {lease_table.name}")
        return row.holder == self.lease.holder and row.expires_at > self.clock.monotonic()

    def record(self) -> None:
        self.passes.append((self.clock.monotonic() - 1000.0, self.held_now()))

    async def sleep(self, seconds: float, wake: asyncio.Event) -> None:
        holding = self.loop._holding  # the hold in flight: time stands still until it settles
        pass_running = wake is not self.loop._stop
        if pass_running and self.told_to_stop() and not self.stubborn:
            await wake.wait()  # it returns with no time passing
        elif holding is not None and not holding.done():
            hangs = asyncio.ensure_future(self.lease.hanging.wait())
            await asyncio.wait({holding, hangs}, return_when=asyncio.FIRST_COMPLETED)
            hangs.cancel()
        elif pass_running and self.passes_return:
            await wake.wait()
        if not wake.is_set():
            self.clock.advance(seconds + self.late)

    def told_to_stop(self) -> bool:
        """Whether the pass running was told to stop (it then returns at once)."""
        return self.running is not None and self.running.stopping.is_set()

    def run(self, pass_fn: Callable[[PassContext], datetime | None]) -> int:
        def tracked(ctx: PassContext) -> datetime | None:
            self.running = ctx
            return pass_fn(ctx)

        async def main() -> int:
            self.aio = asyncio.get_running_loop()
            self.lease = ScriptedLease(self.db, self.clock, self.script)
            self.loop = SidecarLoop(
                tracked,
                db=self.db,
                lease=self.lease,
                clock=self.clock,
                sleeper=self.sleep,
                shutdown_grace=self.shutdown_grace,
            )
            return await self.loop.run(handle_signals=False)

        return asyncio.run(main())

    def stop(self) -> None:
        self.lease.unhang.set()
        self.aio.call_soon_threadsafe(self.loop.request_stop)


def test_a_renewal_the_database_never_answers_stops_the_pass_before_the_lease_can_lapse(
    tmp_path: Path,
) -> None:
    race = Race(tmp_path, [0.0, HANG], passes_return=False)
    told: list[tuple[bool, float]] = []

    def long_pass(ctx: PassContext) -> None:
        race.record()
        told.append((ctx.stopping.wait(SAFETY), race.clock.monotonic() - 1000.0))
        race.stop()

    assert race.run(long_pass) == 0
    assert race.passes == [(0.0, True)]
    # Renewed (sent) at 0, the next renewal sent at 20 hangs: at 40, two thirds of the ttl,
    # the pass is told to stop, before a standby may take the lease at 60.
    assert told == [(True, 40.0)]


def test_a_renewal_answered_late_counts_from_when_it_was_sent(tmp_path: Path) -> None:
    # The renewal sent at 20 runs at once but its answer arrives at 70: the row says the
    # lease ends at 80. Counted from the answer, the holder would skip renewing at 85 (15 s
    # after "renewing") and run a pass 5 s after the row lapsed, beside a standby's.
    race = Race(tmp_path, [0.0, 50.0], passes_return=True)
    due = [timedelta(seconds=25), timedelta(seconds=15), timedelta(seconds=15)]

    def short_passes(ctx: PassContext) -> datetime | None:
        race.record()
        if not due:
            race.stop()
            return None
        return race.clock.now() + due.pop(0)

    assert race.run(short_passes) == 0
    assert [at for at, _ in race.passes] == [0.0, 70.0, 85.0, 100.0]
    assert all(held for _, held in race.passes), race.passes


@pytest.mark.parametrize(
    ("fails_after", "told_at"),
    [
        (5.0, 40.0),  # failed at 25, held until two thirds of the ttl after 0
        (30.0, 50.0),  # failed at 50, already past them: lost as it fails
    ],
)
def test_a_renewal_that_fails_keeps_the_lease_only_until_two_thirds_of_the_ttl(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fails_after: float, told_at: float
) -> None:
    race = Race(tmp_path, [0.0, Fail(fails_after)], passes_return=False)
    told: list[tuple[bool, float]] = []

    def long_pass(ctx: PassContext) -> None:
        race.record()
        told.append((ctx.stopping.wait(SAFETY), race.clock.monotonic() - 1000.0))
        race.stop()

    assert race.run(long_pass) == 0
    assert told == [(True, told_at)]
    assert "lease renewal failed (OSError: the database is unreachable)" in caplog.text
    assert "lease lost during a pass" in caplog.text


@pytest.mark.parametrize("late", [0.0, 2.0])
def test_a_pass_that_ignores_a_lost_lease_is_abandoned_before_a_standby_can_take_it(
    tmp_path: Path, late: float
) -> None:
    # The worst case the longest grace allowed meets: the renewal sent at 20 hangs, so at 40
    # the pass is told to stop, and it runs on through the whole grace. The loop abandons it
    # (the process exits) while the row is still this holder's, so no standby's pass starts
    # beside it. At a grace of 20 the row would lapse as the pass is abandoned: refused below
    # (above 15, a quarter of the ttl, leaving a twelfth for a timer that fires late). Timers
    # that each fire 2 s late ask the pass to stop late too: its grace still counts from 40.
    grace = TTL / 4
    race = Race(tmp_path, [0.0, HANG], passes_return=False, stubborn=True, shutdown_grace=grace)
    race.late = late
    finish = threading.Event()

    def stubborn_pass(ctx: PassContext) -> None:
        finish.wait(SAFETY)

    try:
        assert race.run(stubborn_pass) == EXIT_ABANDONED
        assert race.clock.monotonic() - 1000.0 <= 40.0 + grace + late
        assert race.held_now()
        assert not Lease(race.db, ttl=TTL).hold()  # a standby looking now
    finally:
        race.lease.unhang.set()
        finish.set()


REFUSED = (
    r"shutdown_grace \({grace} s\) must be at most a quarter of its lease_ttl \({ttl} s\), or"
    r" a standby may start a pass beside one still finishing: lower shutdown_grace to"
    r" {quarter} s, or raise lease_ttl"
)


@pytest.mark.parametrize("grace", [TTL / 4 + 0.001, TTL / 3, TTL, float("nan")])
def test_a_grace_that_could_outlast_the_lease_is_refused_at_start(
    tmp_path: Path, grace: float
) -> None:
    refused = REFUSED.format(grace=f"{grace:g}", ttl="60", quarter="15")
    with pytest.raises(ConfigError, match=refused):
        Sidecar(pass_fn=lambda ctx: None, lease_ttl=TTL, shutdown_grace=grace)
    db = Database(str(tmp_path / "app.db"))
    with pytest.raises(ConfigError, match=refused):
        SidecarLoop(lambda ctx: None, db=db, lease=Lease(db, ttl=TTL), shutdown_grace=grace)


def test_the_default_grace_needs_a_lease_ttl_of_60_seconds(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "app.db"))
    assert Sidecar(pass_fn=lambda ctx: None, lease_ttl=60).shutdown_grace == 15.0
    assert SidecarLoop(lambda ctx: None, db=db, lease=Lease(db, ttl=60)).shutdown_grace == 15.0
    refused = REFUSED.format(grace="15", ttl="59", quarter="14.75")
    with pytest.raises(ConfigError, match=refused):
        Sidecar(pass_fn=lambda ctx: None, lease_ttl=59)
    with pytest.raises(ConfigError, match=refused):
        SidecarLoop(lambda ctx: None, db=db, lease=Lease(db, ttl=59))


def test_no_pass_starts_on_a_lease_that_lapsed_while_the_database_was_looked_at(
    tmp_path: Path,
) -> None:
    # Taken at 0, surely held until 40; the look at the database before the pass answers at
    # 56. A pass started then would be past its grace before its first step (abandoned, the
    # process exiting 1): the lease is taken again first, and the pass runs on it.
    race = Race(tmp_path, [0.0], passes_return=False)
    looked: list[float] = []
    check = race.db.check

    def slow_check() -> None:
        looked.append(race.clock.monotonic() - 1000.0)
        if len(looked) == 1:
            race.clock.advance(56.0)
        check()

    race.db.check = slow_check  # type: ignore[method-assign]

    def one_pass(ctx: PassContext) -> None:
        race.record()
        race.stop()
        assert ctx.stopping.wait(SAFETY)

    assert race.run(one_pass) == 0
    assert race.passes == [(56.0, True)]
    assert looked == [0.0, 56.0]
