"""The loop's schedule, to the second, on a fake clock and a fake sleeper."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from typing import Any

import pytest

from rastrillo.sidecar import PassContext, SidecarLoop
from rastrillo.sidecar.loop import EXIT_ABANDONED
from rastrillo.sidecar.planner import backoff, next_due_from
from rastrillo.testing import ManualClock

T0 = datetime(2030, 1, 1, tzinfo=UTC)


Step = Any  # a return value, an exception to raise, or a function of the clock


class Run:
    """Runs a script of pass results through the loop; records pass starts and sleeps."""

    def __init__(
        self,
        script: list[Step],
        *,
        on_sleep: Callable[[Run], None] | None = None,
        **loop_kwargs: Any,
    ) -> None:
        self.clock = ManualClock(T0)
        self.script = script
        self.contexts: list[PassContext] = []
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep
        self.loop = SidecarLoop(self.pass_fn, clock=self.clock, sleeper=self.sleep, **loop_kwargs)

    def pass_fn(self, ctx: PassContext) -> Any:
        self.contexts.append(ctx)
        step = self.script[len(self.contexts) - 1]
        if len(self.contexts) == len(self.script):
            self.aio.call_soon_threadsafe(self.loop.request_stop)
        if isinstance(step, BaseException):
            raise step
        return step(self.clock) if callable(step) else step

    async def sleep(self, seconds: float, wake: asyncio.Event) -> None:
        if wake is not self.loop._stop:  # a pass's grace: the pass returns with no time passing
            await wake.wait()
            return
        self.sleeps.append(seconds)
        self.clock.advance(seconds)
        if self.on_sleep is not None:
            self.on_sleep(self)

    def go(self) -> Run:
        async def main() -> int:
            self.aio = asyncio.get_running_loop()
            return await self.loop.run(handle_signals=False)

        assert asyncio.run(main()) == 0
        return self

    @property
    def gaps(self) -> list[float]:
        starts = [c.started_at for c in self.contexts]
        return [round((b - a).total_seconds(), 6) for a, b in pairwise(starts)]


def later(seconds: float) -> Callable[[ManualClock], datetime]:
    return lambda clock: clock.now() + timedelta(seconds=seconds)


def test_backoff_doubles_from_one_second_to_a_300_second_cap() -> None:
    run = Run([RuntimeError("down")] * 13).go()
    assert run.gaps == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    assert [backoff(n) for n in (1, 9, 10, 1000)] == [1, 256, 300, 300]


def test_a_success_resets_the_backoff() -> None:
    boom = RuntimeError("down")
    run = Run([boom, boom, None, boom, None]).go()
    assert run.gaps == [1, 2, 60, 1]


def test_nothing_scheduled_waits_the_one_minute_floor() -> None:
    run = Run([None, None, None]).go()
    assert run.gaps == [60, 60]
    assert run.sleeps == [60, 60]


def test_a_future_instant_is_honoured_exactly_in_chunks_of_at_most_a_minute() -> None:
    run = Run([later(3600), None]).go()
    assert run.gaps == [3600]
    assert run.sleeps == [60] * 60


def test_the_wait_is_measured_from_when_the_pass_returns() -> None:
    def slow(clock: ManualClock) -> datetime:
        start = clock.now()
        clock.advance(5)
        return start + timedelta(seconds=3)

    run = Run([slow, None]).go()
    assert run.gaps == [5]
    assert run.sleeps == []


def test_a_past_instant_reruns_at_once_but_at_most_ten_times_a_second(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "rastrillo.sidecar")
    run = Run([later(-30)] * 30).go()
    assert run.gaps == [0.1] * 29
    streak_warnings = [r for r in caplog.records if "already past" in r.getMessage()]
    assert len(streak_warnings) == 1


def test_a_past_instant_from_a_pass_longer_than_the_gap_reruns_with_no_sleep() -> None:
    def takes_a_while(clock: ManualClock) -> datetime:
        clock.advance(0.5)
        return clock.now()

    run = Run([takes_a_while] * 4).go()
    assert run.gaps == [0.5, 0.5, 0.5]
    assert run.sleeps == []


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (datetime(2030, 1, 1, 12, 0), ["naive datetime", "time zone"]),
        ("2030-01-01T00:00:00Z", ["returned a str", "aware datetime"]),
        (1893456000.0, ["returned a float", "aware datetime"]),
        (timedelta(minutes=5), ["returned a timedelta", "aware datetime"]),
    ],
)
def test_a_naive_datetime_or_a_wrong_type_is_a_failed_pass_naming_the_fix(
    value: object, words: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "rastrillo.sidecar")
    run = Run([value, value, None]).go()
    assert run.gaps == [1, 2]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2
    for word in words:
        assert word in errors[0]


def test_an_aware_instant_in_another_zone_is_normalised_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    normalised = next_due_from(datetime(2030, 1, 1, 14, 0, tzinfo=plus_two))
    assert normalised == datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    assert normalised is not None and normalised.tzinfo is UTC


def test_jitter_is_off_by_default_and_equal_jitter_when_enabled() -> None:
    boom = RuntimeError("down")
    plain = Run([boom] * 12).go().gaps
    jittered = Run([boom] * 12, jitter=True, rng=random.Random(7)).go().gaps
    again = Run([boom] * 12, jitter=True, rng=random.Random(7)).go().gaps
    assert jittered == again  # reproducible with the injected RNG
    assert jittered != plain
    for wait, full in zip(jittered, plain, strict=True):
        assert full / 2 <= wait <= full <= 300


def test_the_wall_clock_stepping_forward_runs_the_pass_within_a_minute() -> None:
    def step_forward_once(run: Run) -> None:
        if len(run.sleeps) == 1:
            run.clock.step(7200)

    run = Run([later(3600), None], on_sleep=step_forward_once).go()
    assert run.sleeps == [60]


def test_the_wall_clock_stepping_back_never_runs_the_pass_early() -> None:
    def step_back_once(run: Run) -> None:
        if len(run.sleeps) == 1:
            run.clock.step(-3600)

    run = Run([later(300), None], on_sleep=step_back_once).go()
    assert sum(run.sleeps) == 3900
    assert run.contexts[1].started_at >= run.contexts[0].started_at + timedelta(seconds=300)


def test_the_context_carries_the_instant_it_serves() -> None:
    run = Run([later(90), RuntimeError("x"), None]).go()
    first, second, third = run.contexts
    assert (first.first, second.first, third.first) == (True, False, False)
    assert [c.pass_id for c in run.contexts] == [1, 2, 3]
    assert first.scheduled_for == T0
    assert second.scheduled_for == T0 + timedelta(seconds=90)
    assert third.scheduled_for == second.started_at + timedelta(seconds=1)
    assert not any(c.stopping.is_set() for c in run.contexts[:-1])


def test_an_async_pass_is_awaited() -> None:
    async def async_pass(ctx: PassContext) -> datetime:
        await asyncio.sleep(0)
        if ctx.pass_id == 3:
            run.aio.call_soon_threadsafe(run.loop.request_stop)
        run.contexts.append(ctx)
        return ctx.started_at + timedelta(seconds=10)

    run = Run([])
    run.loop.pass_fn = async_pass
    assert run.go().gaps == [10, 10]


def test_a_cancelled_error_that_was_not_asked_for_is_a_failed_pass() -> None:
    async def cancels_itself_once(ctx: PassContext) -> None:
        if ctx.pass_id == 1:
            raise asyncio.CancelledError
        run.aio.call_soon_threadsafe(run.loop.request_stop)

    run = Run([])
    run.loop.pass_fn = cancels_itself_once
    run.go()
    assert run.sleeps == [1]


def test_system_exit_from_a_pass_is_not_swallowed() -> None:
    with pytest.raises(SystemExit):
        Run([SystemExit(3)]).go()


def test_one_log_line_per_pass_with_stable_keys(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "rastrillo.sidecar")
    Run([later(120), RuntimeError("db down"), RuntimeError("db down"), None]).go()
    lines = [r for r in caplog.records if r.getMessage().startswith("sidecar pass ")]
    assert len(lines) == 4
    for record in lines:
        message = record.getMessage()
        for key in ("pass_id=", "outcome=", "duration_ms=", "next_due=", "sleep_s="):
            assert key in message
    ok, fail1, fail2, last = (r.getMessage() for r in lines)
    assert "outcome=ok" in ok and "next_due=2030-01-01T00:02:00.000000Z" in ok
    assert "sleep_s=120.000" in ok
    assert [r.levelno for r in lines] == [logging.INFO, logging.ERROR, logging.ERROR, logging.INFO]
    assert "consecutive_failures=1 retry_in_s=1.000" in fail1
    assert "consecutive_failures=2 retry_in_s=2.000" in fail2
    assert "RuntimeError: db down" in fail2
    assert "next_due=none sleep_s=60.000" in last


def test_a_pass_that_ignores_the_stop_is_abandoned_once_the_grace_passes_on_the_loops_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The grace is measured and waited on the loop's clock and sleeper, as every other wait
    of the loop is: a fake clock ends it, with no real second waited."""
    clock = ManualClock(T0)
    released = threading.Event()
    slept: list[float] = []

    async def sleep(seconds: float, wake: asyncio.Event) -> None:
        slept.append(seconds)
        clock.advance(seconds)

    async def main() -> int:
        aio = asyncio.get_running_loop()

        def stubborn(ctx: PassContext) -> None:
            aio.call_soon_threadsafe(loop.request_stop)
            released.wait(10)  # never looks at ctx.stopping (10 real seconds: a failing run ends)

        loop = SidecarLoop(stubborn, clock=clock, sleeper=sleep, shutdown_grace=7.5)
        return await loop.run(handle_signals=False)

    caplog.set_level(logging.ERROR, "rastrillo.sidecar")
    try:
        assert asyncio.run(main()) == EXIT_ABANDONED
    finally:
        released.set()
    assert slept == [7.5]
    assert "outcome=abandoned duration_ms=7500: it did not stop within 7.5 s" in caplog.text
