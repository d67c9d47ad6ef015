"""The sidecar's schedule, decided without doing anything.

Given how a pass ended, the failures before it and the time, `plan_next`
says when the next pass starts, what to record and what to log. It reads no
clock and sleeps on nothing, so every rule of the schedule is a plain
function of its arguments; `rastrillo.sidecar.loop` runs it.

Time: "is it due?" is asked of the wall clock (a due instant is a wall-clock
fact); a wait that is a span (a backoff, the polling floor, the gap between
passes) is measured on the monotonic clock, so a clock step neither runs a
pass early nor holds it back for long.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from rastrillo.clock import InstantError, as_instant

POLL_FLOOR = 60.0
"""Seconds to wait after a pass that reports nothing scheduled."""
BACKOFF_INITIAL = 1.0
BACKOFF_CAP = 300.0
MIN_PASS_GAP = 0.1
"""Seconds between pass starts at the least: at most 10 passes a second, whatever a pass returns."""
PAST_DUE_WARN_STREAK = 10


class PassResultError(TypeError):
    """A pass returned something other than an aware datetime or None."""


def next_due_from(result: object, source: str = "the sidecar pass") -> datetime | None:
    """The next due instant in UTC, or None; a `PassResultError` for anything else."""
    if result is None:
        return None
    try:
        return as_instant(result, f"{source} returned")
    except InstantError as exc:
        raise PassResultError(str(exc)) from None


def backoff(failures: int) -> float:
    """The wait after the given number of consecutive failures: 1, 2, 4 … 256, 300, 300 s."""
    return min(BACKOFF_INITIAL * 2 ** min(failures - 1, 16), BACKOFF_CAP)


def equal_jitter(wait: float, rng: random.Random) -> float:
    """A wait in [wait/2, wait]: spreads retries without the near-zero waits of full jitter."""
    return wait / 2 + rng.uniform(0, wait / 2)


@dataclass(frozen=True)
class Streaks:
    """What the schedule remembers from pass to pass."""

    failures: int = 0
    past_due: int = 0


@dataclass(frozen=True)
class Wake:
    """When the next pass starts: at ``at`` on the wall clock, or at ``by`` on the
    monotonic clock if that comes first, and never before ``not_before`` (monotonic)."""

    at: datetime
    by: float | None
    not_before: float

    def remaining(self, now: datetime, monotonic: float) -> float:
        """Seconds left to wait, as of the given readings of the two clocks."""
        left = (self.at - now).total_seconds()
        if self.by is not None:
            left = min(left, self.by - monotonic)
        return max(left, self.not_before - monotonic, 0.0)


@dataclass(frozen=True)
class Plan:
    """What follows a completed pass."""

    streaks: Streaks
    wake: Wake
    ok: bool
    next_due: datetime | None
    """What to record as the next due: the pass's answer, or the retry after a failure."""
    error: BaseException | None
    log_level: int
    log_line: str
    warning: str | None
    """Said once when a pass keeps returning instants already past."""


def plan_next(
    *,
    result: object,
    error: BaseException | None,
    streaks: Streaks,
    now: datetime,
    monotonic: float,
    started_monotonic: float,
    pass_id: int,
    duration_ms: float,
    jitter: random.Random | None = None,
) -> Plan:
    """The plan after pass ``pass_id``, which returned ``result`` or raised ``error``."""
    due: datetime | None = None
    if error is None:
        try:
            due = next_due_from(result)
        except PassResultError as exc:
            error = exc
    by: float | None = None
    warning = None
    if error is not None:
        failures = streaks.failures + 1
        wait = backoff(failures)
        if jitter is not None:
            wait = equal_jitter(wait, jitter)
        at, by = now + timedelta(seconds=wait), monotonic + wait
        recorded: datetime | None = at
        next_streaks = Streaks(failures=failures)
    elif due is None:
        at, by = now + timedelta(seconds=POLL_FLOOR), monotonic + POLL_FLOOR
        recorded = None
        next_streaks = Streaks()
    else:
        at = recorded = due
        past_due = streaks.past_due + 1 if due <= now else 0
        if past_due == PAST_DUE_WARN_STREAK:
            warning = (
                "sidecar: the pass keeps returning an instant already past; "
                f"re-running at most {round(1 / MIN_PASS_GAP)} times a second"
            )
        next_streaks = Streaks(past_due=past_due)
    wake = Wake(at=at, by=by, not_before=started_monotonic + MIN_PASS_GAP)
    sleep_s = wake.remaining(now, monotonic)
    line = (
        f"sidecar pass pass_id={pass_id} outcome={'ok' if error is None else 'error'} "
        f"duration_ms={duration_ms:.0f} next_due={_utc(recorded)} sleep_s={sleep_s:.3f}"
    )
    if error is not None:
        line += (
            f" consecutive_failures={next_streaks.failures} retry_in_s={sleep_s:.3f}"
            f" error={type(error).__name__}: {error}"
        )
    return Plan(
        streaks=next_streaks,
        wake=wake,
        ok=error is None,
        next_due=recorded,
        error=error,
        log_level=logging.INFO if error is None else logging.ERROR,
        log_line=line,
        warning=warning,
    )


def _utc(instant: datetime | None) -> str:
    if instant is None:
        return "none"
    return instant.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
