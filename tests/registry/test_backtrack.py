"""A declared pattern cannot let a model's value stall the server: a pattern Python's
backtracking ``re`` could take exponential time on is refused when declared, and one whose
time grows as a power of the value's length needs a ``max_length`` that keeps it small."""

from __future__ import annotations

import pytest

import rastrillo
from rastrillo.registry.backtrack import WAYS, WORK, backtracking_problem, cost, most_steps
from rastrillo.registry.declare import Arg
from tests.generate.test_typed_reader import refusals
from tests.registry.steps import steps

EXPONENTIAL = [
    r"^(a+)+$",
    r"(x|x)*y",
    r"(\w+\s?)*$",
    r"^(\w+\s?)*$",
    r"^(a|aa)*$",
    r"^(a*)*$",
    r"^(\d+)*$",
    r"^([a-z]+-?)+$",
    r"^((a|ab)(bc|c))*$",
    r"^(\w+\.?)+@",
    r"^_(__|.)+_$",
    r"^(a{1,2})+$",
    r"^(a+)\1*$",
    r"^(?=(a+)+b)",
    r"^([a-z0-9]+\.?)+[a-z]{2,}$",
    # An iteration that matched nothing still ends, once, in a second way to go on: re
    # tries what follows it, then again without it (each "a" doubles the ways).
    r"^(?:(?:x?)*a)*$",
    r"^(?:(?:x|)*a)*$",
    # A back-reference to a group inside a lookahead reads what the group read.
    r"^(?=(a))(?:\1|a)*b",
    r"^(?:(?=(a))\1|a)*b",
]
"""Each can match some text in a number of ways that doubles with its length."""

POLYNOMIAL = [
    (r"^[^@\s]+@[^@\s]+\.[^@\s]+$", 2),  # a lax email: [^@\s] also reads the dot
    (r"[a-z]+@", 2),  # unanchored: tried from every character
    (r"^\d+\d+$", 2),
    (r"^.*=.*$", 2),
    (r"^a*a*a*b$", 3),
    # A back-reference reads what its group read, so it can fail where the group would
    # match nothing: re backtracks through every split (2,000 "a"s: 0.13 s, then x8).
    (r"^(a*)[ab]*\1", 3),
    (r"^(.*).*\1", 3),
]
"""Each takes time growing as the value's length to the power given."""

SAFE = [
    r"^[a-z]+(-[a-z]+)*$",
    r"^[a-z0-9]+(?:-[a-z0-9]+)*$",
    r"^([a-z]+,)*[a-z]+$",
    r"^(\d+,)*\d+$",
    r"^[^,]+(,[^,]+)*$",
    r"^\d{4}-\d{2}-\d{2}$",
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?Z$",
    r"^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$",
    r"^[\w.+-]+@[\w-]+\.[\w.-]+$",
    r"^[a-z_][a-z0-9_]*$",
    r"^[0-9]+$",
    r"^[A-Z]{3}$",
    r"^#[0-9a-fA-F]{6}$",
    r"^\+?[0-9 ]{7,15}$",
    r"^\d{5}(-\d{4})?$",
    r"^-?\d+(\.\d{1,2})?$",
    r"^(\d{1,3}\.){3}\d{1,3}$",
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
    r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{1,30}$",
    r"^https://[^\s/$.?#].[^\s]*$",
    r"^[A-Za-z]+( [A-Za-z]+)*$",
    r"^(?=.*\d)(?=.*[a-z]).{8,}$",
    r"^(?:yes|no|maybe)$",
    r"\bid\b",
    r"\d",
    r"\S+",
    # semver.org's: many sets of ways at one length (merging them all refused it).
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$",
    # Unanchored, each can match an empty value: the search ends where it starts.
    r"([a-z]+,)*",
    r"(\d+,)*\d*",
]
"""Ordinary patterns whose time grows no faster than the value's length."""


@pytest.mark.parametrize("pattern", EXPONENTIAL)
def test_a_pattern_that_can_take_exponential_time_is_refused_whatever_its_length(
    pattern: str,
) -> None:
    assert cost(pattern).exponential
    for max_length in (None, 30, 10):
        problem = backtracking_problem(pattern, max_length)
        assert problem is not None and "exponential time" in problem
        assert "rewrite it so each character is read one way" in problem
    with pytest.raises(ValueError, match="exponential time"):
        Arg("a code", pattern=pattern)


@pytest.mark.parametrize(("pattern", "power"), POLYNOMIAL)
def test_a_pattern_whose_time_grows_as_a_power_needs_a_max_length_that_bounds_it(
    pattern: str, power: int
) -> None:
    found = cost(pattern)
    assert (found.exponential, found.power) == (False, power)
    assert found.longest is not None and 100 < found.longest < 2000
    problem = backtracking_problem(pattern, None)
    assert problem is not None and f"to the power {power}" in problem
    assert f"declare max_length={found.longest} or less" in problem
    with pytest.raises(ValueError, match="max_length"):
        Arg("a code", pattern=pattern)
    with pytest.raises(ValueError, match=f"max_length={found.longest + 1}"):
        Arg("a code", pattern=pattern, max_length=found.longest + 1)
    assert Arg("a code", pattern=pattern, max_length=found.longest).max_length == found.longest


@pytest.mark.parametrize("pattern", SAFE)
def test_an_ordinary_pattern_is_declared_without_a_max_length(pattern: str) -> None:
    assert cost(pattern).longest is None
    assert Arg("a code", pattern=pattern).pattern == pattern


def _hostile(length: int) -> list[str]:
    """Values that make a backtracking search try its most ways: long runs of what a
    repetition takes, ending in what the pattern refuses."""
    runs = ["a", "1", "a.", "a,", "a-", "1,", "a ", "a@", "@a.", "1.", "aa1"]
    return [(run * length)[:length] + end for run in runs for end in ("!", "\n", "")]


@pytest.mark.parametrize("pattern", SAFE)
def test_what_is_declared_searches_a_long_hostile_value_in_few_steps_per_character(
    pattern: str,
) -> None:
    # Steps counted by a backtracking matcher of re's own (tests/registry/steps.py).
    for value in _hostile(300):
        assert steps(pattern, value, WAYS * len(value)) <= WAYS * len(value), value[:10]


@pytest.mark.parametrize(
    "pattern",
    [p for p, _ in POLYNOMIAL] + SAFE + [r"^(?:b{4}){4}\d+\d+$", r"(?:(?:|)(?:|)+){2,}a"],
)
def test_re_takes_no_more_steps_than_the_check_counts(pattern: str) -> None:
    # The check's count bounds re's: so a value of the max_length it asks for is searched
    # within WORK steps (counted on values short enough for the matcher to be quick).
    for length in (20, 60):
        bound = most_steps(pattern, length + 1)
        for value in _hostile(length):
            assert steps(pattern, value, bound) <= bound, value[:10]


@pytest.mark.parametrize(("pattern", "power"), POLYNOMIAL)
def test_the_max_length_asked_for_is_the_longest_within_the_steps(pattern: str, power: int) -> None:
    longest = cost(pattern).longest
    assert longest is not None
    assert most_steps(pattern, longest) <= WORK < most_steps(pattern, longest + 1)


@pytest.mark.parametrize(
    "pattern",
    [
        # An old URL pattern: each length's ways are many, past the analysis's budget.
        r"^https?://(www\.)?[-a-zA-Z0-9@:%._+~#=]{1,256}\.[a-zA-Z0-9()]{1,6}\b"
        r"([-a-zA-Z0-9()@:%_+.~#?&/=]*)$",
        r"^(?:(?:a{16}){16}){16}$",  # more character positions than it models
    ],
)
def test_a_pattern_too_intricate_to_check_is_refused(pattern: str) -> None:
    problem = backtracking_problem(pattern, None)
    assert problem is not None and "too large or intricate to check" in problem


def test_a_pattern_with_many_ways_per_length_is_still_bounded() -> None:
    # Past 16 sets of ways at one length they are merged (more ways than any text
    # makes): this one was too intricate to check, and is bounded instead.
    found = cost(r"(?:(?:[^a]?)?(?:\d{1,3}(?:ab|a)*(?:a|b)*)?a+){1,3}?(?:a|ab){1,3}c$")
    assert found.longest is not None and found.longest < 100
    assert cost(r"^\S+@\S+\.\S+$").longest == 145  # cubic, as ^\d+\d+\d+$ (144)


def test_generate_names_the_file_and_line_of_a_slow_pattern() -> None:
    code = """
        import rastrillo
        TOOL = rastrillo.Tool(
            description="Buy.",
            access=rastrillo.ToolWrite,
            args={
                "id": "the event",
                "name": rastrillo.Arg("who", pattern=r"^(\\w+\\s?)*$"),
                "mail": rastrillo.Arg("where", pattern=r"^[^@]+@[^@]+\\.[^@]+$"),
                "note": rastrillo.Arg("what", pattern=r"^[^@]+@[^@]+\\.[^@]+$", max_length=254),
            },
            confirm="Buy {id}?",
        )
        """
    [(line_name, name), (line_mail, mail)] = sorted(refusals(code), key=lambda p: p[0] or 0)
    assert line_name == 8 and name.startswith("arg 'name': pattern '^(\\\\w+\\\\s?)*$' can take")
    assert line_mail == 9 and "declare max_length=" in mail


def test_a_refused_pattern_never_reaches_dispatch() -> None:
    # The attack: a tool whose author wrote ^(\w+\s?)*$ and a model's thirty characters.
    # The declaration itself fails, so no registry holds it and no call searches with it.
    with pytest.raises(ValueError, match="exponential"):
        rastrillo.Tool(
            description="Greet.",
            args={"name": rastrillo.Arg("who", pattern=r"^(\w+\s?)*$")},
        )


@pytest.mark.parametrize("tail", [r"\d+\d+$", r"\d+\d+\d+$", r"[^@]+@[^@]+\.[^@]+$"])
@pytest.mark.parametrize("copies", [4, 16])
def test_a_long_fixed_prefix_lets_a_value_only_that_much_longer(tail: str, copies: int) -> None:
    # The attack: 256 b's before a cubic tail. The work grows only past them, so a bound
    # drawn from the work of the first characters allowed 1,829 (ten seconds).
    alone = cost("^" + tail).longest
    prefixed = cost(f"^(?:b{{16}}){{{copies}}}" + tail).longest
    assert alone is not None and prefixed is not None
    assert prefixed <= alone + 16 * copies


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?:()(?:)*|-|\1(?:b||a)?)(?:\b(?:)*|(?:\1||)\1(?=){2,})+$",
        r"(?:|){2,}(|){2,}$",
    ],
)
def test_empty_paths_re_walks_at_each_character_count_as_steps(pattern: str) -> None:
    # The search found these: they read almost nothing, but re walks their empty paths
    # ((?:)*, (?=){2,}, empty alternatives) from every start. The first was allowed
    # 35,713 characters (0.2 s; a MiB, 4.9 s), the second any length (a MiB, 5.6 s).
    found = cost(pattern)
    assert found.longest is not None and found.longest < 1_000
    assert Arg("a code", pattern=pattern, max_length=found.longest).max_length == found.longest
