"""A declared pattern means at dispatch what it means to the providers: ECMA-262.

The oracle is regress, a Rust ECMA-262 engine (the one the Python ``jsonschema``
ecosystem uses), not our own reading of the standard.
"""

from __future__ import annotations

import re

import pytest
import regress
from hypothesis import assume, given
from hypothesis import strategies as st

from rastrillo.registry.declare import Arg, arg_problems
from rastrillo.registry.pattern import compile_pattern, pattern_problem
from rastrillo.registry.validate import Invalid, accept, parse


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        (r"^[0-9]+$", "12\n"),  # Python's $ also matches before a final newline
        (r"^\d+$", "\u0661\u0662"),  # Python's \d takes every script's digits
        (r"^\w+$", "ünï"),  # and \w every script's letters
        (r"^[a-z]+$", "ab\n"),
        (r"^.+$", "a\rb"),  # ECMA's . takes no line terminator
        (r"^a.b$", "a\u2028b"),
        (r"^\S+$", "a\ufeffb"),  # a byte-order mark is ECMA white space
        (r"^[^\s]+$", "a\ufeffb"),
        (r"^\$[0-9]+$", "$12\n"),
    ],
)
def test_a_value_only_pythons_reading_would_take_is_refused(pattern: str, value: str) -> None:
    assert regress.Regex(pattern).find(value) is None  # the schema the model was given refuses it
    assert re.search(pattern, value) is not None  # Python's re alone would have taken it
    arg = Arg("a code", pattern=pattern)
    with pytest.raises(Invalid):
        accept(arg, value)  # a tool call's value
    with pytest.raises(Invalid):
        parse(arg, value)  # a browser's text


@pytest.mark.parametrize(
    ("pattern", "value"),
    [(r"^\s$", "\ufeff"), (r"^\s$", "\u00a0"), (r"^[\s]+$", "\u3000 "), (r"\bid\b", "éidé")],
)
def test_a_value_the_schema_takes_is_taken(pattern: str, value: str) -> None:
    assert regress.Regex(pattern).find(value) is not None
    assert accept(Arg("a code", pattern=pattern), value) == value


PIECES = st.sampled_from(
    [
        "^",
        "$",
        ".",
        r"\d",
        r"\D",
        r"\w",
        r"\W",
        r"\s",
        r"\S",
        r"\b",
        r"\B",
        "a",
        "0",
        "-",
        r"\$",
        r"\\",
        r"\.",
        "[a-z]",
        "[^0-9]",
        r"[\d.]",
        r"[\s$]",
        r"[^\s]",
        r"[\w-]",
        "[$.^]",
        "+",
        "*",
        "?",
        "{2}",
        "(?:",
        "(",
        ")",
        "|",
        "(?=a)",
        "(?!0)",
        "(?<=a)",
        "[\U0001f600]",
        "[^\U0001f600]",
    ]
)
ALPHABET = (
    "a0-$\\.b1 \t\n\r\x0b\x0c\x85\xa0\u2028\u2029\ufeff\u3000\u0661\u0662éß_A"
    "\u0301\U0001f600"  # a combining accent; an emoji, two UTF-16 units, one code point
)
"""What values are made of. JSON Schema reads a pattern as ECMA-262 does with the u flag
(as Ajv compiles it), over code points: ``.`` takes one emoji, as Python's ``re`` does."""


def _ecma(pattern: str) -> regress.Regex | None:
    try:
        return regress.Regex(pattern)
    except regress.RegressError:
        return None


@given(
    pattern=st.lists(PIECES, min_size=1, max_size=7).map("".join),
    values=st.lists(st.text(ALPHABET, max_size=6), min_size=1, max_size=20),
)
def test_every_pattern_both_read_matches_what_ecma_262_matches(
    pattern: str, values: list[str]
) -> None:
    ecma = _ecma(pattern)
    assume(ecma is not None and pattern_problem(pattern) is None)
    assert ecma is not None
    ours = compile_pattern(pattern)
    for value in values:
        assert (ours.search(value) is not None) == (ecma.find(value) is not None), value


@pytest.mark.parametrize("pattern", [r"^\p{L}+$", r"^[\p{Lu}\d]+$", r"\P{N}"])
def test_a_unicode_property_is_refused_as_what_it_is(pattern: str) -> None:
    # ^\p{L}+$ was refused as a "possessive quantifier" (the } before +).
    said = pattern_problem(pattern)
    assert said is not None and "no Unicode property escapes" in said


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        (r"^a\Z", r"\A and \Z are Python's"),
        (r"\Aa", r"\A and \Z are Python's"),
        ("(?P<n>a)", "(?P…) groups are Python's"),
        ("(?i)abc", "this (?…) group is Python's"),
        ("(?#note)a", "this (?…) group is Python's"),
        ("(?>a)", "this (?…) group is Python's"),
        ("a*+", "possessive quantifiers"),
        ("^[]a]$", "a ] first in [...] is literal only to Python"),
        ("^[^]a]$", "a ] first in [...] is literal only to Python"),
        (r"[\Sx]", r"\S inside [...] is not supported"),
        (r"^(a)?(?(1)b|c)$", "conditional groups"),
        (r"^\d{,3}$", "{,n} is a quantifier only to Python"),
        (r"^\U00000061$", r"\U escapes are Python's"),
        (r"^[\U00000061]$", r"\U escapes are Python's"),
        (r"^\N{DIGIT ZERO}$", r"\N escapes are Python's"),
        ("(", "pattern does not compile"),
    ],
)
def test_python_only_syntax_is_refused_when_declared(pattern: str, problem: str) -> None:
    said = pattern_problem(pattern)
    assert said is not None and problem in said
    assert [field for field, _ in arg_problems(pattern=pattern)] == ["pattern"]
    with pytest.raises(ValueError, match="pattern"):
        Arg("a code", pattern=pattern)


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        (r"^\d{,3}$", "12"),  # Python: up to three digits; JavaScript: a digit, then "{,3}"
        (r"^\U00000061$", "a"),  # Python: "a"; JavaScript: "U00000061"
        (r"^\N{DIGIT ZERO}$", "0"),  # Python: "0"; JavaScript: "N{DIGIT ZERO}"
    ],
)
def test_syntax_that_reads_otherwise_to_python_is_refused(pattern: str, value: str) -> None:
    """Both engines take these patterns, and read them differently: the value only Python's
    reading takes would reach the handler though the schema the model was given refuses it."""
    assert regress.Regex(pattern).find(value) is None
    assert re.search(pattern, value) is not None
    assert pattern_problem(pattern) is not None


@pytest.mark.parametrize(
    "pattern", [r"[(?P]", r"[\]a]", r"\(\?i\)", r"[\s]", r"a\{,3}", r"[{,3}]", r"\\N", r"a{1,3}"]
)
def test_the_same_text_as_a_literal_is_declared(pattern: str) -> None:
    assert pattern_problem(pattern) is None
