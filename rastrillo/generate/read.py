"""Read an action's `TOOL` statically into a registry entry.

The action is never imported: generate must be safe to run on any checkout,
and a declaration made only of literals is one a reviewer can read at a glance.
"""

from __future__ import annotations

import ast

from rastrillo.errors import Problem, closest_field, unknown_field
from rastrillo.generate.rules import Declared, Refuse, check_tool
from rastrillo.registry.declare import (
    ARG_KEYWORDS,
    TOOL_FIELDS,
    Access,
    Arg,
    ToolDef,
    arg_problems,
    checked_tool_def,
    tool_id,
)

__all__ = ["read_tool"]

_ACCESS = {
    "rastrillo.ToolRead": Access.READ,
    "rastrillo.ToolWrite": Access.WRITE,
}
"""One spelling in a declaration; `rastrillo.Access` is the type code reading the registry sees."""
_STRING_FIELDS = ("description", "confirm")


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

    values, imports = _module_level(tree)
    for extra in values[1:]:
        refuse(extra.lineno, "TOOL is assigned more than once; an action declares one tool")
    if len(values) != 1:
        return None, problems
    value = values[0]
    if not (isinstance(value, ast.Call) and _dotted(value.func, imports) == "rastrillo.Tool"):
        refuse(value.lineno, "TOOL must be rastrillo.Tool(...) called with literal arguments")
        return None, problems
    declared = _read_call(value, imports, refuse)
    readable = not problems
    ident = tool_id(method, path)
    check_tool(declared, ident, method, path, refuse)
    if not readable:
        return None, problems
    assert declared.description is not None and declared.access is not None
    assert declared.args is not None and declared.confirm is not None
    defn = checked_tool_def(
        id=ident,
        method=method,
        path=path,
        description=declared.description,
        access=declared.access,
        args=declared.args,
        confirm=declared.confirm,
        source=source,
    )
    return defn, problems


def _module_level(tree: ast.Module) -> tuple[list[ast.expr], dict[str, str]]:
    """The values assigned to `TOOL` at module level, in order, and the module-level
    imports as local name → dotted name: one pass over the module's statements."""
    values: list[ast.expr] = []
    names: dict[str, str] = {}
    for node in tree.body:  # told apart by exact type, as in `scan._handle_problems`
        if type(node) is ast.Assign:
            if "TOOL" in [t.id for t in node.targets if type(t) is ast.Name]:
                values.append(node.value)
        elif type(node) is ast.AnnAssign:
            target = node.target
            if type(target) is ast.Name and target.id == "TOOL" and node.value is not None:
                values.append(node.value)
        elif type(node) is ast.Import:
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
        elif type(node) is ast.ImportFrom and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return values, names


def _dotted(node: ast.expr, imports: dict[str, str]) -> str | None:
    """`rastrillo.ToolWrite` for a name or attribute, however it was imported."""
    if type(node) is ast.Name:
        name = imports.get(node.id, node.id)
    elif type(node) is ast.Attribute and (base := _dotted(node.value, imports)):
        name = f"{base}.{node.attr}"
    else:
        return None
    return name.replace("rastrillo.registry.declare.", "rastrillo.", 1)


def _string(node: ast.expr) -> str | None:
    """The value of a string literal (adjacent literals included), else None."""
    if type(node) is ast.Constant and type(node.value) is str:
        return node.value
    return None


def _read_call(call: ast.Call, imports: dict[str, str], refuse: Refuse) -> Declared:
    declared = Declared(line=call.lineno)
    if call.args:
        refuse(call.args[0].lineno, "rastrillo.Tool takes keyword arguments only")
    for keyword in call.keywords:
        name, value = keyword.arg, keyword.value
        if name is None:
            refuse(value.lineno, "rastrillo.Tool takes no **mapping; write each field out")
            continue
        if name not in TOOL_FIELDS:
            refuse(keyword.lineno, unknown_field("rastrillo.Tool", name, TOOL_FIELDS))
            # One mistake, said once: the value is read as the field meant, so no rule
            # reports that field missing (`descripton=`: no "needs a description").
            meant = closest_field(name, TOOL_FIELDS)
            if meant is None or any(other.arg == meant for other in call.keywords):
                continue
            name = meant
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
        else:
            declared.args = _read_args(value, declared.arg_lines, imports, refuse)
    if "description" not in declared.lines:
        refuse(call.lineno, "TOOL needs a description")
    return declared


def _read_args(
    node: ast.expr, lines: dict[str, int], imports: dict[str, str], refuse: Refuse
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
_ARG_KEYWORDS = ("description", *ARG_KEYWORDS)


def _read_arg(
    node: ast.expr, name: str, imports: dict[str, str], refuse: Refuse
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
            arg = f"rastrillo.Arg for {name!r}"
            refuse(keyword.lineno, unknown_field(arg, str(field_name), _ARG_KEYWORDS))
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
