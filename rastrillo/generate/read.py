"""Read an action's `TOOL` statically into a registry entry.

The action is never imported: generate must be safe to run on any checkout,
and a declaration made only of literals is one a reviewer can read at a glance.
"""

from __future__ import annotations

import ast

from rastrillo.errors import Problem
from rastrillo.registry.declare import Access, ToolDef, tool_id

from .rules import Declared, Refuse, check_tool

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

    call = _find_tool_call(tree, refuse)
    if call is None:
        return None, problems
    declared = _read_call(call, _imports(tree), refuse)
    readable = not problems
    check_tool(declared, method, path, refuse)
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


def _find_tool_call(tree: ast.Module, refuse: Refuse) -> ast.Call | None:
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


def _read_call(call: ast.Call, imports: dict[str, str], refuse: Refuse) -> Declared:
    declared = Declared(line=call.lineno)
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
            declared.args = _read_args(value, declared.arg_lines, refuse)
        else:
            refuse(
                value.lineno,
                f"rastrillo.Tool has no field {name!r}; "
                "it takes description, access, args and confirm",
            )
    if "description" not in declared.lines:
        refuse(call.lineno, "TOOL needs a description")
    return declared


def _read_args(node: ast.expr, lines: dict[str, int], refuse: Refuse) -> dict[str, str] | None:
    """The readable entries of a literal dict of name → description; None if not a dict.

    Every readable name goes into `lines`, description readable or not, so the
    rules about names still see it.
    """
    if not isinstance(node, ast.Dict):
        refuse(node.lineno, "args must be a dict literal of string names to string descriptions")
        return None
    args: dict[str, str] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        name = None if key is None else _string(key)
        text = _string(value)
        if key is None:
            refuse(value.lineno, "args cannot unpack another mapping with **")
        elif name is None:
            refuse(key.lineno, "each arg name must be a string literal")
        elif name in lines:
            refuse(key.lineno, f"arg {name!r} is declared twice")
        else:
            lines[name] = key.lineno
            if text is None:
                refuse(value.lineno, f"the description of arg {name!r} must be a string literal")
            else:
                args[name] = text
    return args
