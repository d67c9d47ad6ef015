"""Arg values against their declaration: one set of rules for a tool call and a browser.

A tool call brings JSON values (`accept`); a browser brings text from the path,
the query or a form (`parse`, then the same `accept`). Either way the value must
be of the declared type with no coercion (`"2"` is not an integer, `true` is
not one either), one of the `choices`, within the inclusive bounds, of an
allowed length, and matching `pattern` (searched, and read as JSON Schema and the
providers read it: see `rastrillo.registry.pattern`). Number
text is parsed strictly: ASCII digits only, no spaces, underscores or signs
other than a leading `-`. The canonical text of a value (`wire`) is what goes on
the wire, into the confirm sentence and into the approval's digest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Container, Mapping

from rastrillo.errors import RastrilloError
from rastrillo.registry.declare import UNSAFE_TEXT, Arg, ArgValue
from rastrillo.registry.pattern import compile_pattern

__all__ = [
    "ArgError",
    "Invalid",
    "accept",
    "call_args",
    "expects",
    "from_text",
    "parse",
    "parse_int",
    "path_problem",
    "phrases",
    "read_args",
    "unsafe_character",
    "wire",
    "wire_json",
]

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MAX_DIGITS = 4000
"""Longer number text is refused before conversion (Python refuses past 4300 digits)."""
_INT_BOUND = 10**_MAX_DIGITS
"""Every integer an arg takes is strictly within ±this: at most :data:`_MAX_DIGITS` digits,
from a call's JSON (which may hold 4,300) as from a form's text."""
_SHOWN = 40
"""How much of a refused value a message quotes."""
_UNSAFE = re.compile(UNSAFE_TEXT)
_ASCII_SAFE = bytes(c for c in range(128) if not _UNSAFE.match(chr(c)))
"""The ASCII characters :data:`UNSAFE_TEXT` lets a text hold."""
_LONG = 256
"""From this length on, an ASCII text is checked by deleting its safe bytes (C's loop, about
six times faster than the expression's: a model's megabyte arg, checked on the event loop);
a shorter one by the expression, which is quicker to start."""
_DOT_SEGMENTS = ("", ".", "..")


class Invalid(ValueError):
    """A value its arg does not accept; the message says what the arg expects."""


class ArgError(RastrilloError):
    """A request's args do not match the action's declaration; ``errors`` maps arg → problem.

    Raised by ``ctx.args``. Left uncaught in ``handle``, the app answers 400
    with ``str(error)``: one line per bad arg.
    """

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(sorted(errors.items()))
        super().__init__("\n".join(f"{name}: {problem}" for name, problem in self.errors.items()))


_KINDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def expects(arg: Arg) -> str:
    """What the arg takes, in words: `an integer from 1 to 10`, `one of "a", "b"`."""
    if arg.choices is not None:
        return phrases(arg, ["choices"])[0]
    fields = [name for name, _ in arg.constraints]
    return " ".join([_KINDS[arg.type], *phrases(arg, fields, after_noun=True)])


_RANGES = (("minimum", "maximum", "", "from "), ("min_length", "max_length", " characters", "of "))


def phrases(arg: Arg, fields: list[str], *, after_noun: bool = False) -> list[str]:
    """The named constraints of `arg` in words, a bound pair as one phrase.

    What a schema writes into a description when the provider lacks the
    keyword (`at most 200 characters`); `after_noun` reads on from the type
    (`a string of at most 200 characters`).
    """
    said: list[str] = []
    if "choices" in fields and arg.choices is not None:
        said.append("one of " + ", ".join(wire_json(c) for c in arg.choices))
    for low_name, high_name, unit, lead in _RANGES:
        low = getattr(arg, low_name) if low_name in fields else None
        high = getattr(arg, high_name) if high_name in fields else None
        lead = lead if after_noun else ""
        if low is not None and high is not None:
            said.append(f"{lead}{wire(low)} to {wire(high)}{unit}")
        elif low is not None:
            said.append(f"{'of ' if after_noun else ''}at least {wire(low)}{unit}")
        elif high is not None:
            said.append(f"{'of ' if after_noun else ''}at most {wire(high)}{unit}")
    if "pattern" in fields and arg.pattern is not None:
        said.append(f"matching the regular expression {arg.pattern}")
    return said


def accept(arg: Arg, value: object) -> ArgValue:
    """`value` as a JSON value of the arg's type within its constraints; raises `Invalid`.

    Returns the canonical value: a `float` arg's integer becomes a float.
    """
    kind = arg.type
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and -_INT_BOUND < value < _INT_BOUND
        )
    elif kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok:
            try:
                value = float(value)  # type: ignore[arg-type]
            except OverflowError:
                ok = False
            else:
                ok = math.isfinite(value)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise Invalid(f"must be {expects(arg)}, not {_shown(value)}")
    if (
        (arg.choices is not None and value not in arg.choices)
        or (arg.minimum is not None and value < arg.minimum)  # type: ignore[operator]
        or (arg.maximum is not None and value > arg.maximum)  # type: ignore[operator]
        or (
            isinstance(value, str)
            and (
                (arg.min_length is not None and len(value) < arg.min_length)
                or (arg.max_length is not None and len(value) > arg.max_length)
                or (arg.pattern is not None and compile_pattern(arg.pattern).search(value) is None)
            )
        )
    ):
        raise Invalid(f"must be {expects(arg)}, not {_shown(value)}")
    if isinstance(value, str) and (bad := unsafe_character(value)) is not None:
        raise Invalid(f"holds the character U+{ord(bad):04X}; remove it")
    return value  # type: ignore[return-value]


def unsafe_character(text: str) -> str | None:
    """The first character of ``text`` that :data:`UNSAFE_TEXT` refuses, or None."""
    if len(text) >= _LONG and text.isascii():
        left = text.encode("ascii").translate(None, _ASCII_SAFE)
        return chr(left[0]) if left else None
    found = _UNSAFE.search(text)
    return None if found is None else found[0]


def path_problem(value: str) -> str | None:
    """Why a text value cannot be a path parameter, or None: a browser would read an empty,
    ``.`` or ``..`` segment as no segment, or as one up."""
    if value in _DOT_SEGMENTS:
        return f"is part of the path and cannot be {value!r}"
    return None


def parse(arg: Arg, text: str) -> ArgValue:
    """The text of a path segment, query or form field as the arg's value; raises `Invalid`.

    `from_text`, then `accept`: the type strictly, then every constraint.
    """
    return accept(arg, from_text(arg, text))


def from_text(arg: Arg, text: str) -> ArgValue:
    """Text as a value of the arg's type, constraints not yet checked; raises `Invalid`.

    The exact inverse of `wire` for every value of the type; a bool also takes
    `on`, what an HTML checkbox without a `value` attribute sends, and text's CR LF
    (a form's line break) is the `\n` a tool call sends.
    """
    kind = arg.type
    if kind is str:
        # A form sends a textarea's line breaks as CR LF: read as the "\n" a tool call sends.
        return text.replace("\r\n", "\n")
    if kind is bool:
        if text not in ("true", "false", "on"):
            raise Invalid(f"must be true or false, not {_shown(text)}")
        return text != "false"
    if kind is int:
        number = parse_int(text)
        if number is None:
            raise Invalid(f"must be {expects(arg)}, not {_shown(text)}")
        return number
    if len(text) > _MAX_DIGITS or not _FLOAT.fullmatch(text):
        raise Invalid(f"must be {expects(arg)}, not {_shown(text)}")
    return float(text)


def parse_int(text: str) -> int | None:
    """A decimal integer written in ASCII digits with an optional leading `-`, else None.

    Unlike `int()`, no spaces, `_`, `+` or non-ASCII digits: the text a
    browser or a tool call sends for an integer, and nothing else.
    """
    if len(text) > _MAX_DIGITS + 1 or not _INT.fullmatch(text):
        return None
    number = int(text)
    return number if -_INT_BOUND < number < _INT_BOUND else None


def wire(value: ArgValue) -> str:
    """The canonical text of a value: decimal, shortest float `repr`, `true`/`false`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def wire_json(value: ArgValue) -> str:
    """A value as the model writes it in JSON: strings quoted, numbers and bools bare."""
    return _quote(value) if isinstance(value, str) else wire(value)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _shown(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return wire(value)
    if isinstance(value, str):
        short = value if len(value) <= _SHOWN else value[:_SHOWN] + "…"
        return f"the string {short!r}"
    if isinstance(value, int):
        return f"the integer {value}" if abs(value) < 10**_SHOWN else "a very long number"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def call_args(args: Mapping[str, Arg], texts: Mapping[str, str]) -> dict[str, object]:
    """Text fields (a form, a command line) as a tool call's JSON values, by the declaration.

    Number and bool text becomes its value; an optional arg's empty text is
    left out. Text that is not of its arg's type, and any undeclared field,
    stays the string it is, so dispatch refuses it with the reason a model
    would get.
    """
    values: dict[str, object] = {}
    for name, text in texts.items():
        arg = args.get(name)
        if arg is None:
            values[name] = text
        elif text == "" and not arg.required:
            continue
        else:
            try:
                values[name] = from_text(arg, text)
            except Invalid:
                values[name] = text
    return values


def read_args(
    args: Mapping[str, Arg],
    text_of: Callable[[str], str | None],
    path: Container[str] = (),
) -> dict[str, ArgValue | None]:
    """Every declared arg read from request text (`text_of(name)`, None when absent); the
    args named in `path` are path parameters (`path_problem`).

    An optional arg that is absent or empty reads as None. Raises `ArgError`
    naming every bad arg at once.
    """
    values: dict[str, ArgValue | None] = {}
    errors: dict[str, str] = {}
    for name, arg in args.items():
        text = text_of(name)
        if text is None or (text == "" and not arg.required):
            values[name] = None
            if arg.required:
                errors[name] = f"is required: {expects(arg)}"
            continue
        try:
            values[name] = value = parse(arg, text)
        except Invalid as exc:
            errors[name] = str(exc)
            continue
        if name in path and isinstance(value, str) and (problem := path_problem(value)):
            errors[name] = problem
    if errors:
        raise ArgError(errors)
    return values
