"""The bench-only venv of the peers Rastrillo is compared with (never the framework's).

fastapi-mcp 0.4 needs ``mcp`` 1.x while the framework uses 2.x, so the peers get
their own venv, ``bench/.venv-fastapi-mcp``, made on first use: fastapi-mcp (with
FastAPI and the ``mcp`` 1.x SDK, whose ``FastMCP`` comes with it), uvicorn and
SQLAlchemy. ``bench_mcp.py`` serves fastapi-mcp from it; ``bench_dispatch.py``
calls fastapi-mcp and FastMCP in-process in it (``peer_tools.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

VENV = Path(__file__).resolve().parent / ".venv-fastapi-mcp"
PACKAGES = ["fastapi-mcp==0.4.0", "mcp>=1.10,<2", "uvicorn>=0.30,<1", "sqlalchemy>=2,<3"]
_PROBE = (
    "import fastapi_mcp, sqlalchemy, mcp.server.fastmcp, importlib.metadata as m; "
    "assert m.version('mcp').startswith('1.')"
)


def peer_python() -> Path:
    """The venv's Python, the venv made or completed first if need be."""
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if subprocess.run([str(python), "-c", _PROBE], capture_output=True).returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], check=True)
    return python
