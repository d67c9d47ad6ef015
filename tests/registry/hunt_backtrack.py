"""A search for patterns ``rastrillo.registry.backtrack`` accepts that a value still makes
slow: kept out of ``make test`` (its file name is not ``test_*``), since it measures
time. Run it by hand::

    .venv/bin/python -m tests.registry.hunt_backtrack [EXAMPLES] [SEED]

Hypothesis draws a pattern from a small grammar (nested quantifiers, overlapping
alternatives and classes, lazy quantifiers, empty iterations, back-references, lookarounds)
and values made of a short piece repeated (a pump) between a prefix and a suffix. A
pattern the checker refuses is skipped; for one it accepts, each value is searched as
long as the declaration lets it be (its ``max_length``, else :data:`LENGTH` characters),
under a CPU-time alarm (``re`` checks signals as it works). A search over :data:`LIMIT`
seconds is a finding: Hypothesis shrinks it to a small pattern and value and prints them.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from rastrillo.registry.backtrack import cost
from rastrillo.registry.pattern import compile_pattern, pattern_problem

LENGTH = 20_000
"""The length searched when any length is allowed (a request body allows about 1 MiB)."""
LIMIT = 0.1
"""CPU seconds past which a search is slow (twice, as a loaded machine can be slow once):
``backtrack.WORK`` steps take about 5 ms, and :data:`LENGTH` characters at ``WAYS`` steps
each about 2 ms."""

_CLASSES = [r"\w", r"\d", r"\s", r"\W", ".", "[a-z]", "[ab]", "[^b]", "[a-z0-9_]", "[ \t]", "[0a]"]
_LITERALS = ["a", "b", "-", ".", "@", " ", "0"]
_QUANTIFIERS = ["", "", "*", "+", "?", "{2}", "{0,3}", "{2,}", "{1,20}", "{16}", "*?", "+?", "??"]
_ALPHABET = "ab0_- .@!\n\tz"


def _patterns() -> st.SearchStrategy[str]:
    atom = (
        st.sampled_from(_LITERALS + _CLASSES) | st.just(r"\1") | st.sampled_from([r"\b", "^", "$"])
    )

    def wrap(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        sequence = st.lists(inner, min_size=1, max_size=3).map("".join)
        alternation = st.lists(sequence | st.just(""), min_size=1, max_size=3).map("|".join)
        groups = st.sampled_from(["(?:{})", "({})", "(?={})", "(?!{})"])
        group = st.tuples(groups, alternation).map(lambda g: g[0].format(g[1]))
        quantified = st.tuples(group, st.sampled_from(_QUANTIFIERS)).map("".join)
        return quantified | st.tuples(inner, st.sampled_from(_QUANTIFIERS)).map("".join)

    body = st.lists(st.recursive(atom, wrap, max_leaves=8), min_size=1, max_size=4).map("".join)
    return st.tuples(st.sampled_from(["", "^"]), body, st.sampled_from(["", "$"])).map("".join)


_PIECES = st.text(st.sampled_from(_ALPHABET), max_size=3)
_ATTACKS = st.tuples(_PIECES, st.text(st.sampled_from(_ALPHABET), min_size=1, max_size=4), _PIECES)


class _Slow(Exception):
    pass


def _alarm(*_: Any) -> None:
    raise _Slow


def _seconds(pattern: str, value: str) -> float:
    """CPU seconds searching ``value`` takes, or :data:`LIMIT` * 10 when it is stopped."""
    compiled = compile_pattern(pattern)
    start = time.process_time()
    signal.setitimer(signal.ITIMER_VIRTUAL, LIMIT * 10)
    try:
        compiled.search(value)
    except _Slow:
        return LIMIT * 10
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    return time.process_time() - start


tried = {"patterns": 0, "accepted": 0, "searches": 0}


@given(_patterns(), st.lists(_ATTACKS, min_size=1, max_size=4))
def _accepted_patterns_search_quickly(pattern: str, attacks: list[tuple[str, str, str]]) -> None:
    tried["patterns"] += 1
    if pattern_problem(pattern) is not None:
        return
    try:
        found = cost(pattern)
    except ValueError:
        return
    if found.longest == 0:
        return
    tried["accepted"] += 1
    length = LENGTH if found.longest is None else found.longest
    for prefix, pump, suffix in attacks:
        value = (prefix + pump * length)[: max(0, length - len(suffix))] + suffix
        tried["searches"] += 1
        seconds = _seconds(pattern, value)
        if seconds >= LIMIT:
            seconds = min(seconds, _seconds(pattern, value))
        assert seconds < LIMIT, (pattern, found, len(value), seconds)


def main() -> None:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    signal.signal(signal.SIGVTALRM, _alarm)
    run = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )(_accepted_patterns_search_quickly)
    if len(sys.argv) > 2:
        run = seed(int(sys.argv[2]))(run)
    start = time.monotonic()
    try:
        run()
    finally:
        print(tried, f"{time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
