"""Find the action files of an app and derive their routes and tools."""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from operator import attrgetter

from rastrillo.errors import Problem
from rastrillo.generate.parallel import map_chunks, processes_for
from rastrillo.generate.read import read_tool
from rastrillo.generate.rules import check_registry
from rastrillo.registry.declare import ToolDef
from rastrillo.routing import (
    RouteFileError,
    framework_use,
    is_action_part,
    route_for_file,
    route_shape,
)

ACTIONS_DIR = "actions"

AppDir = str | os.PathLike[str]
"""An app's folder, as a `pathlib.Path` or a string: generate itself works on strings
(`os.path`, `os.scandir`), so the command line imports no `pathlib`."""


class ActionFile:
    """One action: where it is, its route, and its tool if it declares one.

    A plain class: a frozen dataclass would cost every start of `rastrillo generate` the
    compiling of methods nothing here calls, and each of a thousand actions three times
    as much to make.
    """

    __slots__ = ("method", "path", "source", "tool")

    def __init__(self, source: str, method: str, path: str, tool: ToolDef | None) -> None:
        self.source = source
        self.method = method
        self.path = path
        self.tool = tool


def scan_actions(
    app_dir: AppDir, *, processes: int | None = None
) -> tuple[list[ActionFile], list[Problem]]:
    """Every action under ``app_dir/actions`` and every problem found, sorted.

    The files are read by ``processes`` processes at once (`parallel.map_chunks`); by
    default as many as `parallel.processes_for` gives, ``1`` reads them in this process.
    The result is the same either way.
    """
    root = os.path.join(app_dir, ACTIONS_DIR)
    problems: list[Problem] = []
    actions: list[ActionFile] = []
    if not os.path.isdir(root):
        expected = (
            "no actions/ folder, where an app keeps one file per route "
            "(actions/index.GET.py answers GET /): give the app's folder, or run this in it"
        )
        return [], [Problem(os.path.realpath(app_dir), None, expected)]
    files = _action_files(root, "")
    if processes is None:
        processes = processes_for(len(files), _LEAST_PER_PROCESS)
    for action, found in map_chunks(_read_actions, files, processes, sending=_SENDING):
        problems.extend(found)
        if action is not None:
            actions.append(action)
    problems.extend(_collisions(actions))
    problems.extend(check_registry([a.tool for a in actions if a.tool is not None]))
    actions.sort(key=_BY_ROUTE)
    return actions, sorted(set(problems))


_LEAST_PER_PROCESS = 200
"""Files each process reads at least. A file takes about 0.6 M instructions to read; one
sent back from a child costs 0.1 M more (pickled there, unpickled here), and forking,
importing `pickle` and the child's exit about 30 M: with a CPU free, two processes gain
from about 120 files, and with none (a busy machine) every file sent costs. From 400 the
free CPU's gain is worth the busy machine's cost."""
_SENDING = 0.08
"""A file's results cost a child about 47 k instructions to pickle, against some 570 k to
read the file (callgrind, the bench's files): a child's share is that much smaller."""
_BY_ROUTE = attrgetter("path", "method")
_BY_SOURCE = attrgetter("source")


def _action_files(folder: str, prefix: str) -> list[tuple[str, str]]:
    """(file path, path relative to actions/) of every action file, in the folders' order.

    Plain strings and `os.scandir`: the walk costs a tenth of a pathlib one,
    which matters to an app with a thousand actions. Unsorted: `scan_actions`
    sorts the actions and the problems it finds, so the output never depends on it.
    """
    found: list[tuple[str, str]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            name = entry.name
            if not is_action_part(name):
                continue
            if entry.is_dir():
                found.extend(_action_files(entry.path, f"{prefix}{name}/"))
            elif name.endswith(".py"):
                found.append((entry.path, prefix + name))
    return found


def _read_actions(
    files: Sequence[tuple[str, str]],
) -> list[tuple[ActionFile | None, list[Problem]]]:
    """`_read_action` of each (file path, path relative to actions/), in order."""
    return [_read_action(file, rel, f"{ACTIONS_DIR}/{rel}") for file, rel in files]


def _read_action(file: str, rel: str, source: str) -> tuple[ActionFile | None, list[Problem]]:
    try:
        method, path = route_for_file(rel)
    except RouteFileError as exc:
        return None, [Problem(source, None, str(exc))]
    use = framework_use(path)
    if use is not None:
        message = f"{method} {path} is the framework's ({use}): this action would never run"
        return None, [Problem(source, None, message + "; choose another path")]
    # Bytes, decoded by the parser as Python's import decodes them (UTF-8 unless the
    # file says otherwise); a file that cannot be decoded is a syntax error.
    try:
        text = _read_bytes(file)
    except OSError as exc:
        return None, [Problem(source, None, f"cannot be read: {exc.strerror}")]
    try:
        tree = ast.parse(text, filename=source)
    except SyntaxError as exc:
        return None, [Problem(source, exc.lineno, f"syntax error: {exc.msg}")]
    except ValueError as exc:  # null bytes, on the Pythons that say so with ValueError
        return None, [Problem(source, None, f"cannot be read as Python: {exc}")]
    problems = _handle_problems(tree, source)
    tool, tool_problems = read_tool(tree, source, method, path)
    problems.extend(tool_problems)
    if problems:
        return None, problems
    return ActionFile(source, method, path, tool), []


_CHUNK = 1 << 16


def _read_bytes(file: str) -> bytes:
    """The whole file, by plain system calls: `open()` also builds a file object and a
    buffer for each file, which makes reading a thousand actions three times as costly.

    A regular file gives a short read only at its end, so a file smaller than a chunk
    takes one read.
    """
    fd = os.open(file, os.O_RDONLY)
    try:
        chunks = [os.read(fd, _CHUNK)]
        while len(chunks[-1]) == _CHUNK:
            chunks.append(os.read(fd, _CHUNK))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _handle_problems(tree: ast.Module, source: str) -> list[Problem]:
    """What is wrong with the file's ``handle``: none defined at module level, or a ``def``
    that cannot be called with the one argument every request gives it, ``ctx``.

    Statements are told apart by their exact type, as `ast.parse` makes them (the
    generator's reader does the same): a failed ``isinstance`` costs more than the
    comparison, at every statement of every file."""
    for node in tree.body:
        if type(node) is ast.FunctionDef or type(node) is ast.AsyncFunctionDef:
            if node.name == "handle":
                if _takes_one_argument(node.args):
                    return []
                return [
                    Problem(source, node.lineno, "handle takes one argument, ctx: def handle(ctx)")
                ]
        elif (type(node) is ast.Assign or type(node) is ast.ImportFrom) and _binds_handle(node):
            return []  # bound to something made elsewhere: checked when the app loads it
    return [Problem(source, None, "defines no handle(ctx) at module level")]


def _takes_one_argument(args: ast.arguments) -> bool:
    """Whether a function with these parameters can be called as ``handle(ctx)``."""
    positional = len(args.posonlyargs) + len(args.args)
    keywords_needed = None in args.kw_defaults  # a keyword-only parameter without a default
    takes_ctx = positional > 0 or args.vararg is not None
    return takes_ctx and positional - len(args.defaults) <= 1 and not keywords_needed


def _binds_handle(node: ast.Assign | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Assign):
        names = [t.id for t in node.targets if type(t) is ast.Name]
    else:
        names = [alias.asname or alias.name for alias in node.names]
    return "handle" in names


def _collisions(actions: list[ActionFile]) -> list[Problem]:
    seen: dict[tuple[str, str], ActionFile] = {}
    problems: list[Problem] = []
    for action in sorted(actions, key=_BY_SOURCE):
        key = (action.method, route_shape(action.path))
        first = seen.setdefault(key, action)
        if first is not action:
            message = (
                f"{action.method} {action.path} is also served by {first.source}: "
                "two files give the same method and path"
            )
            problems.append(Problem(action.source, None, message))
    return problems
