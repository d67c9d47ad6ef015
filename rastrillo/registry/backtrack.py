"""How long Python's backtracking ``re`` can take to search a value for a declared
``pattern``, decided once, when the arg is declared.

A model chooses every value, so a pattern that can take exponential time (``^(a+)+$``:
thirty characters take seconds) would let it stall the whole server, and one that takes
time growing as a power of the value's length (``^[^@]+\\.[^@]+$``: 30,000 characters
take four seconds) would too, unless the value is short. :func:`backtracking_problem`
refuses the first always and the second unless ``max_length`` keeps the work small, so
no runtime check (a timeout, a thread) is needed and a check costs nothing per call.

How it decides (the method of ReDoS checkers such as recheck, after Weber and Seidl's
ambiguity of automata): the pattern ``re`` runs (:func:`compile_pattern`'s rewriting) is
parsed by ``re``'s own parser and built into an automaton whose states are the
pattern's character positions. Backtracking tries every way of matching a prefix of the
value before it gives up, once from each start position (a search), so its time is the
number of those ways. An edge is kept once per way ``re`` can take it (``(x|x)`` is two
edges; an iteration that read nothing ends in one more way on, as ``re`` ends it:
``(?:x?)*``), and a search is a loop that skips characters before the pattern starts.

- *Exponential*: some position can loop back to itself on one text in two different
  ways (``(a+)+``, ``(a|a)*``, ``(\\w+\\s?)*``).
- *Power k*: a chain of k loops, each able to read the same text as it, as the path
  from it to the next, as the next (``[^@]+\\.[^@]+``, or ``[a-z]+@`` searched
  unanchored: the skipping loop, then ``[a-z]+``).

The steps are counted length by length, the most any text of that length can take,
until they pass :data:`WORK` or repeat: never extrapolated, as a pattern's growth can
start late (after ``(?:b{16}){16}``'s 256 characters).

It errs only towards refusing: a bounded repetition wider than :data:`_COPIES` counts as
unbounded, a back-reference as a copy of its group (wherever the group is, a lookaround
included) that can fail at its end, an assertion as always passing, and a lookaround as
run at every place it can be reached. A state the search cannot fail after (the rest of
the pattern matches whatever follows: ``\\S+`` unanchored) ends it, as it ends ``re``'s
search; so does a start the pattern can match nothing at (``([a-z]+,)*`` unanchored).
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field

from rastrillo.registry.pattern import compile_pattern

# `typing.TYPE_CHECKING` without importing `typing` (as `declare` does).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, TypeVar

    Node = TypeVar("Node")

__all__ = ["WAYS", "WORK", "Cost", "backtracking_problem", "cost", "most_steps"]

WORK = 500_000
"""The most steps (ways ``re`` follows, one character each) a declaration may let one
search take: at most about a tenth of a second of ``re``'s time."""
_COPIES = 16
"""A bounded repetition up to this wide is modelled exactly; a wider one as unbounded."""
_POSITIONS = 2_000
"""More character positions than this and the pattern is too large to check."""
_WALKED = 16
"""Nodes of empty paths a step covers. ``re`` walks a state's empty paths (``(?:)*``,
``(?=){2,}``, empty alternatives) each time a way reaches it, reading nothing: a way at a
state whose paths pass more nodes than this costs a step per node past them, as ``re``
takes about that long per node (an ordinary pattern's paths pass fewer, and cost 1;
``(?:|){2,}(|){2,}$``'s pass hundreds at every character)."""
_SETS = 16
"""More :data:`Ways` than this after some length and they are merged (:func:`_merged`)."""
_STEPS = 200_000
"""The analysis's own budget: past it, the pattern is too intricate to check."""
_TOP = 0x110000
_PLAIN, _BEGIN, _CHECK, _ENTER = 0, 1, 2, 3
"""Kinds of empty edge: plain, ``^`` (holds only before the first character), any other
assertion (``$``, ``\\b``, a lookaround), and the start of a loop's iteration."""


class _TooComplex(Exception):
    """The analysis ran past its budget, or met syntax it does not model."""


class _Budget:
    """The steps the analysis of one pattern may still take (:data:`_STEPS` in all)."""

    def __init__(self) -> None:
        self.left = _STEPS

    def spend(self, steps: int = 1) -> None:
        self.left -= steps
        if self.left < 0:
            raise _TooComplex


def _ranges_of(items: Iterable[tuple[Any, Any]]) -> list[tuple[int, int]]:
    """The code point ranges a parsed ``[...]`` (or one of its items) matches; with
    ``re.ASCII`` set, as :func:`compile_pattern` sets it."""
    out: list[tuple[int, int]] = []
    negate = False
    for op, av in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            out.append((av, av))
        elif name == "RANGE":
            out.append((av[0], av[1]))
        elif name == "CATEGORY":
            out += _CATEGORIES.get(str(av), [(0, _TOP - 1)])
        else:  # an item this model does not know matches anything: errs towards refusing
            out.append((0, _TOP - 1))
    return _complement(out) if negate else _merge(out)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return merged


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, start = [], 0
    for low, high in _merge(ranges):
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start < _TOP:
        out.append((start, _TOP - 1))
    return out


_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_SPACE = [(0x09, 0x0D), (0x20, 0x20)]
_CATEGORIES = {
    "CATEGORY_DIGIT": _DIGIT,
    "CATEGORY_NOT_DIGIT": _complement(_DIGIT),
    "CATEGORY_WORD": _WORD,
    "CATEGORY_NOT_WORD": _complement(_WORD),
    "CATEGORY_SPACE": _SPACE,
    "CATEGORY_NOT_SPACE": _complement(_SPACE),
}
"""``re``'s classes under ``re.ASCII``."""


@dataclass
class _Nfa:
    """A Thompson automaton: numbered nodes, empty edges, and character steps."""

    empty: list[list[tuple[int, int]]] = field(default_factory=list)
    """Each node's empty edges, as (target, kind)."""
    steps: list[tuple[int, list[tuple[int, int]], int]] = field(default_factory=list)
    """Each character position: (from node, the code point ranges it reads, to node)."""
    looks: dict[int, Any] = field(default_factory=dict)
    """The node a lookaround's check starts from → the parsed lookaround body."""
    groups: dict[int, Any] = field(default_factory=dict)
    """Each group's number → its parsed body (:func:`_groups`)."""

    def node(self) -> int:
        self.empty.append([])
        return len(self.empty) - 1

    def edge(self, start: int, end: int, kind: int = _PLAIN) -> None:
        self.empty[start].append((end, kind))

    def build(self, items: Any, start: int) -> int:
        """Add ``items`` (a parsed sequence) after node ``start``; return its end node."""
        for op, av in items:
            start = self._item(str(op), av, start)
        return start

    def _item(self, name: str, av: Any, start: int) -> int:
        if name in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
            if name == "LITERAL":
                ranges = [(av, av)]
            elif name == "NOT_LITERAL":
                ranges = _complement([(av, av)])
            elif name == "ANY":
                ranges = [(0, _TOP - 1)]
            else:
                ranges = _ranges_of(av)
            end = self.node()
            self.steps.append((start, ranges, end))
            if len(self.steps) > _POSITIONS:
                raise _TooComplex
            return end
        if name == "SUBPATTERN":
            return self.build(av[3], start)
        if name == "GROUPREF":
            # A copy of the group, read as the group can, then a check: it reads exactly
            # what the group read, so it can fail part way, or where the group could
            # match nothing (the search does not end inside it).
            end = self.node()
            self.edge(self.build(self.groups.get(av, []), start), end, _CHECK)
            return end
        if name == "BRANCH":
            end = self.node()
            for alternative in av[1]:
                first = self.node()
                self.edge(start, first)
                self.edge(self.build(alternative, first), end)
            return end
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            return self._repeat(av[0], av[1], av[2], start)
        if name == "AT":
            end = self.node()
            self.edge(start, end, _BEGIN if str(av) == "AT_BEGINNING" else _CHECK)
            return end
        if name in ("ASSERT", "ASSERT_NOT"):
            check, end = self.node(), self.node()
            self.looks[check] = av[1]
            self.edge(start, check)
            self.edge(check, end, _CHECK)
            return end
        raise _TooComplex  # syntax this model does not know: refused, never guessed

    def _repeat(self, low: int, high: int, body: Any, start: int) -> int:
        unbounded = high - low > _COPIES  # MAXREPEAT, re's "no bound", is 4294967295
        for _ in range(min(low, _COPIES)):
            start = self.build(body, start)
        if unbounded or low > _COPIES:
            loop, first, end = self.node(), self.node(), self.node()
            self.edge(start, loop)
            self.edge(loop, first, _ENTER)
            self.edge(self.build(body, first), loop)
            self.edge(loop, end)
            return end
        end = self.node()
        for _ in range(high - low):  # each optional copy: skip to the end, or read it
            self.edge(start, end)
            start = self.build(body, start)
        self.edge(start, end)
        return end


@dataclass
class _Graph:
    """The automaton over character positions: state 0 is the start of the value, state
    1 the search's loop over the characters it skips, state ``i + 2`` position ``i``."""

    labels: list[int]
    """Each state's characters, as a bit set over the classes every position splits into."""
    edges: list[list[tuple[int, int]]]
    """Each state's edges as (target, how many ways ``re`` takes it)."""
    looks: list[list[int]]
    """Each state's lookarounds (their check nodes) run after it, before the next step."""
    weights: list[int]
    """The steps a way at each state costs: 1, or more where its empty paths are many."""


def _graph(nfa: _Nfa, start: int, accept: int, searched: bool, budget: _Budget) -> _Graph:
    """The position automaton of ``nfa``, each edge counted once per empty path ``re``
    can take to it, without a state the search cannot fail after going anywhere."""
    count = len(nfa.steps) + 2
    leaving: dict[int, list[int]] = {}
    for i, (source, _, _) in enumerate(nfa.steps):
        leaving.setdefault(source, []).append(i + 2)

    def closure(node: int, begin: bool) -> tuple[dict[int, int], list[int], bool, int]:
        """Every position reached from ``node`` by empty paths, counted per path; the
        lookarounds passed; whether the end is reached without a check; the nodes the
        paths pass, as ``re`` walks them.

        An iteration begun on the path has read nothing when it ends: ``re`` ends it
        all the same (one more way on to what follows the loop, besides not beginning
        it), then begins no other at this character (its stop for empty iterations)."""
        reached: dict[int, int] = {}
        looks: list[int] = []
        done = False
        stack: list[tuple[int, bool, frozenset[int]]] = [(node, False, frozenset())]
        walked = 0
        while stack:
            here, checked, entered = stack.pop()
            budget.spend()
            walked += 1
            for position in leaving.get(here, ()):
                reached[position] = reached.get(position, 0) + 1
            if here in nfa.looks and here not in looks:
                looks.append(here)
            if here == accept and not checked:
                done = True
            for target, kind in nfa.empty[here]:
                if (kind == _BEGIN and not begin) or (kind == _ENTER and target in entered):
                    continue
                stack.append(
                    (
                        target,
                        checked or kind == _CHECK,
                        entered | {target} if kind == _ENTER else entered,
                    )
                )
        return reached, looks, done, walked

    everything = [(0, _TOP - 1)]
    cuts = sorted(
        {0, _TOP} | {b for _, r, _ in nfa.steps for low, high in r for b in (low, high + 1)}
    )

    def mask(ranges: list[tuple[int, int]]) -> int:
        bits = 0
        for i, (low, high) in enumerate(itertools.pairwise(cuts)):
            if any(a <= low and high - 1 <= b for a, b in ranges):
                bits |= 1 << i
        return bits

    labels = _classes([0, mask(everything)] + [mask(r) for _, r, _ in nfa.steps])
    edges: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    looks: list[list[int]] = [[] for _ in range(count)]
    final = [False] * count
    weights = [1] * count
    for state in range(count):
        if state == 1 and not searched:
            continue
        node = start if state < 2 else nfa.steps[state - 2][2]
        reached, looks[state], final[state], walked = closure(node, begin=state == 0)
        weights[state] = max(1, walked - _WALKED)
        edges[state] = sorted(reached.items())
        if searched and state < 2 and not final[state]:
            # On to the next start, unless the pattern can match nothing unchecked here:
            # then one of the ways from this start matches, and the search ends.
            edges[state].append((1, 1))
    # A state after which every way on ends the match unchecked: the search succeeds there.
    done = set(s for s in range(count) if final[s])
    changed = True
    while changed:
        changed = False
        for s in list(done):
            if any(t not in done for t, _ in edges[s]):
                done.discard(s)
                changed = True
    for s in done:
        edges[s] = []
    return _Graph(labels, edges, looks, weights)


def _classes(labels: list[int]) -> list[int]:
    """``labels`` over one bit per class of characters no label tells apart (``\\t`` and
    a space, for ``[^@\\s]`` and ``@``): each later step tries each class once."""
    classes: dict[tuple[bool, ...], int] = {}
    renamed = [0] * len(labels)
    for bit in range(max(labels).bit_length()):
        holds = tuple(bool(label >> bit & 1) for label in labels)
        new = classes.setdefault(holds, len(classes))
        for i, held in enumerate(holds):
            if held:
                renamed[i] |= 1 << new
    return renamed


def _reachable(graph: _Graph) -> list[int]:
    seen, stack = {0}, [0]
    while stack:
        for target, _ in graph.edges[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return sorted(seen)


def _components(
    nodes: list[Node], successors: Callable[[Node], Iterable[Node]]
) -> list[list[Node]]:
    """Tarjan's strongly connected components of ``nodes``, without recursion, in
    reverse topological order (a component after every one it reaches)."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    on_stack: set[Node] = set()
    stack: list[Node] = []
    out: list[list[Node]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(successors(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(successors(child))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    out.append(component)
    return out


def _exponential(graph: _Graph, loop: set[int], budget: _Budget) -> bool:
    """Whether some state of ``loop`` (one component) goes back to itself on one text in
    two ways: in the product of the component with itself, a component holding a pair
    of one state and a pair of two, or two ways from one pair of equals to another."""

    def successors(pair: tuple[int, int]) -> list[tuple[int, int]]:
        budget.spend()
        p, q = pair
        return [
            (a, b)
            for a, _ in graph.edges[p]
            if a in loop
            for b, _ in graph.edges[q]
            if b in loop and graph.labels[a] & graph.labels[b]
        ]

    pairs = [(p, q) for p in loop for q in loop]
    for component in _components(pairs, successors):
        members = set(component)
        if not any(p == q for p, q in members):
            continue
        if any(p != q for p, q in members):
            return True
        for p, _ in members:
            if any(t in loop and (t, t) in members and ways > 1 for t, ways in graph.edges[p]):
                return True
    return False


def _linked(
    graph: _Graph, first: set[int], between: set[int], second: set[int], budget: _Budget
) -> bool:
    """Whether a state p of loop ``first`` and q of loop ``second`` read one text as
    p → p, p → q and q → q (the three in step, from (p, p, q) to (p, q, q))."""
    for p in first:
        for q in second:
            seen = {(p, p, q)}
            stack = [(p, p, q)]
            while stack:
                a, b, c = stack.pop()
                budget.spend()
                for x, _ in graph.edges[a]:
                    if x not in first:
                        continue
                    for y, _ in graph.edges[b]:
                        if y not in between:
                            continue
                        common = graph.labels[x] & graph.labels[y]
                        if not common:
                            continue
                        for z, _ in graph.edges[c]:
                            if z not in second or not common & graph.labels[z]:
                                continue
                            if (x, y, z) == (p, q, q):
                                return True
                            if (x, y, z) not in seen:
                                seen.add((x, y, z))
                                stack.append((x, y, z))
    return False


Ways = tuple[tuple[int, int], ...]
"""Where ``re`` can be after some text: each state, with how many ways it got there."""


class _Work:
    """The most steps ``re`` can take on a value of n characters, for every n: the
    automaton run on every :data:`Ways` it can reach, one character (class) at a time,
    each way alive after m characters costing one step. Counts stop at :data:`WORK` + 1.

    Once the set of :data:`Ways` after m characters repeats an earlier one, every later
    step repeats too: :meth:`at` answers from that period without running further. Until
    then it runs, length after length, never extrapolating: the work of a pattern whose
    growth starts late (after ``(?:b{16}){16}``'s 256 characters) says nothing early."""

    def __init__(self, graph: _Graph, budget: _Budget, checks: list[int]) -> None:
        self.graph = graph
        self.budget = budget
        self.checks = checks
        self.level: list[Ways] = [((0, 1),)]
        self.totals = [1]
        """The steps up to and including each length."""
        self.calls = {check: [self._calls(((0, 1),), check)] for check in checks}
        """How often each lookaround can have been run, up to each length."""
        self.seen: dict[frozenset[Ways], int] = {frozenset(self.level): 0}
        self.period: tuple[int, int] | None = None
        """(first length, period) once the steps repeat."""

    def _calls(self, ways: Ways, check: int) -> int:
        return sum(count for state, count in ways if check in self.graph.looks[state])

    def _next(self) -> None:
        graph = self.graph
        after_all: dict[Ways, bool] = {}
        for ways in self.level:
            classes = 0
            for state, _ in ways:
                for target, _ in graph.edges[state]:
                    classes |= graph.labels[target]
            while classes:
                bit = classes & -classes
                classes ^= bit
                self.budget.spend()
                after: dict[int, int] = {}
                for state, count in ways:
                    for target, times in graph.edges[state]:
                        if graph.labels[target] & bit:
                            after[target] = min(WORK + 1, after.get(target, 0) + count * times)
                after_all[tuple(sorted(after.items()))] = True
        found = _merged(list(after_all)) if len(after_all) > _SETS else list(after_all)
        # Keep only the ways no other one holds all of (they can only do less from here).
        self.budget.spend(len(found) ** 2)
        held = [(v, dict(v)) for v in found]
        level = [w for w in found if w and not any(_covers(v, w, h) for v, h in held)]
        self.level = level
        weights = self.graph.weights
        most = max((sum(c * weights[s] for s, c in w) for w in level), default=0)
        self.totals.append(self.totals[-1] + most)
        for check, calls in self.calls.items():
            calls.append(calls[-1] + max((self._calls(w, check) for w in level), default=0))
        key = frozenset(level)
        if key in self.seen:
            first = self.seen[key]
            self.period = (first, len(self.totals) - 1 - first)
        else:
            self.seen[key] = len(self.totals) - 1

    def at(self, n: int, counts: list[int] | None = None) -> int:
        """The steps (or ``counts``: one lookaround's runs) for a value of n characters."""
        counts = self.totals if counts is None else counts
        while self.period is None and len(self.totals) <= n:
            self._next()
        if n < len(counts):
            return counts[n]
        assert self.period is not None
        first, period = self.period
        rounds, rest = divmod(n - first, period)
        return counts[first + rest] + rounds * (counts[first + period] - counts[first])

    def rate(self, counts: list[int] | None = None) -> int | None:
        """The most the steps (or ``counts``) grow by per character from the period on;
        None before the period is known."""
        counts = self.totals if counts is None else counts
        if self.period is None:
            return None
        first, period = self.period
        return max(counts[first + i + 1] - counts[first + i] for i in range(period))


def _merged(level: list[Ways]) -> list[Ways]:
    """Fewer :data:`Ways` holding all of ``level``: one per set of states, each state with
    the most ways any of ``level`` with those states reaches it by. More ways than any
    text makes, so the steps counted stay an upper bound; merging only ways with the
    same states keeps it close (merging all adds up ways no one text makes, and the
    excess compounds, length after length)."""
    by_states: dict[frozenset[int], dict[int, int]] = {}
    for ways in level:
        most = by_states.setdefault(frozenset(state for state, _ in ways), {})
        for state, count in ways:
            most[state] = max(most.get(state, 0), count)
    return [tuple(sorted(most.items())) for most in by_states.values()]


def _covers(big: Ways, small: Ways, have: dict[int, int]) -> bool:
    """Whether ``big`` (``have`` as a dict) has every state of ``small``, each reached at
    least as many ways."""
    if big == small or len(big) < len(small):
        return False
    return all(have.get(state, 0) >= count for state, count in small)


WAYS = 8
"""The most steps per character a pattern may take however long the value: ``re``
following at most this many ways of matching at once."""


@dataclass(frozen=True)
class Cost:
    """How the work of searching a value for a pattern grows with the value's length."""

    exponential: bool
    """Some text can be matched in a number of ways that doubles as it grows."""
    power: int
    """The power of the length the work grows as (0: bounded, 1: linear, 2: quadratic);
    0 when exponential."""
    longest: int | None
    """The longest value searched within :data:`WORK` steps; None when any length is (at
    most :data:`WAYS` steps per character); 0 when exponential."""


def _groups(items: Any, found: dict[int, Any]) -> dict[int, Any]:
    """Every group of the parsed ``items`` → its body, wherever it is: a back-reference
    outside a lookaround reads what a group inside it read (``(?=(a))\\1``)."""
    for op, av in items:
        name = str(op)
        if name == "SUBPATTERN":
            if av[0] is not None:
                found[av[0]] = av[3]
            _groups(av[3], found)
        elif name == "BRANCH":
            for alternative in av[1]:
                _groups(alternative, found)
        elif name in ("MAX_REPEAT", "MIN_REPEAT"):
            _groups(av[2], found)
        elif name in ("ASSERT", "ASSERT_NOT"):
            _groups(av[1], found)
    return found


def _graph_of(
    items: Any, groups: dict[int, Any], searched: bool, budget: _Budget
) -> tuple[_Nfa, _Graph]:
    nfa = _Nfa(groups=groups)
    start = nfa.node()
    accept = nfa.build(items, start)
    return nfa, _graph(nfa, start, accept, searched, budget)


def _loops(graph: _Graph, components: list[list[int]] | None = None) -> list[list[int]]:
    """The components of the states reachable from the start that hold a loop."""
    if components is None:
        components = _components(_reachable(graph), lambda s: [t for t, _ in graph.edges[s]])
    return [c for c in components if len(c) > 1 or any(t == c[0] for t, _ in graph.edges[c[0]])]


def _analyse(graph: _Graph, budget: _Budget) -> tuple[_Work, int] | None:
    """The work of ``graph``'s search and the power it grows as, None when it can take
    exponential time."""
    components = _components(_reachable(graph), lambda s: [t for t, _ in graph.edges[s]])
    loops = _loops(graph, components)
    if any(_exponential(graph, set(loop), budget) for loop in loops):
        return None
    checks = sorted({check for c in components for state in c for check in graph.looks[state]})
    return _Work(graph, budget, checks), _power(graph, components, loops, budget)


def _analysed(items: Any, budget: _Budget) -> tuple[_Work, dict[int, _Work], int] | None:
    """The work of searching for the parsed pattern ``items``, each lookaround body's
    work, and the power it all grows as; None when it can take exponential time."""
    nfa, graph = _graph_of(items, _groups(items, {}), True, budget)
    analysed = _analyse(graph, budget)
    if analysed is None:
        return None
    work, power = analysed
    bodies: dict[int, _Work] = {}
    powers = [power]
    for check in work.checks:
        inner, body = _graph_of(nfa.looks[check], nfa.groups, False, budget)
        if inner.looks:
            raise _TooComplex  # a lookaround inside a lookaround
        found = _analyse(body, budget)
        if found is None:
            return None
        bodies[check] = found[0]
        powers.append(power + found[1])
    return work, bodies, max(powers)


def _cost(items: Any, budget: _Budget) -> Cost:
    """The :class:`Cost` of searching for the parsed pattern ``items``."""
    analysed = _analysed(items, budget)
    if analysed is None:
        return Cost(True, 0, 0)
    work, bodies, power = analysed
    return Cost(False, power, _longest(work, bodies))


def _total(work: _Work, bodies: dict[int, _Work], n: int) -> int:
    """The most steps for a value of n characters, each lookaround run as often as it
    can be, on the rest of the value."""
    return work.at(n) + sum(
        work.at(n, work.calls[check]) * body.at(n) for check, body in bodies.items()
    )


def _longest(work: _Work, bodies: dict[int, _Work]) -> int | None:
    """The longest value whose search stays within :data:`WORK` steps (:func:`_total`);
    None when every length does."""
    n = 0
    while True:
        n += 1
        total = _total(work, bodies, n)
        if total > WORK:
            return n - 1
        rates = [work.rate()] + [work.rate(work.calls[c]) for c in bodies]
        rates += [body.rate() for body in bodies.values()]
        if None in rates or n <= max(
            w.period[0] + w.period[1] for w in (work, *bodies.values()) if w.period
        ):
            continue
        grows = work.rate() or 0
        for check, body in bodies.items():
            called, body_rate = work.rate(work.calls[check]) or 0, body.rate() or 0
            if called and body_rate:  # run once more per character, each run longer: n²
                grows = WORK
            grows += called * body.at(n) + work.at(n, work.calls[check]) * body_rate
        if grows <= WAYS:
            return None
        if grows < WORK:
            return n + (WORK - total) // grows


def _power(
    graph: _Graph, components: list[list[int]], loops: list[list[int]], budget: _Budget
) -> int:
    """The longest chain of loops each of which reads some text as it reads the way to the
    next and the next reads it: the power of the length the work grows as."""
    owner = {s: i for i, c in enumerate(components) for s in c}
    reaches: list[set[int]] = []
    for i, component in enumerate(components):  # a component comes after all it reaches
        here = {i}
        for s in component:
            for t, _ in graph.edges[s]:
                if owner[t] != i:
                    here |= reaches[owner[t]]
        reaches.append(here)
    is_loop = {owner[loop[0]] for loop in loops}
    chain: dict[int, int] = {}
    for i in reversed(range(len(components))):
        if i not in is_loop:
            continue
        best = 1
        for j in chain:
            if i in reaches[j] and chain[j] + 1 > best:
                between = {s for k in reaches[j] if i in reaches[k] for s in components[k]}
                if _linked(graph, set(components[j]), between, set(components[i]), budget):
                    best = chain[j] + 1
        chain[i] = best
    return max(chain.values(), default=0)


@functools.lru_cache(maxsize=1024)
def cost(pattern: str) -> Cost:
    """How searching a value for ``pattern`` grows with the value's length; raises
    ``re.error`` for a pattern that does not compile, and ``ValueError`` for one too
    large or intricate to check."""
    parsed = re._parser.parse(compile_pattern(pattern).pattern, re.ASCII)  # type: ignore[attr-defined]
    try:
        return _cost(parsed, _Budget())
    except _TooComplex:
        raise ValueError(f"pattern {pattern!r} is too large or intricate to check") from None


def most_steps(pattern: str, length: int) -> int:
    """The most steps searching a value of ``length`` characters for ``pattern`` can take,
    as the check counts them (past :data:`WORK`, a lower bound); raises ``ValueError``
    for a pattern that can take exponential time or is too intricate to check."""
    parsed = re._parser.parse(compile_pattern(pattern).pattern, re.ASCII)  # type: ignore[attr-defined]
    try:
        analysed = _analysed(parsed, _Budget())
    except _TooComplex:
        raise ValueError(f"pattern {pattern!r} is too large or intricate to check") from None
    if analysed is None:
        raise ValueError(f"pattern {pattern!r} can take exponential time")
    work, bodies, _ = analysed
    return _total(work, bodies, length)


def backtracking_problem(pattern: str, max_length: int | None) -> str | None:
    """Why ``pattern`` could let a value stall the server, or None: searching a value
    of the longest length the arg allows (``max_length``, else any) can take more than
    :data:`WORK` steps. Says how to rewrite the pattern, or what ``max_length`` to declare."""
    try:
        found = cost(pattern)
    except ValueError as exc:
        return f"{exc}: no value could be shown not to make it slow; simplify it"
    longest = found.longest
    if longest is None or (max_length is not None and max_length <= longest):
        return None
    if found.exponential:
        return (
            f"pattern {pattern!r} can take exponential time on a short value: a repetition "
            "can match the same text in two ways, as in (a+)+, (a|ab)* or (\\w+\\s?)*; "
            "rewrite it so each character is read one way (^[a-z]+(-[a-z]+)*$, not "
            "^([a-z]+-?)+$)"
        )
    if found.power >= 2:
        why = (
            f"can take time growing as the value's length to the power {found.power}: "
            "repetitions in a row can read the same text (as in [^@]+\\.[^@]+), or it is "
            "searched from every character (an unanchored [a-z]+@)"
        )
        rewrite = (
            "keep repetitions in a row from taking the same characters ([^@.]+\\.[^@]+) "
            "and anchor it with ^"
        )
    else:
        why = (
            f"can follow more than {WAYS} ways of matching a value at once (alternatives "
            "or optional parts that read the same text, as (a|ab)(a|ab)… or a?a?a?…)"
        )
        rewrite = "make alternatives and optional parts start differently"
    said = "no max_length" if max_length is None else f"max_length={max_length}"
    return (
        f"pattern {pattern!r} {why}, and the arg has {said}: declare max_length={longest} "
        f"or less, or {rewrite}"
    )
