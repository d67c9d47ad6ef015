"""What an action declares to become a tool, and the registry entry generate makes of it.

Both types are frozen values, compared and hashed by content, so a registry can
be cached, diffed and shared between requests without defensive copies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Access", "ArgMap", "Tool", "ToolDef", "ToolRead", "ToolWrite", "tool_id"]


class Access(StrEnum):
    """Whether a tool only observes (`READ`) or changes state (`WRITE`)."""

    READ = "read"
    WRITE = "write"


ToolRead = Access.READ
ToolWrite = Access.WRITE


class ArgMap(Mapping[str, str]):
    """A read-only, hashable mapping of arg name → description, kept sorted by name.

    Sorted so that iteration (and so every rendered schema) does not depend on
    the order the author wrote the args in.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items = dict(sorted((items or {}).items()))

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return repr(self._items)


def _normalise(obj: Tool | ToolDef) -> None:
    """``access`` as the `Access` member (every check compares with ``is``), ``args`` frozen."""
    try:
        access = Access(obj.access) if isinstance(obj.access, str) else None
    except ValueError:
        access = None
    if access is None:
        raise ValueError(
            f"access must be rastrillo.ToolRead or rastrillo.ToolWrite, not {obj.access!r}"
        )
    object.__setattr__(obj, "access", access)
    if not isinstance(obj.args, ArgMap):
        object.__setattr__(obj, "args", ArgMap(obj.args))


@dataclass(frozen=True, kw_only=True)
class Tool:
    """The `TOOL = rastrillo.Tool(...)` an action file declares next to `handle`.

    `args` maps each argument's name to a description for the model; every
    `{param}` of the route must be one of them. `confirm` is the sentence a
    human approves before a write runs, with `{arg}` placeholders.
    """

    description: str
    access: Access = ToolRead
    args: Mapping[str, str] = field(default_factory=ArgMap)
    confirm: str = ""

    def __post_init__(self) -> None:
        _normalise(self)


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
    args: Mapping[str, str] = field(default_factory=ArgMap)
    confirm: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        _normalise(self)


_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def tool_id(method: str, path: str) -> str:
    """The stable tool id of a route: `POST /orders/{id}/cancel` → `orders_id_cancel_post`.

    Only letters, digits and `_`, never starting with a digit, so the id is a
    valid tool name for every provider without renaming.
    """
    ident = _NOT_ALNUM.sub("_", f"{path.removeprefix('/')}_{method.lower()}").strip("_")
    if not ident or ident[0].isdigit():
        ident = "a_" + ident
    return ident.lower()
