"""Load an app's files by path: its ``app.py`` and ``OPTIONS``, and its action files.

Action files are not importable by module name (``[id].GET.py``), and every
app has an ``app.py``, so each file is loaded under a private, stable name
derived from its absolute path (:func:`load_file`, the one loader).

An app imports its own modules by their plain names: its registry as ``from
gen import routes, tools``, a helper as ``import models``. So that several
apps can be loaded into one process (an app and its admin app, or many apps in
one test session), each app's own modules (the ``.py`` files and packages at
the top of its folder, ``gen`` among them) are imported afresh while its
``app.py`` runs, its actions included; whatever was loaded under those names
before is put back afterwards. Where nothing was, the app's module stays, for
code that imports it later.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from rastrillo.errors import ConfigError, RastrilloError, one_line_if_it_ends_the_script
from rastrillo.options import Options

if TYPE_CHECKING:
    from rastrillo.routing import Handle


def load_file(path: Path, kind: str) -> ModuleType:
    """The module of the Python file ``path``, executed once per process.

    Its name is ``rastrillo_<kind>_<hash of the absolute path>``: stable, and
    distinct for every file. If executing it raises, nothing is kept.
    """
    path = path.resolve()
    name = f"rastrillo_{kind}_{hashlib.sha256(str(path).encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RastrilloError(f"{path}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_handle(app_dir: Path, source: str) -> Handle:
    """The ``handle`` of an action file, ``source`` relative to ``app_dir``."""
    handle = getattr(load_file(app_dir / source, "action"), "handle", None)
    if not callable(handle):
        one_line_if_it_ends_the_script()
        raise RastrilloError(f"{source}: defines no handle(ctx)")
    return handle


def app_file(app_dir: Path) -> Path:
    """``app_dir``'s ``app.py``; a folder without one is refused with a `ConfigError`."""
    found = app_dir.resolve() / "app.py"
    if not found.is_file():
        raise ConfigError(f"no app.py in {app_dir.resolve()}: is this an app folder?")
    return found


def load_options(app_dir: Path) -> Options:
    """Execute ``app_dir/app.py`` (once per process) and return its ``OPTIONS``."""
    app_dir = app_dir.resolve()
    app_py = app_file(app_dir)
    own = _own_modules(app_dir)
    # Another app's modules of the same names step aside while this app loads; a module
    # from anywhere else (the standard library's, or this app's own, imported before) stays.
    saved = _pop_modules(own, lambda folder: folder != app_dir and _is_app_folder(folder))
    sys.path.insert(0, str(app_dir))
    _LOADING.append(app_dir)
    try:
        module = load_file(app_py, "app")
    finally:
        _LOADING.pop()
        sys.path.remove(str(app_dir))
        # Loaded from another app's app.py: that app's names must find its own modules.
        mine = own if _LOADING else {name.partition(".")[0] for name in saved}
        _pop_modules(mine, lambda folder: folder == app_dir)
        sys.modules.update(saved)
    options = getattr(module, "OPTIONS", None)
    if not isinstance(options, Options):
        raise ConfigError(f"{app_py} defines no OPTIONS = rastrillo.Options(...)")
    return options


_LOADING: list[Path] = []
"""The apps whose ``app.py`` runs now: more than one when an app loads another."""


def _own_modules(app_dir: Path) -> set[str]:
    """The names of the modules an app's folder holds at its top: its Python files (but
    ``app.py``, loaded under a name of its own) and its folders, ``gen`` among them."""
    names = set()
    for entry in app_dir.iterdir():
        if entry.is_dir():
            names.add(entry.name)
        elif entry.suffix == ".py":
            names.add(entry.stem)
        elif entry.name.endswith(tuple(EXTENSION_SUFFIXES)):
            names.add(entry.name.partition(".")[0])
    names.discard("app")
    return {name for name in names if name.isidentifier()}


def _is_app_folder(folder: Path | None) -> bool:
    """Whether a module's folder is an app's (it holds an ``app.py``); a module made in
    memory (no folder) is taken for one."""
    return folder is None or (folder / "app.py").is_file()


def _folder(name: str, module: ModuleType) -> Path | None:
    """The folder the top-level package of module ``name`` was imported from (None: not
    from a folder)."""
    depth = name.count(".")
    file = getattr(module, "__file__", None)
    spots = [file] if file is not None else list(getattr(module, "__path__", ()))
    if not spots:
        return None
    path = Path(spots[0])
    up = depth + (file is not None and path.stem == "__init__")
    return path.parents[up] if up < len(path.parents) else None


def _pop_modules(
    roots: set[str], from_folder: Callable[[Path | None], bool]
) -> dict[str, ModuleType]:
    """Take the modules under ``roots`` that were imported from a folder ``from_folder``
    accepts out of ``sys.modules``."""
    names = [
        name
        for name, module in list(sys.modules.items())
        if name.partition(".")[0] in roots and from_folder(_folder(name, module))
    ]
    return {name: sys.modules.pop(name) for name in names}
