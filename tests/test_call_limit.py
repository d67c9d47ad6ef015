"""The per-grant call limit's counter, on a clock that moves only when told to."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rastrillo.limits import CallCounter, CallLimit, Refused
from rastrillo.testing import ManualClock


def counter(calls: int = 10, seconds: float = 60) -> tuple[CallCounter, ManualClock]:
    clock = ManualClock()
    return CallCounter(CallLimit(calls=calls, window=timedelta(seconds=seconds)), clock), clock


def test_a_full_bucket_at_once_then_one_call_per_interval():
    calls, clock = counter(calls=10, seconds=60)  # one call per 6 s, once the 10 are used
    assert [calls.take("g") for _ in range(10)] == [None] * 10
    assert calls.take("g") == Refused(retry_after=6, first=True)
    clock.advance(5.9)
    assert calls.take("g") == Refused(retry_after=1, first=False)
    clock.advance(0.1)
    assert calls.take("g") is None
    assert calls.take("g") is not None
    clock.advance(60)  # a whole window idle: the bucket is full again
    assert [calls.take("g") for _ in range(10)] == [None] * 10
    assert calls.take("g") is not None


def test_a_flood_is_held_to_the_limit_however_long_it_lasts():
    calls, clock = counter(calls=120, seconds=60)
    allowed = 0
    for _ in range(10 * 60 * 100):  # ten minutes of a call every 10 ms
        allowed += calls.take("g") is None
        clock.advance(0.01)
    # The bucket at once, then one every half second: at 0.5 s, 1 s, ... 599.5 s.
    assert allowed == 120 + 1199


def test_grants_are_counted_apart():
    calls, _ = counter(calls=3)
    assert [calls.take("a") for _ in range(3)] == [None] * 3
    assert calls.take("a") is not None
    assert [calls.take("b") for _ in range(3)] == [None] * 3


def test_a_grant_s_refusals_are_reported_once_a_window():
    calls, clock = counter(calls=1, seconds=60)
    calls.take("g")
    firsts = []
    for _ in range(600):  # ten minutes of refusals, a call a second
        refused = calls.take("g")
        if refused is not None:
            firsts.append(refused.first)
        clock.advance(1)
    assert firsts.count(True) == 10 and firsts[0]


def test_memory_holds_about_the_grants_of_the_last_window():
    calls, clock = counter(calls=5, seconds=60)
    held = []
    for window in range(20):  # a thousand grants a window, new ones each window
        for n in range(1000):
            calls.take(f"g{window}-{n}")
            held.append(len(calls._keys))
        clock.advance(61)
    assert max(held) <= 2048


@pytest.mark.parametrize(
    "kwargs",
    [
        {"calls": 0},
        {"calls": -1},
        {"calls": 1.5},
        {"calls": True},
        {"window": timedelta(0)},
        {"window": 60},
    ],
)
def test_a_limit_that_cannot_be_is_refused_saying_why(kwargs):
    with pytest.raises(ValueError, match=f"CallLimit.{next(iter(kwargs))}"):
        CallLimit(**kwargs)
