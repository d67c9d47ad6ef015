"""The planner alone: how a pass ended, the failures before it and the time → the plan."""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

from rastrillo.sidecar.planner import MIN_PASS_GAP, Streaks, Wake, plan_next

NOW = datetime(2030, 1, 1, tzinfo=UTC)
MONO = 5000.0


def plan(result: object = None, error: BaseException | None = None, **kw: object):
    args: dict = dict(
        result=result,
        error=error,
        streaks=Streaks(),
        now=NOW,
        monotonic=MONO,
        started_monotonic=MONO - 2,
        pass_id=7,
        duration_ms=2000.0,
    )
    args.update(kw)
    return plan_next(**args)


def test_a_failure_backs_off_on_the_monotonic_clock_and_records_the_retry() -> None:
    p = plan(error=RuntimeError("db down"), streaks=Streaks(failures=3))
    assert (p.ok, p.streaks) == (False, Streaks(failures=4))
    assert p.next_due == NOW + timedelta(seconds=8)
    assert p.wake == Wake(at=NOW + timedelta(seconds=8), by=MONO + 8, not_before=MONO - 2 + 0.1)
    assert p.log_level == logging.ERROR
    assert "pass_id=7 outcome=error duration_ms=2000" in p.log_line
    assert "consecutive_failures=4 retry_in_s=8.000 error=RuntimeError: db down" in p.log_line


def test_a_success_resets_the_failures_and_keeps_the_instant_as_it_is() -> None:
    due = NOW + timedelta(minutes=5)
    p = plan(result=due.astimezone(timezone(timedelta(hours=-3))), streaks=Streaks(failures=9))
    assert (p.ok, p.streaks, p.next_due, p.wake.by) == (True, Streaks(), due, None)
    assert p.log_level == logging.INFO
    assert p.log_line.endswith("next_due=2030-01-01T00:05:00.000000Z sleep_s=300.000")


def test_nothing_scheduled_polls_after_the_floor_and_records_none() -> None:
    p = plan(result=None)
    assert (p.next_due, p.wake.by) == (None, MONO + 60)
    assert "next_due=none sleep_s=60.000" in p.log_line


def test_an_unusable_result_is_a_failure_saying_why() -> None:
    p = plan(result=datetime.max.replace(tzinfo=timezone(-timedelta(hours=1))))
    assert not p.ok and p.streaks.failures == 1
    assert "outside the years 1-9999 in UTC" in p.log_line


def test_a_past_instant_warns_once_at_the_tenth_in_a_row() -> None:
    streaks, warnings = Streaks(), []
    for _ in range(12):
        p = plan(result=NOW - timedelta(seconds=1), streaks=streaks)
        streaks = p.streaks
        warnings.append(p.warning)
    assert [w is not None for w in warnings].count(True) == 1 and warnings[9] is not None
    assert p.wake.remaining(NOW, MONO) == 0.0  # the pass took longer than the gap


def test_the_wait_takes_the_sooner_clock_and_never_runs_before_the_gap() -> None:
    wake = Wake(at=NOW + timedelta(seconds=30), by=MONO + 30, not_before=MONO + MIN_PASS_GAP)
    assert wake.remaining(NOW + timedelta(hours=1), MONO) == pytest.approx(MIN_PASS_GAP)
    assert wake.remaining(NOW - timedelta(hours=1), MONO) == 30  # wall stepped back
    assert Wake(at=NOW, by=None, not_before=MONO).remaining(NOW - timedelta(hours=1), MONO) == 3600


def test_equal_jitter_stays_within_half_and_whole() -> None:
    p = plan(error=RuntimeError("x"), streaks=Streaks(failures=5), jitter=random.Random(1))
    assert 16 <= (p.next_due - NOW).total_seconds() <= 32
