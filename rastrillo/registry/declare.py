"""What an action declares to become a tool, and the registry entry generate makes of it.

Both types are frozen values, compared and hashed by content, so a registry can
be cached, diffed and shared between requests without defensive copies.
"""

from __future__ import annotations

import math
import re
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import KW_ONLY, dataclass, field, fields
from enum import StrEnum

from rastrillo.errors import refuse_unknown_fields

UNSAFE_TEXT = (
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""What no text value holds, from a tool call or a browser: control characters other than
tab and newline, lone surrogates (not UTF-8), and the bidirectional marks, embeddings,
overrides and isolates that can make a sentence read differently from what it says. A
regular expression's text, compiled where values are checked (``re`` caches it): compiled
at import, it would cost every ``rastrillo generate``."""

# `typing.TYPE_CHECKING` without importing `typing`: 8 % of what `rastrillo generate` imports.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Self

__all__ = [
    "ARG_TYPES",
    "WRITE_SUFFIX",
    "Access",
    "Arg",
    "ArgMap",
    "ArgType",
    "ArgValue",
    "Tool",
    "ToolDef",
    "ToolRead",
    "ToolWrite",
    "arg_problems",
    "checked_tool_def",
    "description_as_sent",
    "tool_id",
    "type_name",
]


class Access(StrEnum):
    """Whether a tool only observes (`READ`) or changes state (`WRITE`)."""

    READ = "read"
    WRITE = "write"


ToolRead = Access.READ
ToolWrite = Access.WRITE

WRITE_SUFFIX = " (write: requires human confirmation)"
"""Appended to a write tool's description, so the model knows the call may pause."""


def description_as_sent(description: str, access: Access | None) -> str:
    """A tool's description as a model reads it: a write's says that the call may pause.

    `ToolWrite`, the module's name for the member: `Access.WRITE` is read through the enum
    class, nine times as costly, and every schema of every tool asks this."""
    return description + WRITE_SUFFIX if access is ToolWrite else description


ArgType = type[str] | type[int] | type[float] | type[bool]
"""The Python types an arg may declare: its JSON type is string, integer, number or boolean."""
ArgValue = str | int | float | bool
"""A value an arg takes, as JSON gives it (a `float` arg also takes an integer)."""

ARG_TYPES: tuple[ArgType, ...] = (str, int, float, bool)
_NUMBERS = (int, float)


@dataclass(frozen=True)
class Arg:
    """One declared argument: its description for the model, its type and its constraints.

    `rastrillo.Arg("how many tickets", type=int, minimum=1, maximum=10)`. A plain
    string in `args` means `Arg(that_string)`: a required string. Bounds are
    inclusive; `pattern` is searched (not anchored) and read as JavaScript reads
    it, as JSON Schema's `pattern` is (`rastrillo.registry.pattern`); lengths count
    characters. An inconsistent declaration (see
    `arg_problems`) raises `ValueError`, so every `Arg` that exists is valid.
    """

    description: str
    _: KW_ONLY
    type: ArgType = str
    required: bool = True
    choices: tuple[ArgValue, ...] | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    constraints: tuple[tuple[str, object], ...] = field(
        init=False, repr=False, compare=False, default=()
    )
    """The constraint fields set (choices, bounds, lengths, pattern), in declaration order."""
    rendered: dict[object, Any] = field(init=False, repr=False, compare=False, default_factory=dict)
    """Each schema format's rendering of this arg, kept by `rastrillo.registry.schemas`."""

    def __new__(cls, *args: Any, **fields: Any) -> Self:
        """A misspelt field is one line naming the statement and the field meant."""
        refuse_unknown_fields("rastrillo.Arg", fields, ("description", *ARG_KEYWORDS))
        return super().__new__(cls)

    def __post_init__(self) -> None:
        if isinstance(self.choices, list):
            object.__setattr__(self, "choices", tuple(self.choices))
        constraints = tuple((n, v) for n in ARG_KEYWORDS[2:] if (v := getattr(self, n)) is not None)
        object.__setattr__(self, "constraints", constraints)
        problems = (
            []
            if self.plain
            else arg_problems(
                type=self.type,
                required=self.required,
                choices=self.choices,
                minimum=self.minimum,
                maximum=self.maximum,
                min_length=self.min_length,
                max_length=self.max_length,
                pattern=self.pattern,
            )
        )
        if not isinstance(self.description, str):
            problems.insert(0, ("description", "description must be a string"))
        if problems:
            raise ValueError("; ".join(message for _, message in problems))

    @property
    def plain(self) -> bool:
        """A required string with no constraint: what a plain description declares."""
        return self.type is str and self.required is True and not self.constraints

    def declared(self) -> list[tuple[str, object]]:
        """The keyword arguments that differ from the defaults, in declaration order."""
        return [
            (name, value)
            for name in ARG_KEYWORDS
            if (value := getattr(self, name)) != _DEFAULTS[name]
        ]

    def __repr__(self) -> str:
        shown = [repr(self.description)]
        for name, value in self.declared():
            shown.append(f"{name}={type_name(value) if name == 'type' else repr(value)}")
        return f"Arg({', '.join(shown)})"


# The keywords of ``Arg`` after its description, in declaration order; generate reads these.
ARG_KEYWORDS = tuple(f.name for f in fields(Arg) if f.init and f.name != "description")
_DEFAULTS: dict[str, object] = {"type": str, "required": True} | dict.fromkeys(ARG_KEYWORDS[2:])


def type_name(kind: object) -> str:
    """`int` for the type `int`: how a declaration names it (a name read as text stays)."""
    return kind if isinstance(kind, str) else getattr(kind, "__name__", repr(kind))


def _is_number(value: object) -> bool:
    return isinstance(value, _NUMBERS) and not isinstance(value, bool)


def _is_finite(value: object) -> bool:
    return _is_number(value) and math.isfinite(value)  # type: ignore[arg-type]


def _fits(kind: object, value: object) -> bool:
    """Whether a literal `value` is of the declared type (an int is also a float)."""
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return _is_finite(value)
    return isinstance(value, str)


def arg_problems(
    *,
    type: object = str,
    required: object = True,
    choices: object = None,
    minimum: object = None,
    maximum: object = None,
    min_length: object = None,
    max_length: object = None,
    pattern: object = None,
) -> list[tuple[str, str]]:
    """Every inconsistency of one arg's declaration, as (field, message) pairs.

    The one place the rules live: `Arg` raises on them, and generate reports them
    with the file and line of the declaration.
    """
    problems: list[tuple[str, str]] = []
    if type not in ARG_TYPES:
        problems.append(("type", f"type must be str, int, float or bool, not {type_name(type)}"))
        return problems
    name = type_name(type)
    if not isinstance(required, bool):
        problems.append(("required", "required must be True or False"))
    number = type in _NUMBERS
    for field_name, bound in (("minimum", minimum), ("maximum", maximum)):
        if bound is None:
            continue
        if not number:
            problems.append(
                (field_name, f"{field_name} applies to an int or float arg, not {name}")
            )
        elif not _fits(type, bound):
            problems.append((field_name, f"{field_name} must be a finite {name}"))
    if _fits(type, minimum) and _fits(type, maximum) and minimum > maximum:  # type: ignore[operator]
        problems.append(("minimum", f"minimum {minimum!r} is greater than maximum {maximum!r}"))
    for field_name, length in (("min_length", min_length), ("max_length", max_length)):
        if length is None:
            continue
        if type is not str:
            problems.append((field_name, f"{field_name} applies to a str arg, not {name}"))
        elif not (isinstance(length, int) and not isinstance(length, bool) and length >= 0):
            problems.append((field_name, f"{field_name} must be a whole number, 0 or more"))
    lengths_ok = all(
        isinstance(n, int) and not isinstance(n, bool) for n in (min_length, max_length)
    )
    if lengths_ok and min_length > max_length:  # type: ignore[operator]
        problems.append(
            ("min_length", f"min_length {min_length} is greater than max_length {max_length}")
        )
    if pattern is not None:
        if type is not str:
            problems.append(("pattern", f"pattern applies to a str arg, not {name}"))
        elif not isinstance(pattern, str):
            problems.append(("pattern", "pattern must be a string"))
        elif (problem := _pattern_problem(pattern, max_length)) is not None:
            problems.append(("pattern", problem))
    if choices is not None:
        problems.extend(_choice_problems(type, choices))
    return problems


def _pattern_problem(pattern: str, max_length: object) -> str | None:
    """Why a pattern cannot be declared: not a pattern every provider reads alike, or one
    a value could make backtrack for long.

    Its two modules are imported here, on the first pattern: they cost `rastrillo generate`
    a tenth of its imports, and most apps declare no pattern.
    """
    from rastrillo.registry.backtrack import backtracking_problem
    from rastrillo.registry.pattern import pattern_problem

    problem = pattern_problem(pattern)
    if problem is None and (max_length is None or _fits(int, max_length)):
        problem = backtracking_problem(pattern, max_length)  # type: ignore[arg-type]
    return problem


def _choice_problems(kind: ArgType, choices: object) -> list[tuple[str, str]]:
    if not isinstance(choices, list | tuple) or not choices:
        return [("choices", "choices must be a non-empty list")]
    wrong = [c for c in choices if not _fits(kind, c)]
    if wrong:
        return [("choices", f"choices must all be {type_name(kind)}: {wrong[0]!r} is not")]
    seen: list[object] = []
    for choice in choices:
        if choice in seen:
            return [("choices", f"choice {choice!r} is repeated")]
        if isinstance(choice, str) and (bad := re.search(UNSAFE_TEXT, choice)) is not None:
            return [
                (
                    "choices",
                    f"choice {choice!r} holds the character U+{ord(bad[0]):04X}, which no "
                    "value may hold",
                )
            ]
        seen.append(choice)
    return []


_PLAIN_FIELDS = dict(Arg("").__dict__)


def _plain_arg(description: str) -> Arg:
    """`Arg(description)`, made as a copy of a plain arg's fields: most args are declared
    by a description alone, and the dataclass's checks, which such an arg always passes,
    cost six times the copy (a tenth of `rastrillo generate`'s reading of a `TOOL`)."""
    if not isinstance(description, str):
        return Arg(description)  # refused, as the constructor words it
    arg = object.__new__(Arg)
    values = arg.__dict__
    values.update(_PLAIN_FIELDS)
    values["description"] = description
    values["rendered"] = {}
    return arg


class ArgMap(Mapping[str, Arg]):
    """A read-only, hashable mapping of arg name → `Arg`, kept sorted by name.

    Sorted so that iteration (and so every rendered schema) does not depend on
    the order the author wrote the args in. A plain string value becomes
    `Arg(that_string)`.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Arg | str] | None = None) -> None:
        self._items = {
            name: arg if isinstance(arg, Arg) else _plain_arg(arg)
            for name, arg in sorted((items or {}).items())
        }

    def __getitem__(self, key: str) -> Arg:
        return self._items[key]

    def keys(self) -> KeysView[str]:
        return self._items.keys()

    def values(self) -> ValuesView[Arg]:
        return self._items.values()

    def items(self) -> ItemsView[str, Arg]:
        return self._items.items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(ArgMap(other).items())
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return repr(self._items)


class ArgsField:
    """The ``args`` field of `Tool` and `ToolDef`: given as a mapping of name to an `Arg` or
    a description (a required string), kept as an `ArgMap`.

    A data descriptor, so that the dataclass's ``__init__`` (and ``dataclasses.replace``)
    converts what it is given, and a type checker sees both sides: ``__set__`` is what the
    constructor takes, ``__get__`` what reading the field gives.
    """

    def __get__(self, obj: object, owner: type | None = None) -> ArgMap:
        if obj is None:
            return ArgMap()  # the field's default, as the dataclass reads it
        args: ArgMap = obj.__dict__["args"]
        return args

    def __set__(self, obj: object, value: Mapping[str, Arg | str]) -> None:
        obj.__dict__["args"] = value if isinstance(value, ArgMap) else ArgMap(value)


def _normalise_access(obj: Tool | ToolDef) -> None:
    """``access`` as the `Access` member (every check compares with ``is``)."""
    if isinstance(obj.access, Access):
        return
    try:
        access = Access(obj.access) if isinstance(obj.access, str) else None
    except ValueError:
        access = None
    if access is None:
        raise ValueError(
            f"access must be rastrillo.ToolRead or rastrillo.ToolWrite, not {obj.access!r}"
        )
    object.__setattr__(obj, "access", access)


@dataclass(frozen=True, kw_only=True)
class Tool:
    """The `TOOL = rastrillo.Tool(...)` an action file declares next to `handle`.

    `args` maps each argument's name to a description for the model (a required
    string) or an `Arg`; every `{param}` of the route must be one of them.
    `confirm` is the sentence a human approves before a write runs, with `{arg}`
    placeholders.
    """

    description: str
    access: Access = ToolRead
    args: ArgsField = ArgsField()
    confirm: str = ""

    def __new__(cls, *args: Any, **fields: Any) -> Self:
        """A misspelt field is one line naming the action's line and the field meant, as
        `rastrillo generate` names it (``descripton``: did you mean ``description``?)."""
        refuse_unknown_fields("rastrillo.Tool", fields, TOOL_FIELDS)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        _normalise_access(self)


TOOL_FIELDS = tuple(f.name for f in fields(Tool))
"""The fields of `Tool`, as a declaration spells them: generate accepts exactly these."""


@dataclass(frozen=True, kw_only=True)
class ToolDef:
    """One registry entry: a tool together with its route and the file declaring it.

    `source` is the action file relative to the app folder, so an error about
    the tool can name where to fix it.
    """

    id: str
    method: str
    path: str
    description: str
    access: Access = ToolRead
    args: ArgsField = ArgsField()
    confirm: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        _normalise_access(self)


def checked_tool_def(
    *,
    id: str,
    method: str,
    path: str,
    description: str,
    access: Access,
    args: Mapping[str, Arg | str],
    confirm: str,
    source: str,
) -> ToolDef:
    """`ToolDef(...)` for fields already of their types, as generate has read them: the
    same entry (equal, same repr and hash), with its fields set straight into its dict.

    The frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``
    and normalises ``access``; for a thousand tools that is a tenth of reading them.
    """
    defn = object.__new__(ToolDef)
    defn.__dict__.update(
        id=id,
        method=method,
        path=path,
        description=description,
        access=access,
        args=ArgMap(args),
        confirm=confirm,
        source=source,
    )
    return defn


_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")


def tool_id(method: str, path: str) -> str:
    """The stable tool id of a route: `POST /orders/{id}/cancel` → `orders_id_cancel_post`.

    Only letters, digits and `_`, never starting with a digit, so the id is a
    valid tool name for every provider without renaming: the runs of ASCII letters and
    digits of the path and method, joined by `_`.
    """
    ident = "_".join(_ALNUM_RUN.findall(f"{path}_{method}"))
    if not ident or ident[0].isdigit():
        ident = "a_" + ident
    return ident.lower()
