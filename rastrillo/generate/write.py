"""Write ``gen/`` from the scanned actions, or check it is current."""

from __future__ import annotations

import contextlib
import os

from rastrillo.collector import collector_paused
from rastrillo.errors import GenerateError
from rastrillo.generate.render import render_init_module, render_routes_module, render_tools_module
from rastrillo.generate.scan import scan_actions

GEN_DIR = "gen"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rastrillo.generate.scan import AppDir


def render_gen(app_dir: AppDir, *, processes: int | None = None) -> dict[str, str]:
    """The files of ``gen/`` as {name: text}; raises GenerateError on any problem.

    ``processes``: how many read the action files at once, as `scan_actions` takes it.
    """
    # Syntax trees and rendered lines hold no reference cycle and are freed as soon as
    # they are used, but the tens of thousands of nodes a large app parses would set off
    # the cycle collector again and again, each time walking every object alive: a
    # fiftieth of the command.
    with collector_paused():
        actions, problems = scan_actions(app_dir, processes=processes)
        if problems:
            raise GenerateError(problems)
        tools = [a.tool for a in actions if a.tool is not None]  # render_tools_module sorts
        return {
            "__init__.py": render_init_module(),
            "routes.py": render_routes_module([(a.method, a.path, a.source) for a in actions]),
            "tools.py": render_tools_module(tools),
        }


def generate(app_dir: AppDir, *, check: bool = False, processes: int | None = None) -> list[str]:
    """Write ``gen/`` (or with ``check``, compare it); return the names that differ.

    Nothing is written when a problem is found, and with ``check`` nothing is
    written at all: a non-empty return then means ``gen/`` is stale. ``processes``: as
    `scan_actions` takes it.
    """
    files = render_gen(app_dir, processes=processes)
    gen = os.path.join(app_dir, GEN_DIR)
    stale = [name for name, text in files.items() if _read(os.path.join(gen, name)) != text]
    extra = []
    if os.path.isdir(gen):
        extra = sorted(n for n in os.listdir(gen) if n.endswith(".py") and n not in files)
    if check:
        return sorted(stale + extra)
    try:
        os.mkdir(gen)
    except FileExistsError:
        if not os.path.isdir(gen):
            raise
    for name in stale:
        _write_atomic(gen, name, files[name])
    return stale


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except FileNotFoundError:
        return None


def _write_atomic(folder: str, name: str, text: str) -> None:
    """Write ``folder/name`` whole or not at all: a file of this process's beside it, renamed
    over it."""
    path = os.path.join(folder, name)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
