"""How many steps Python's backtracking ``re`` takes to search a value: a small
backtracking matcher over ``re``'s own parse of the pattern, with ``re``'s order and its
stop for empty iterations, counting each character one way of matching reads (what
``rastrillo.registry.backtrack`` bounds). Tests assert on these counts, not on time.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from rastrillo.registry.backtrack import _ranges_of
from rastrillo.registry.pattern import compile_pattern

__all__ = ["TooMany", "steps"]

_WORD = re.compile(r"\w", re.ASCII)
_UNBOUNDED = 4294967295


class TooMany(Exception):
    """The search took more steps than the cap it was given."""


class _Search:
    def __init__(self, value: str, cap: int) -> None:
        self.value = value
        self.cap = cap
        self.steps = 0

    def read(self, pos: int, test: Callable[[int], bool]) -> bool:
        if pos < len(self.value) and test(ord(self.value[pos])):
            self.steps += 1
            if self.steps > self.cap:
                raise TooMany
            return True
        return False

    def word(self, pos: int) -> bool:
        return 0 <= pos < len(self.value) and _WORD.match(self.value[pos]) is not None

    def seq(self, items: list[Any], i: int, pos: int, caps: dict[int, str], k: Any) -> bool:
        """Match ``items[i:]`` at ``pos``, then the continuation ``k(pos, caps)``."""
        if i == len(items):
            return bool(k(pos, caps))
        op, av = items[i]
        name = str(op)

        def rest(p: int, c: dict[int, str]) -> bool:
            return self.seq(items, i + 1, p, c, k)

        if name in ("LITERAL", "NOT_LITERAL", "IN", "ANY"):
            if name == "LITERAL":
                test = av.__eq__
            elif name == "NOT_LITERAL":
                test = av.__ne__
            elif name == "ANY":
                test = (10).__ne__
            else:
                ranges = _ranges_of(av)
                test = lambda c: any(a <= c <= b for a, b in ranges)  # noqa: E731
            return self.read(pos, test) and rest(pos + 1, caps)
        if name == "SUBPATTERN":
            group, body = av[0], list(av[3])

            def close(p: int, c: dict[int, str]) -> bool:
                return rest(p, c if group is None else {**c, group: self.value[pos:p]})

            return self.seq(body, 0, pos, caps, close)
        if name == "GROUPREF":
            text = caps.get(av)
            if text is None:
                return False
            for j, char in enumerate(text):
                if not self.read(pos + j, ord(char).__eq__):
                    return False
            return rest(pos + len(text), caps)
        if name == "BRANCH":
            return any(self.seq(list(alt), 0, pos, caps, rest) for alt in av[1])
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, body = av[0], av[1], list(av[2])
            return self.repeat(body, low, high, name == "MAX_REPEAT", 0, -1, pos, caps, rest)
        if name == "AT":
            at = str(av)
            holds = {
                "AT_BEGINNING": pos == 0,
                "AT_BEGINNING_STRING": pos == 0,
                "AT_END_STRING": pos == len(self.value),
                "AT_END": pos == len(self.value)
                or (pos == len(self.value) - 1 and self.value[pos] == "\n"),
                "AT_BOUNDARY": self.word(pos - 1) != self.word(pos),
                "AT_NON_BOUNDARY": self.word(pos - 1) == self.word(pos),
            }[at]
            return holds and rest(pos, caps)
        if name in ("ASSERT", "ASSERT_NOT"):
            direction, body = av[0], av[1]
            start = pos if direction == 1 else pos - body.getwidth()[0]
            found: list[dict[int, str]] = []
            if start >= 0:
                self.seq(
                    list(body),
                    0,
                    start,
                    caps,
                    lambda p, c: (direction == 1 or p == pos) and not found.append(c),
                )
            if (name == "ASSERT") != bool(found):
                return False
            return rest(pos, found[0] if found else caps)
        raise ValueError(f"{name} is not modelled")

    def repeat(
        self,
        body: list[Any],
        low: int,
        high: int,
        greedy: bool,
        count: int,
        began: int,
        pos: int,
        caps: dict[int, str],
        k: Any,
    ) -> bool:
        """``re``'s REPEAT: below ``low`` iterations it must go on; past it, an iteration
        that began where this one ends (read nothing) is the last."""

        def again(p: int, c: dict[int, str]) -> bool:
            return self.repeat(body, low, high, greedy, count + 1, pos, p, c, k)

        if count < low:
            return self.seq(body, 0, pos, caps, again)
        more = (high == _UNBOUNDED or count < high) and pos != began
        if greedy:
            return (more and self.seq(body, 0, pos, caps, again)) or bool(k(pos, caps))
        return bool(k(pos, caps)) or (more and self.seq(body, 0, pos, caps, again))


def steps(pattern: str, value: str, cap: int) -> int:
    """The characters ``re``'s search of ``value`` for the declared ``pattern`` reads,
    each once per way of matching that reads it; raises :class:`TooMany` past ``cap``."""
    parsed = list(re._parser.parse(compile_pattern(pattern).pattern, re.ASCII))  # type: ignore[attr-defined]
    search = _Search(value, cap)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20 * len(value) + 1000))
    try:
        for start in range(len(value) + 1):
            if search.seq(parsed, 0, start, {}, lambda p, c: True):
                break
    finally:
        sys.setrecursionlimit(limit)
    return search.steps
