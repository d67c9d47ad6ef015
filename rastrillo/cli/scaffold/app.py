"""This app's options; `python app.py` serves it on http://127.0.0.1:8000."""

from pathlib import Path

import rastrillo
from gen import routes, tools

OPTIONS = rastrillo.Options(
    app_dir=Path(__file__).resolve().parent,
    routes=routes(),
    tools=tools(),
    db="app.db",
    version="0.1.0",
    security_headers=True,
    mcp=True,  # agents connect at /mcp; each write waits for the user (docs/mcp.md)
)

if __name__ == "__main__":
    raise SystemExit(rastrillo.run(OPTIONS))
