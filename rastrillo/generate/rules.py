"""The rules a tool declaration must keep, for one tool and across the registry.

Every rule holds for every provider at once, so the registry renders for all of
them without renaming anything (see `rastrillo.registry.schemas`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

from rastrillo.errors import Problem
from rastrillo.registry.confirm import placeholders
from rastrillo.registry.declare import (
    WRITE_SUFFIX,
    Access,
    Arg,
    ToolDef,
    ToolRead,
    description_as_sent,
)
from rastrillo.routing import path_params

__all__ = [
    "ARG_NAME",
    "MAX_DESCRIPTION",
    "MAX_ID",
    "Declared",
    "Refuse",
    "check_registry",
    "check_tool",
]

MAX_DESCRIPTION = 1024
"""OpenAI's reported cap; it applies to the description as sent, write suffix included."""
MAX_ID = 64
"""OpenAI's and Gemini's tool-name cap (Anthropic and MCP allow 128)."""
ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
"""Valid as an Anthropic property key, a Vertex parameter name and a form field."""

Refuse = Callable[[int, str], None]
"""Records one problem: the line it is on and what is wrong."""


class Declared:
    """The fields of one `TOOL`; a field is None when it could not be read.

    `args` holds the readable entries of a dict literal (None if `args` is not
    one); `arg_lines` every name it declares, readable description or not.
    A plain class: a dataclass would cost every start of `rastrillo generate` the
    compiling of methods that nothing here calls.
    """

    def __init__(self, line: int) -> None:
        self.line = line
        self.description: str | None = None
        self.access: Access | None = ToolRead
        self.args: dict[str, Arg | str] | None = {}
        self.confirm: str | None = ""
        self.lines: dict[str, int] = {}
        self.arg_lines: dict[str, int] = {}

    def line_of(self, name: str) -> int:
        return self.lines.get(name, self.line)


def check_tool(declared: Declared, ident: str, method: str, path: str, refuse: Refuse) -> None:
    """Every rule one tool must keep; each offender is refused with its line.

    ``ident`` is the route's `tool_id`, which the caller has made for the registry entry.
    """
    access, args, confirm = declared.access, declared.args, declared.confirm
    description = declared.description
    # Each read once: `Access.WRITE` goes through the enum class's `__getattr__`.
    read, write = access is Access.READ, access is Access.WRITE
    if description is not None:
        sent = description_as_sent(description, access)
        if not description.strip():
            refuse(
                declared.line_of("description"),
                "description is empty; the model chooses tools by it",
            )
        elif len(sent) > MAX_DESCRIPTION:
            refuse(
                declared.line_of("description"),
                f"description is {len(sent)} characters as sent to the model "
                f"(write tools add {WRITE_SUFFIX!r}); the limit is {MAX_DESCRIPTION}",
            )
    if read and method != "GET":
        refuse(
            declared.line_of("access"),
            f"a read tool must be a GET action, not {method}; "
            "declare access=rastrillo.ToolWrite if it changes state (access defaults to read)",
        )
    elif write and method == "GET":
        refuse(
            declared.line_of("access"),
            "a write tool cannot be a GET action: GET must not change state",
        )
    if write and confirm is not None and not confirm.strip():
        refuse(
            declared.line_of("confirm"),
            "a write tool needs a confirm sentence, the question its human approves",
        )
    for name, line in declared.arg_lines.items():
        if not ARG_NAME.fullmatch(name):
            refuse(line, f"arg name {name!r} must match {ARG_NAME.pattern}")
    if args is not None:
        declared_names = declared.arg_lines
        for param in dict.fromkeys(path_params(path)):
            arg = args.get(param)
            if param not in declared_names:
                refuse(
                    declared.line_of("args"),
                    f"path parameter {param!r} of {path} must be declared in args",
                )
            elif isinstance(arg, Arg) and not arg.required:
                refuse(
                    declared.arg_lines[param],
                    f"path parameter {param!r} cannot be optional: the path needs it",
                )
            elif isinstance(arg, Arg) and arg.type is bool:
                refuse(declared.arg_lines[param], f"path parameter {param!r} cannot be a bool")
        for name in dict.fromkeys(placeholders(confirm or "")):
            arg = args.get(name)
            if name not in declared_names:
                refuse(declared.line_of("confirm"), f"confirm placeholder {{{name}}} is not an arg")
            elif isinstance(arg, Arg) and not arg.required:
                refuse(
                    declared.line_of("confirm"),
                    f"confirm placeholder {{{name}}} names an optional arg; the sentence "
                    "would show a hole when it is left out",
                )
    if len(ident) > MAX_ID:
        refuse(
            declared.line,
            f"tool id {ident!r} is {len(ident)} characters; the limit is {MAX_ID} "
            "(shorten the action's path)",
        )


def check_registry(defs: list[ToolDef]) -> list[Problem]:
    """The rules across tools: no two tools may share an id; each file is named."""
    sources: defaultdict[str, list[str]] = defaultdict(list)
    for defn in defs:
        sources[defn.id].append(defn.source)
    problems = []
    for ident, files in sources.items():
        for file in files if len(files) > 1 else ():
            others = ", ".join(sorted(f for f in files if f != file) or [file])
            problems.append(
                Problem(file=file, line=None, message=f"tool id {ident!r} is also used by {others}")
            )
    return sorted(problems)
