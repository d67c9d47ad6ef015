"""``rastrillo new NAME``: copy the scaffold and generate its ``gen/``."""

from __future__ import annotations

import shutil
from pathlib import Path

from rastrillo.errors import RastrilloError
from rastrillo.generate import generate

SCAFFOLD = Path(__file__).parent / "scaffold"


def scaffold(target: Path) -> Path:
    """Create a working app at ``target``; refuse to touch an existing folder."""
    if target.exists():
        raise RastrilloError(f"{target} already exists; choose a new name")
    if not target.name.isidentifier():
        raise RastrilloError(f"{target.name!r}: an app name is letters, digits and _")
    shutil.copytree(SCAFFOLD, target, ignore=shutil.ignore_patterns("__pycache__", "*.db*", "gen"))
    (target / "gitignore").rename(target / ".gitignore")
    pyproject = target / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("__NAME__", target.name))
    generate(target)
    return target
