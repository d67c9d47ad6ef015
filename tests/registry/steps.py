"""How many steps Python's backtracking ``re`` takes to search a value: a small
backtracking matcher over ``re``'s own parse of the pattern, with ``re``'s order and its
stop for empty iterations, counting each character one way of matching reads (what
``rastrillo.registry.backtrack`` bounds). Tests assert on these counts, not on time.

The parse is turned into nested matchers once per value, each character test answered
for every position of the value up front: the searches run to millions of steps, and
looking the parse's items up again at each step took most of test_backtrack's time.
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

Then = Callable[[int, dict[int, str]], bool]
"""What follows a matcher: given where it ended and the groups read, whether the rest
of the pattern matches from there."""
Matcher = Callable[[int, dict[int, str], Then], bool]
"""A part of the pattern: whether it matches at a position, then ``Then`` does."""


class TooMany(Exception):
    """The search took more steps than the cap it was given."""


class _Search:
    def __init__(self, value: str, cap: int) -> None:
        self.value = value
        self.cap = cap
        self.steps = 0
        self._word = [_WORD.match(char) is not None for char in value]
        self._reads: dict[int, list[bool]] = {}
        """Of each character matcher (by id), whether it reads the value's character at
        each position."""

    def read(self, pos: int) -> None:
        """Count one character read; past the cap, stop the search."""
        self.steps += 1
        if self.steps > self.cap:
            raise TooMany

    def word(self, pos: int) -> bool:
        return 0 <= pos < len(self.value) and self._word[pos]

    def seq(self, items: Any) -> Matcher:
        """The matcher of ``items`` one after the other."""
        parts = [self.item(op, av) for op, av in items]

        def at(i: int) -> Matcher:
            if i == len(parts):
                return lambda pos, caps, k: bool(k(pos, caps))
            if i == len(parts) - 1:
                return parts[i]
            part, rest = parts[i], at(i + 1)
            reads = self._reads.get(id(part))
            if reads is not None:  # a character: no continuation to make for it

                def char_then(pos: int, caps: dict[int, str], k: Then) -> bool:
                    if not reads[pos]:
                        return False
                    self.read(pos)
                    return rest(pos + 1, caps, k)

                return char_then
            return lambda pos, caps, k: part(pos, caps, lambda p, c: rest(p, c, k))

        return at(0)

    def item(self, op: Any, av: Any) -> Matcher:
        name = str(op)
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
            reads = [bool(test(ord(char))) for char in self.value] + [False]

            def char(pos: int, caps: dict[int, str], k: Then) -> bool:
                if not reads[pos]:
                    return False
                self.read(pos)
                return bool(k(pos + 1, caps))

            self._reads[id(char)] = reads
            return char
        if name == "SUBPATTERN":
            group, body = av[0], self.seq(av[3])
            if group is None:
                return body
            return lambda pos, caps, k: body(
                pos, caps, lambda p, c: k(p, {**c, group: self.value[pos:p]})
            )
        if name == "GROUPREF":

            def groupref(pos: int, caps: dict[int, str], k: Then) -> bool:
                text = caps.get(av)
                if text is None:
                    return False
                for j, char in enumerate(text):
                    if self.value[pos + j : pos + j + 1] != char:
                        return False
                    self.read(pos + j)
                return bool(k(pos + len(text), caps))

            return groupref
        if name == "BRANCH":
            alternatives = [self.seq(alt) for alt in av[1]]
            return lambda pos, caps, k: any(alt(pos, caps, k) for alt in alternatives)
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            return self.repeat(av[0], av[1], self.seq(av[2]), name == "MAX_REPEAT")
        if name == "AT":
            holds = self.at(str(av))
            return lambda pos, caps, k: holds(pos) and bool(k(pos, caps))
        if name in ("ASSERT", "ASSERT_NOT"):
            return self.lookaround(name == "ASSERT", av[0], av[1])
        raise ValueError(f"{name} is not modelled")

    def repeat(self, low: int, high: int, body: Matcher, greedy: bool) -> Matcher:
        """``re``'s REPEAT: below ``low`` iterations it must go on; past it, an iteration
        that began where this one ends (read nothing) is the last."""

        def iteration(count: int, began: int, pos: int, caps: dict[int, str], k: Then) -> bool:
            def again(p: int, c: dict[int, str]) -> bool:
                return iteration(count + 1, pos, p, c, k)

            if count < low:
                return body(pos, caps, again)
            more = (high == _UNBOUNDED or count < high) and pos != began
            if greedy:
                return (more and body(pos, caps, again)) or bool(k(pos, caps))
            return bool(k(pos, caps)) or (more and body(pos, caps, again))

        return lambda pos, caps, k: iteration(0, -1, pos, caps, k)

    def at(self, at: str) -> Callable[[int], bool]:
        """Whether the zero-width ``AT_...`` assertion ``at`` holds at a position."""
        end = len(self.value)
        return {
            "AT_BEGINNING": lambda pos: pos == 0,
            "AT_BEGINNING_STRING": lambda pos: pos == 0,
            "AT_END_STRING": lambda pos: pos == end,
            "AT_END": lambda pos: pos == end or (pos == end - 1 and self.value[pos] == "\n"),
            "AT_BOUNDARY": lambda pos: self.word(pos - 1) != self.word(pos),
            "AT_NON_BOUNDARY": lambda pos: self.word(pos - 1) == self.word(pos),
        }[at]

    def lookaround(self, positive: bool, direction: int, parsed: Any) -> Matcher:
        body, width = self.seq(parsed), parsed.getwidth()[0]

        def look(pos: int, caps: dict[int, str], k: Then) -> bool:
            start = pos if direction == 1 else pos - width
            found: list[dict[int, str]] = []
            if start >= 0:
                body(
                    start,
                    caps,
                    lambda p, c: (direction == 1 or p == pos) and not found.append(c),
                )
            if positive != bool(found):
                return False
            return bool(k(pos, found[0] if found else caps))

        return look


def steps(pattern: str, value: str, cap: int) -> int:
    """The characters ``re``'s search of ``value`` for the declared ``pattern`` reads,
    each once per way of matching that reads it; raises :class:`TooMany` past ``cap``."""
    parsed = re._parser.parse(compile_pattern(pattern).pattern, re.ASCII)  # type: ignore[attr-defined]
    search = _Search(value, cap)
    match = search.seq(parsed)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 40 * len(value) + 1000))
    try:
        for start in range(len(value) + 1):
            if match(start, {}, lambda p, c: True):
                break
    finally:
        sys.setrecursionlimit(limit)
    return search.steps
