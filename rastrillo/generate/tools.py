"""Read an action's `TOOL` statically, check the registry's rules, and render `gen/tools.py`.

The action is never imported: generate must be safe to run on any checkout,
and a declaration made only of literals is one a reviewer can read at a glance.
Every rule holds for every provider at once, so the registry renders for all of
them without renaming anything (see `rastrillo.registry.schemas`).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from rastrillo.errors import Problem
from rastrillo.registry.confirm import placeholders
from rastrillo.registry.declare import Access, Arg, ToolDef, arg_problems, tool_id, type_name
from rastrillo.registry.schemas import WRITE_SUFFIX

__all__ = [
    "ARG_NAME",
    "MAX_DESCRIPTION",
    "MAX_ID",
    "check_registry",
    "read_tool",
    "render_tools_module",
]

MAX_DESCRIPTION = 1024
"""OpenAI's reported cap; it applies to the description as sent, write suffix included."""
MAX_ID = 64
"""OpenAI's and Gemini's tool-name cap (Anthropic and MCP allow 128)."""
ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
"""Valid as an Anthropic property key, a Vertex parameter name and a form field."""

_PATH_PARAM = re.compile(r"\{([^{}/]*)\}")
_ACCESS = {
    "rastrillo.ToolRead": Access.READ,
    "rastrillo.ToolWrite": Access.WRITE,
    "rastrillo.Access.READ": Access.READ,
    "rastrillo.Access.WRITE": Access.WRITE,
}
_STRING_FIELDS = ("description", "confirm")

_Refuse = Callable[[int, str], None]


@dataclass
class _Declared:
    """The fields of one `TOOL`; a field is None when it could not be read.

    `args` holds the readable entries of a dict literal (None if `args` is not
    one); `arg_lines` every name it declares, readable description or not.
    """

    line: int
    description: str | None = None
    access: Access | None = Access.READ
    args: dict[str, Arg | str] | None = field(default_factory=dict)
    confirm: str | None = ""
    lines: dict[str, int] = field(default_factory=dict)
    arg_lines: dict[str, int] = field(default_factory=dict)

    def line_of(self, name: str) -> int:
        return self.lines.get(name, self.line)


def read_tool(
    tree: ast.Module, source: str, method: str, path: str
) -> tuple[ToolDef | None, list[Problem]]:
    """The `TOOL` of one action file as a registry entry, with every rule it breaks.

    `(None, [])` when the file declares no tool. The def is returned whenever
    `TOOL` could be read, even if it breaks a rule, so that cross-tool checks
    can still name it; generate fails on any problem.
    """
    problems: list[Problem] = []

    def refuse(line: int, message: str) -> None:
        problems.append(Problem(file=source, line=line, message=message))

    call = _find_tool_call(tree, refuse)
    if call is None:
        return None, problems
    declared = _read_call(call, _imports(tree), refuse)
    readable = not problems
    _check(declared, method, path, refuse)
    if not readable:
        return None, problems
    assert declared.description is not None and declared.access is not None
    assert declared.args is not None and declared.confirm is not None
    defn = ToolDef(
        id=tool_id(method, path),
        method=method,
        path=path,
        description=declared.description,
        access=declared.access,
        args=declared.args,
        confirm=declared.confirm,
        source=source,
    )
    return defn, problems


def _find_tool_call(tree: ast.Module, refuse: _Refuse) -> ast.Call | None:
    values = [
        node.value
        for node in tree.body
        if (isinstance(node, ast.Assign) and any(map(_is_tool_name, node.targets)))
        or (isinstance(node, ast.AnnAssign) and _is_tool_name(node.target) and node.value)
    ]
    if len(values) > 1:
        for value in values[1:]:
            refuse(value.lineno, "TOOL is assigned more than once; an action declares one tool")
        return None
    if not values:
        return None
    value = values[0]
    if isinstance(value, ast.Call) and _dotted(value.func, _imports(tree)) == "rastrillo.Tool":
        return value
    refuse(value.lineno, "TOOL must be rastrillo.Tool(...) called with literal arguments")
    return None


def _is_tool_name(target: ast.expr) -> bool:
    return isinstance(target, ast.Name) and target.id == "TOOL"


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name → dotted name, for the module-level imports."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.expr, imports: dict[str, str]) -> str | None:
    """`rastrillo.ToolWrite` for a name or attribute, however it was imported."""
    if isinstance(node, ast.Name):
        name = imports.get(node.id, node.id)
    elif isinstance(node, ast.Attribute) and (base := _dotted(node.value, imports)):
        name = f"{base}.{node.attr}"
    else:
        return None
    return name.replace("rastrillo.registry.declare.", "rastrillo.", 1)


def _string(node: ast.expr) -> str | None:
    """The value of a string literal (adjacent literals included), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _read_call(call: ast.Call, imports: dict[str, str], refuse: _Refuse) -> _Declared:
    declared = _Declared(line=call.lineno)
    if call.args:
        refuse(call.args[0].lineno, "rastrillo.Tool takes keyword arguments only")
    for keyword in call.keywords:
        name, value = keyword.arg, keyword.value
        if name is None:
            refuse(value.lineno, "rastrillo.Tool takes no **mapping; write each field out")
            continue
        declared.lines[name] = value.lineno
        if name in _STRING_FIELDS:
            text = _string(value)
            if text is None:
                refuse(value.lineno, f"{name} must be a string literal")
            setattr(declared, name, text)
        elif name == "access":
            declared.access = _ACCESS.get(_dotted(value, imports) or "")
            if declared.access is None:
                refuse(value.lineno, "access must be rastrillo.ToolRead or rastrillo.ToolWrite")
        elif name == "args":
            declared.args = _read_args(value, declared.arg_lines, imports, refuse)
        else:
            refuse(
                value.lineno,
                f"rastrillo.Tool has no field {name!r}; "
                "it takes description, access, args and confirm",
            )
    if "description" not in declared.lines:
        refuse(call.lineno, "TOOL needs a description")
    return declared


def _read_args(
    node: ast.expr, lines: dict[str, int], imports: dict[str, str], refuse: _Refuse
) -> dict[str, Arg | str] | None:
    """The readable entries of a literal dict of name → description or `rastrillo.Arg(...)`.

    None if `args` is not a dict literal. Every readable name goes into
    `lines`, declaration readable or not, so the rules about names still see it.
    """
    if not isinstance(node, ast.Dict):
        refuse(node.lineno, "args must be a dict literal of names to descriptions or rastrillo.Arg")
        return None
    args: dict[str, Arg | str] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        name = None if key is None else _string(key)
        if key is None:
            refuse(value.lineno, "args cannot unpack another mapping with **")
        elif name is None:
            refuse(key.lineno, "each arg name must be a string literal")
        elif name in lines:
            refuse(key.lineno, f"arg {name!r} is declared twice")
        else:
            lines[name] = key.lineno
            arg = _read_arg(value, name, imports, refuse)
            if arg is not None:
                args[name] = arg
    return args


_ARG_TYPES = {"str": str, "int": int, "float": float, "bool": bool}
_ARG_KEYWORDS = (
    "description",
    "type",
    "required",
    "choices",
    "minimum",
    "maximum",
    "min_length",
    "max_length",
    "pattern",
)


def _read_arg(
    node: ast.expr, name: str, imports: dict[str, str], refuse: _Refuse
) -> Arg | str | None:
    """One arg: a description string literal, or `rastrillo.Arg(...)` of literals only.

    Every inconsistency of an `Arg` is refused at the line of the field at fault.
    """
    text = _string(node)
    if text is not None:
        return text
    if not (isinstance(node, ast.Call) and _dotted(node.func, imports) == "rastrillo.Arg"):
        refuse(
            node.lineno,
            f"arg {name!r} must be a description string literal or rastrillo.Arg(...)",
        )
        return None
    fields: dict[str, object] = {}
    lines: dict[str, int] = {}
    readable = True
    for position, value in enumerate(node.args):
        if position or isinstance(value, ast.Starred):
            refuse(value.lineno, f"rastrillo.Arg for {name!r} takes its description, then keywords")
            readable = False
        else:
            fields["description"], lines["description"] = _string(value), value.lineno
    for keyword in node.keywords:
        field_name, value = keyword.arg, keyword.value
        if field_name not in _ARG_KEYWORDS:
            refuse(
                value.lineno,
                f"rastrillo.Arg for {name!r} has no field {field_name!r}; it takes "
                + ", ".join(_ARG_KEYWORDS),
            )
            readable = False
            continue
        lines[field_name] = value.lineno
        if field_name == "type":
            kind = value.id if isinstance(value, ast.Name) else None
            fields["type"] = _ARG_TYPES.get(kind or "", kind or ast.unparse(value))
            continue
        try:
            fields[field_name] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            refuse(value.lineno, f"{field_name} of arg {name!r} must be a literal")
            readable = False
    if not isinstance(fields.get("description"), str):
        refuse(
            lines.get("description", node.lineno),
            f"arg {name!r} needs a description string literal",
        )
        readable = False
    description = fields.pop("description", None)
    for field_name, message in arg_problems(**fields):
        refuse(lines.get(field_name, node.lineno), f"arg {name!r}: {message}")
        readable = False
    if not readable:
        return None
    return Arg(description, **fields)  # type: ignore[arg-type]


def _check(declared: _Declared, method: str, path: str, refuse: _Refuse) -> None:
    """Every per-tool rule of the contract; each offender is refused with its line."""
    access, args, confirm = declared.access, declared.args, declared.confirm
    description = declared.description
    if description is not None:
        line = declared.line_of("description")
        sent = description + WRITE_SUFFIX if access is Access.WRITE else description
        if not description.strip():
            refuse(line, "description is empty; the model chooses tools by it")
        elif len(sent) > MAX_DESCRIPTION:
            refuse(
                line,
                f"description is {len(sent)} characters as sent to the model "
                f"(write tools add {WRITE_SUFFIX!r}); the limit is {MAX_DESCRIPTION}",
            )
    if access is Access.READ and method != "GET":
        refuse(
            declared.line_of("access"),
            f"a read tool must be a GET action, not {method}; "
            "declare access=rastrillo.ToolWrite if it changes state (access defaults to read)",
        )
    elif access is Access.WRITE and method == "GET":
        refuse(
            declared.line_of("access"),
            "a write tool cannot be a GET action: GET must not change state",
        )
    if access is Access.WRITE and confirm is not None and not confirm.strip():
        refuse(
            declared.line_of("confirm"),
            "a write tool needs a confirm sentence, the question its human approves",
        )
    for name, line in declared.arg_lines.items():
        if not ARG_NAME.fullmatch(name):
            refuse(line, f"arg name {name!r} must match {ARG_NAME.pattern}")
    if args is not None:
        declared_names = declared.arg_lines
        for param in dict.fromkeys(_PATH_PARAM.findall(path)):
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
    ident = tool_id(method, path)
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


HEADER = "# generated by rastrillo generate; do not edit"
_ACCESS_NAME = {Access.READ: "ToolRead", Access.WRITE: "ToolWrite"}
_LINE_LENGTH = 88
"""Ruff's default; longer lines (long descriptions) get a file-level E501 exemption."""


def render_tools_module(defs: list[ToolDef]) -> str:
    """The source of `gen/tools.py`: `tools()` returning the registry sorted by id.

    Deterministic for a given registry (sorted, `repr` literals) and already in
    ruff's format, so `generate --check` can compare it byte for byte even in an
    app that formats everything.
    """
    ordered = sorted(defs, key=lambda d: (d.id, d.source))
    entries = [line for defn in ordered for line in _entry(defn)]
    names = {_ACCESS_NAME[d.access] for d in ordered}
    if any(not arg.plain for defn in ordered for arg in defn.args.values()):
        names.add("Arg")
    lines = [
        '"""The tool registry: every action that declares TOOL, sorted by id."""',
        "",
        f"from rastrillo.registry.declare import {', '.join(sorted({'ToolDef', *names}))}",
        "",
        *(["_TOOLS = (", *entries, ")"] if entries else ["_TOOLS = ()"]),
        "",
        "",
        "def tools() -> list[ToolDef]:",
        '    """Every tool of the app, sorted by id."""',
        "    return list(_TOOLS)",
        "",
    ]
    if max(map(len, lines)) > _LINE_LENGTH:
        lines.insert(0, "# ruff: noqa: E501")
    return "\n".join([HEADER, *lines])


def _entry(defn: ToolDef) -> list[str]:
    args = [line for name, arg in defn.args.items() for line in _arg_entry(name, arg)]
    return [
        "    ToolDef(",
        f"        id={py_literal(defn.id)},",
        f"        method={py_literal(defn.method)},",
        f"        path={py_literal(defn.path)},",
        f"        description={py_literal(defn.description)},",
        f"        access={_ACCESS_NAME[defn.access]},",
        *(["        args={", *args, "        },"] if args else ["        args={},"]),
        f"        confirm={py_literal(defn.confirm)},",
        f"        source={py_literal(defn.source)},",
        "    ),",
    ]


def _arg_entry(name: str, arg: Arg) -> list[str]:
    """`"name": "description",` for a plain arg, else an `Arg(...)` one field a line.

    The trailing commas keep ruff's formatter from joining the lines, so the
    file stays in its format whatever the lengths.
    """
    indent = " " * 12
    if arg.plain:
        return [f"{indent}{py_literal(name)}: {py_literal(arg.description)},"]
    inner = indent + " " * 4
    lines = [f"{indent}{py_literal(name)}: Arg(", f"{inner}{py_literal(arg.description)},"]
    for field_name, value in arg.declared():
        if field_name == "type":
            lines.append(f"{inner}type={type_name(value)},")
        elif field_name == "choices":
            assert isinstance(value, tuple)
            lines.append(f"{inner}choices=[")
            lines.extend(f"{inner}    {_value_literal(choice)}," for choice in value)
            lines.append(f"{inner}],")
        else:
            lines.append(f"{inner}{field_name}={_value_literal(value)},")
    lines.append(f"{indent}),")
    return lines


def _value_literal(value: object) -> str:
    return py_literal(value) if isinstance(value, str) else repr(value)


def py_literal(text: str) -> str:
    """`repr`, with double quotes when that needs no escaping (the house style)."""
    literal = repr(text)
    if literal.startswith("'") and '"' not in text:
        literal = f'"{literal[1:-1]}"'
    return literal
