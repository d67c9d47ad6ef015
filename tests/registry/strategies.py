"""Hypothesis strategies for typed args: consistent declarations and JSON values of every type.

Shared by the validation, schema and dispatch tests, so each property is checked
over the same space of declarations generate accepts.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from rastrillo.registry.declare import Arg, ArgValue

DESCRIPTIONS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40)
INTS = st.integers(min_value=-(10**12), max_value=10**12)
FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)
TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
PATTERNS = st.sampled_from(
    ["^[a-z]+$", "[0-9]", "^A", "b$", "^(?:red|green)$", "x{2,}", r"\d", "^(?!no)", "."]
)


def _bounds(values: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, Any]]:
    def order(pair: tuple[Any, Any]) -> tuple[Any, Any]:
        low, high = pair
        if low is not None and high is not None and low > high:
            return high, low
        return low, high

    return st.tuples(st.none() | values, st.none() | values).map(order)


# The strategies `args` draws from, built once: one made inside a draw is made again for
# every example, and hypothesis works out anew whether each filtered one can produce anything.
_VALUES: dict[type, st.SearchStrategy[Any]] = {
    str: TEXTS,
    int: INTS,
    float: FLOATS,
    bool: st.booleans(),
}
_BOUNDS = {int: _bounds(INTS), float: _bounds(FLOATS | INTS), str: _bounds(st.integers(0, 20))}
_CHOICES = {
    kind: st.lists(
        values.filter(lambda v: not isinstance(v, str) or plain_text(v)),
        min_size=1,
        max_size=5,
        unique_by=lambda v: (v, type(v)),
    )
    for kind, values in _VALUES.items()
}
_KINDS = st.sampled_from([str, int, float, bool])
_EITHER = st.booleans()
_PATTERN = st.none() | PATTERNS


@st.composite
def args(
    draw: st.DrawFn,
    kinds: st.SearchStrategy[type] = _KINDS,
    required: st.SearchStrategy[bool] = _EITHER,
) -> Arg:
    """Any `Arg` whose declaration is consistent (the ones generate writes to gen/), of a
    type drawn from `kinds`, required as `required` draws it."""
    description = draw(DESCRIPTIONS)
    kind = draw(kinds)
    fields: dict[str, Any] = {"type": kind, "required": draw(required)}
    if kind in (int, float):
        low, high = draw(_BOUNDS[kind])
        fields["minimum"], fields["maximum"] = low, high
    if kind is str:
        short, long = draw(_BOUNDS[str])
        fields["min_length"], fields["max_length"] = short, long
        fields["pattern"] = draw(_PATTERN)
    if draw(st.booleans()):
        choices = draw(_CHOICES[kind])
        unique: list[Any] = []
        for choice in choices:
            if choice not in unique:
                unique.append(choice)
        fields["choices"] = unique
    return Arg(description, **{k: v for k, v in fields.items() if v is not None})


PATH_ARGS = args(st.sampled_from([str, int, float]), st.just(True))
"""Any `Arg` a path parameter may declare: required, and not bool. Drawn as such, not
filtered from `args()`, where three draws in eight pass and an example whose filter failed
three times in a row (a quarter of them, per path parameter) was thrown away whole."""


JSON_SCALARS = st.none() | st.booleans() | INTS | FLOATS | TEXTS
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=5,
)
"""A JSON value of any type, as a model's tool call may carry it."""


def values_for(arg: Arg) -> st.SearchStrategy[Any]:
    """Values aimed at `arg`: its choices and bounds and their neighbours, and anything else."""
    near: list[ArgValue] = []
    for bound in (arg.minimum, arg.maximum):
        if bound is not None:
            near += [bound, bound - 1, bound + 1, float(bound), str(bound)]
    near += list(arg.choices or ())
    near += [str(c) for c in arg.choices or ()]
    return st.sampled_from(near) | JSON_VALUES if near else JSON_VALUES


_NEVER = {
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    *range(0x7F, 0xA0),
    *range(0xD800, 0xE000),
    0x061C,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
}
"""Code points no text value may hold: C0 controls but tab and newline, DEL and C1, lone
surrogates, and the bidirectional marks, embeddings, overrides and isolates."""


PLAIN_CHARACTERS = st.characters(
    codec="utf-8",
    exclude_categories=("Cs",),
    exclude_characters="".join(chr(c) for c in sorted(_NEVER) if not 0xD800 <= c <= 0xDFFF),
)
"""Any character a text value may hold: what `plain_text` takes."""


def plain_text(text: str) -> bool:
    """Whether `text` holds none of the code points in `_NEVER`."""
    return not any(ord(c) in _NEVER for c in text)


def satisfies(arg: Arg, value: object) -> bool:
    """Whether a JSON value satisfies an `Arg`, written independently of the code under test."""
    import math

    import regress

    if arg.type is bool:
        if type(value) is not bool:
            return False
    elif arg.type is int:
        if type(value) is not int:
            return False
    elif arg.type is float:
        if type(value) not in (int, float) or not math.isfinite(float(value)):
            return False
    elif type(value) is not str:
        return False
    if arg.choices is not None and not any(
        type(value) is type(c) or arg.type is float for c in arg.choices if c == value
    ):
        return False
    if arg.minimum is not None and value < arg.minimum:  # type: ignore[operator]
        return False
    if arg.maximum is not None and value > arg.maximum:  # type: ignore[operator]
        return False
    if isinstance(value, str):
        if not plain_text(value):
            return False
        if arg.min_length is not None and len(value) < arg.min_length:
            return False
        if arg.max_length is not None and len(value) > arg.max_length:
            return False
        # The pattern as the providers read it (regress: ECMA-262, as JSON Schema says).
        if arg.pattern is not None and regress.Regex(arg.pattern).find(value) is None:
            return False
    return True
