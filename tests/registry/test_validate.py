"""Arg values against their declaration: JSON values, request text, canonical wire text."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rastrillo.registry.declare import UNSAFE_TEXT, Arg
from rastrillo.registry.validate import (
    ArgError,
    Invalid,
    accept,
    expects,
    from_text,
    parse,
    parse_int,
    read_args,
    wire,
)
from tests.registry.strategies import JSON_VALUES, args, satisfies, values_for

QUANTITY = Arg("how many tickets", type=int, minimum=1, maximum=10)
PRICE = Arg("price", type=float, minimum=0, maximum=99.5)
SEAT = Arg("where to sit", choices=["aisle", "window", "any"], required=False)
GIFT = Arg("wrap it", type=bool, required=False)
NOTE = Arg("a note", required=False, min_length=2, max_length=5, pattern="^[a-z]")


@pytest.mark.parametrize(
    ("arg", "value", "expected"),
    [
        (QUANTITY, 2, 2),
        (QUANTITY, 1, 1),
        (QUANTITY, 10, 10),
        (PRICE, 2, 2.0),
        (PRICE, 99.5, 99.5),
        (PRICE, 0, 0.0),
        (SEAT, "aisle", "aisle"),
        (GIFT, True, True),
        (GIFT, False, False),
        (NOTE, "ab", "ab"),
        (NOTE, "abcde", "abcde"),
        (Arg("x"), "", ""),
    ],
)
def test_values_of_the_declared_type_are_accepted(arg: Arg, value: object, expected: object):
    got = accept(arg, value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("arg", "value", "message"),
    [
        (QUANTITY, "2", "must be an integer from 1 to 10, not the string '2'"),
        (QUANTITY, True, "must be an integer from 1 to 10, not true"),
        (QUANTITY, 2.0, "must be an integer from 1 to 10, not the number 2.0"),
        (QUANTITY, 0, "not the integer 0"),
        (QUANTITY, 11, "not the integer 11"),
        (QUANTITY, None, "not null"),
        (QUANTITY, [2], "not a list"),
        (QUANTITY, {"n": 2}, "not an object"),
        (PRICE, False, "must be a number from 0 to 99.5, not false"),
        (PRICE, "1.5", "not the string '1.5'"),
        (PRICE, math.inf, "not the number inf"),
        (PRICE, 10**400, "a very long number"),
        (PRICE, 99.50000001, "not the number 99.50000001"),
        (SEAT, "Aisle", 'must be one of "aisle", "window", "any", not the string \'Aisle\''),
        (SEAT, 1, "not the integer 1"),
        (GIFT, 1, "must be true or false, not the integer 1"),
        (GIFT, "true", "not the string 'true'"),
        (NOTE, "a", "of 2 to 5 characters matching the regular expression ^[a-z]"),
        (NOTE, "abcdef", "not the string 'abcdef'"),
        (NOTE, "Ab", "not the string 'Ab'"),
        (Arg("x"), 7, "must be a string, not the integer 7"),
    ],
)
def test_no_coercion_and_every_constraint(arg: Arg, value: object, message: str) -> None:
    with pytest.raises(Invalid, match=None) as raised:
        accept(arg, value)
    assert message in str(raised.value)


def test_expects_says_it_in_words() -> None:
    assert expects(QUANTITY) == "an integer from 1 to 10"
    assert expects(Arg("x", type=float, minimum=0.5)) == "a number of at least 0.5"
    assert expects(Arg("x", type=int, maximum=-1)) == "an integer of at most -1"
    assert expects(GIFT) == "true or false"
    assert expects(Arg("x", type=int, choices=[1, 2])) == "one of 1, 2"
    assert expects(Arg("x", choices=['say "hi"'])) == r'one of "say \"hi\""'


@pytest.mark.parametrize(
    ("value", "taken"),
    [(10**3999, True), (-(10**3999), True), (10**4000, False), (-(10**4000), False)],
    ids=["4000 digits", "-4000 digits", "4001 digits", "-4001 digits"],
)
def test_an_integer_a_call_sends_is_one_a_browser_may_send(value: int, taken: bool) -> None:
    """A model's JSON may hold up to 4,300 digits (Python's and the MCP SDK's parsers stop
    there); a form's text is read to 4,000. What dispatch takes, ``ctx.args`` reads from
    the same text, and nothing else: a tool call is never a value a browser cannot send."""
    arg = Arg("any integer", type=int)
    if taken:
        assert accept(arg, value) == value
        assert parse(arg, wire(value)) == value
    else:
        with pytest.raises(Invalid, match="must be an integer, not a very long number"):
            accept(arg, value)
        with pytest.raises(Invalid):
            parse(arg, str(value))


@pytest.mark.parametrize(
    "text",
    [" 2", "2 ", "+2", "1_0", "\u0662", "\uff12", "0x2", "2.0", "", "-", "1e1", "\u00b2", "2\n"],
)
def test_integer_text_is_parsed_strictly(text: str) -> None:
    assert parse_int(text) is None
    with pytest.raises(Invalid):
        parse(QUANTITY, text)


@pytest.mark.parametrize(
    "text",
    [" 1.5", "1.5 ", "1_0.5", "\u0661.\u0665", "inf", "nan", "1e999", "1.", "+1", "0x1p1", "1,5"],
)
def test_number_text_is_parsed_strictly(text: str) -> None:
    with pytest.raises(Invalid):
        parse(Arg("x", type=float), text)


def test_text_of_each_type() -> None:
    assert parse(QUANTITY, "7") == 7 and parse(QUANTITY, "-0" if False else "10") == 10
    assert parse(Arg("x", type=float), ".5") == 0.5
    assert parse(Arg("x", type=float), "-1E3") == -1000.0
    assert parse(GIFT, "true") is True and parse(GIFT, "false") is False
    assert parse(GIFT, "on") is True  # what an HTML checkbox without a value sends
    with pytest.raises(Invalid, match="must be true or false, not the string 'yes'"):
        parse(GIFT, "yes")
    assert from_text(QUANTITY, "99") == 99  # the type only; accept() checks the bounds
    with pytest.raises(Invalid, match="not the integer 99"):
        parse(QUANTITY, "99")


def test_wire_texts() -> None:
    assert [wire(v) for v in (2, -7, 2.0, 0.1, 1e100, True, False, "2")] == [
        "2",
        "-7",
        "2.0",
        "0.1",
        "1e+100",
        "true",
        "false",
        "2",
    ]


@given(args(), JSON_VALUES)
def test_any_json_value_is_accepted_only_if_its_declaration_allows_it(arg: Arg, value: object):
    try:
        got = accept(arg, value)
    except Invalid as exc:
        assert not satisfies(arg, value), f"refused a valid value: {exc}"
    else:
        assert satisfies(arg, value)
        assert type(got) is arg.type


@given(st.data())
def test_values_near_the_bounds_and_choices(data: st.DataObject) -> None:
    arg = data.draw(args())
    value = data.draw(values_for(arg))
    try:
        got = accept(arg, value)
    except Invalid:
        assert not satisfies(arg, value)
    else:
        assert satisfies(arg, value) and type(got) is arg.type


@given(st.data())
def test_the_wire_text_of_an_accepted_value_reads_back_as_that_value(data: st.DataObject):
    arg = data.draw(args())
    value = data.draw(values_for(arg))
    try:
        got = accept(arg, value)
    except Invalid:
        return
    back = parse(arg, wire(got))
    assert back == got and type(back) is type(got)


@given(st.text())
def test_parse_int_takes_ascii_decimal_only(text: str) -> None:
    number = parse_int(text)
    if number is not None:
        assert text.lstrip("-").isascii() and text.lstrip("-").isdigit()
        assert text.count("-") <= 1 and int(text) == number


def test_read_args_names_every_bad_arg_at_once() -> None:
    declared = {"quantity": QUANTITY, "seat": SEAT, "gift": GIFT, "note": NOTE}
    texts = {"quantity": "two", "seat": "roof", "gift": "", "note": ""}
    with pytest.raises(ArgError) as raised:
        read_args(declared, texts.get)
    assert raised.value.errors == {
        "quantity": "must be an integer from 1 to 10, not the string 'two'",
        "seat": 'must be one of "aisle", "window", "any", not the string \'roof\'',
    }
    assert str(raised.value).splitlines() == [
        "quantity: must be an integer from 1 to 10, not the string 'two'",
        'seat: must be one of "aisle", "window", "any", not the string \'roof\'',
    ]
    assert read_args(declared, {"quantity": "3"}.get) == {
        "quantity": 3,
        "seat": None,
        "gift": None,
        "note": None,
    }
    with pytest.raises(ArgError, match="quantity: is required: an integer from 1 to 10"):
        read_args(declared, {}.get)


@given(
    st.integers(min_value=0, max_value=400),
    st.text(st.characters(max_codepoint=0x7F), max_size=40),
    st.integers(min_value=0, max_value=0x7F),
    st.text(max_size=3),
)
def test_a_text_short_or_long_is_refused_for_its_first_unsafe_character(pad, text, ascii_, extra):
    """Long ASCII texts are checked another way than short ones (a faster one for a model's
    megabyte args): both refuse exactly what UNSAFE_TEXT refuses, naming the same first
    character."""
    value = "a" * pad + text + chr(ascii_) + extra
    first = re.search(UNSAFE_TEXT, value)
    if first is None:
        assert accept(Arg("a text"), value) == value
    else:
        with pytest.raises(Invalid, match=f"holds the character U\\+{ord(first[0]):04X};"):
            accept(Arg("a text"), value)


@pytest.mark.parametrize("pad", [0, 300])
def test_each_ascii_character_is_taken_or_refused_as_unsafe_text_says(pad):
    """Every one of the 128, in a short text and in a long one (checked another way)."""
    for code in range(128):
        value = "a" * pad + chr(code) + "b"
        if re.fullmatch(UNSAFE_TEXT, chr(code)) is None:
            assert accept(Arg("a text"), value) == value
        else:
            with pytest.raises(Invalid, match=f"holds the character U\\+{code:04X};"):
                accept(Arg("a text"), value)
