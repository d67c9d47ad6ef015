"""The one clock: what time it is, for sessions, consent, audit, throttle and the sidecar.

Every part of the framework asks a `Clock` (the one its `Database` carries),
never ``datetime.now`` or ``time.time`` directly, so a test injects one
settable clock and moves all of them at once.

``now()`` is the wall clock as an aware UTC ``datetime``: an instant, the
one form instants take in the framework (stored by
:class:`rastrillo.storage.Instant`). ``monotonic()`` is for measuring spans
within one process: it never steps when the wall clock is set.

Everything the framework keeps or decides by asks the clock: an expiry, a due
instant, a row's time, a call's duration, a grace. The log's once-a-window filter
(``logs.RepeatFilter``) serves the whole process, not one app, so it asks the
system clock unless a test gives it another. A wait on something real
(a thread's condition, a lock, a pooled connection's idleness, a child
process) is bounded in real seconds, ``time.monotonic`` beside the primitive
that waits: a fake clock could not wake it. Those are the audit writer's
waits, the pool's ping after idleness, the workers' supervisor and the test
server's join.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The wall clock, an aware ``datetime`` in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that only moves forward; meaningful within one process."""
        ...


class SystemClock:
    """The machine's clocks."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()


class InstantError(ValueError):
    """A value that is not an instant the framework can keep."""


def as_instant(value: object, source: str = "got") -> datetime:
    """An aware ``datetime`` as the same instant in UTC; `InstantError` for anything else.

    Naive datetimes are refused (their zone is a guess), and so are aware
    ones whose instant falls outside the years 1-9999 once in UTC
    (``datetime.max`` at UTC-1, say). ``source`` starts the error message
    ("the sidecar pass returned").
    """
    if not isinstance(value, datetime):
        raise InstantError(
            f"{source} a {type(value).__name__}; give an aware datetime "
            "(e.g. datetime.now(UTC) + timedelta(minutes=5))"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise InstantError(
            f"{source} a naive datetime ({value.isoformat()}); give it a time zone "
            "(e.g. datetime.now(UTC), or .replace(tzinfo=UTC) if it is in UTC)"
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InstantError(
            f"{source} {value.isoformat()}, which is outside the years 1-9999 in UTC; "
            "give an instant within them"
        ) from None
