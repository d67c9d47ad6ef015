"""The tickets demo: events, orders a person can list, view and cancel.

`python app.py` serves it on http://127.0.0.1:8000 with demo data.
"""

from pathlib import Path

import rastrillo
import sidecar_jobs
import ticketing
from gen import routes, tools

OPTIONS = rastrillo.Options(
    app_dir=Path(__file__).resolve().parent,
    routes=routes(),
    tools=tools(),
    db="tickets.db",
    version="0.1.0",
    security_headers=True,
    setup=ticketing.seed_demo_data,
    sidecar=sidecar_jobs.release_expired_holds,
    next_due=sidecar_jobs.next_hold_expiry,
    demo=True,
    mcp=True,  # agents connect at /mcp; each write waits for the user (docs/mcp.md)
)

if __name__ == "__main__":
    raise SystemExit(rastrillo.run(OPTIONS))
