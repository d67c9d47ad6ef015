"""A bench's own venv, for what a bench compares against and the framework never depends on.

``bench_python("fastapi-mcp", ["fastapi-mcp==0.4.0", ...])`` makes
``bench/.venv-fastapi-mcp`` on first run, installs the requirements with pip and
returns its Python. The venv remembers what it was made with (``bench-installed``
inside it, with a digest of this checkout's ``pyproject.toml`` when the checkout
itself is installed), so a later run reinstalls only after that changed.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def bench_python(name: str, requirements: Sequence[str], *, with_checkout: bool = False) -> Path:
    """The Python of ``bench/.venv-<name>`` with ``requirements`` installed, and with this
    checkout installed editable too when ``with_checkout``."""
    venv = HERE / f".venv-{name}"
    python = venv / "bin" / "python"
    wanted = [*requirements]
    if with_checkout:
        digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
        wanted += [f"-e {ROOT}", f"# pyproject.toml {digest}"]
    stamp = venv / "bench-installed"
    record = "\n".join(wanted) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == record:
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    checkout = ["-e", str(ROOT)] if with_checkout else []
    install = [str(python), "-m", "pip", "install", "-q", *checkout, *requirements]
    subprocess.run(install, check=True)
    stamp.write_text(record)
    return python


FASTAPI_MCP = ["fastapi-mcp==0.4.0", "mcp>=1.10,<2", "uvicorn>=0.30,<1", "sqlalchemy>=2,<3"]
"""fastapi-mcp 0.4 needs ``mcp`` 1.x (whose ``FastMCP`` comes with it), the framework has
2.x: ``bench_mcp.py`` serves it, ``bench_dispatch.py`` calls it and FastMCP in-process."""


def fastapi_mcp_python() -> Path:
    """The Python of ``bench/.venv-fastapi-mcp``, the one venv of the MCP peers."""
    return bench_python("fastapi-mcp", FASTAPI_MCP)
