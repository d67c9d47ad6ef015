"""Load an app folder's ``app.py`` and its ``OPTIONS`` without running it.

Commands that act on an app folder (``tools``, ``audit``) and tests use this.
An app imports its registry as ``from gen import routes, tools``; so that
several apps can be loaded into one process, the ``gen`` package is imported
afresh for each app and not left in ``sys.modules``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

from .app import Options
from .errors import ConfigError


def load_options(app_dir: Path) -> Options:
    """Execute ``app_dir/app.py`` and return its ``OPTIONS``."""
    app_dir = app_dir.resolve()
    app_file = app_dir / "app.py"
    if not app_file.is_file():
        raise ConfigError(f"no app.py in {app_dir}: is this an app folder?")
    name = "rastrillo_app_" + hashlib.sha256(str(app_dir).encode()).hexdigest()[:16]
    if name in sys.modules:
        return _options_of(sys.modules[name], app_file)
    spec = importlib.util.spec_from_file_location(name, app_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = _pop_gen()
    sys.path.insert(0, str(app_dir))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(app_dir))
        _pop_gen()
        sys.modules.update(saved)
    sys.modules[name] = module
    return _options_of(module, app_file)


def _options_of(module: object, app_file: Path) -> Options:
    options = getattr(module, "OPTIONS", None)
    if not isinstance(options, Options):
        raise ConfigError(f"{app_file} defines no OPTIONS = rastrillo.Options(...)")
    return options


def _pop_gen() -> dict[str, object]:
    names = [n for n in sys.modules if n == "gen" or n.startswith("gen.")]
    return {n: sys.modules.pop(n) for n in names}
