"""The sidecar: scheduled and delivery-driven work, outside any request.

``python app.py sidecar run`` calls ``Options.sidecar`` once per pass; the
pass does what is due and returns when the next pass is due (an aware
``datetime``) or ``None`` for nothing scheduled. See docs/sidecar.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rastrillo.clock import Clock, SystemClock
from rastrillo.errors import ConfigError
from rastrillo.logs import configure_logging
from rastrillo.sidecar.lease import Lease, SidecarState, read_state
from rastrillo.sidecar.loop import (
    SHUTDOWN_GRACE,
    PassContext,
    PassFunction,
    Sidecar,
    SidecarLoop,
    Sleeper,
    as_sidecar,
)
from rastrillo.sidecar.nextdue import next_due_endpoint
from rastrillo.sidecar.planner import BACKOFF_CAP, BACKOFF_INITIAL, MIN_PASS_GAP, POLL_FLOOR
from rastrillo.storage import Database

__all__ = [
    "BACKOFF_CAP",
    "BACKOFF_INITIAL",
    "MIN_PASS_GAP",
    "POLL_FLOOR",
    "SHUTDOWN_GRACE",
    "Clock",
    "Lease",
    "PassContext",
    "PassFunction",
    "Sidecar",
    "SidecarLoop",
    "SidecarState",
    "Sleeper",
    "SystemClock",
    "as_sidecar",
    "next_due_endpoint",
    "read_state",
    "run_sidecar",
]


def run_sidecar(
    sidecar_or_pass: Callable[..., Any] | Sidecar | None, db: Database, migrations: Path
) -> int:
    """Run the app's sidecar (``Options.sidecar``) until SIGTERM or SIGINT, on ``db``.

    The database is opened (``migrations`` applied) first, and disposed at the
    end. Returns the process exit code.
    """
    sidecar = as_sidecar(sidecar_or_pass)
    if sidecar is None:
        raise ConfigError(
            "`sidecar run` needs a sidecar, but Options.sidecar is not set; "
            "give Options a sidecar= pass function (see docs/sidecar.md)"
        )
    configure_logging()
    try:
        db.start(migrations)
        loop = SidecarLoop(
            sidecar.pass_fn,
            db=db,
            lease=Lease(db, sidecar.name, sidecar.lease_ttl),
            name=sidecar.name,
            jitter=sidecar.jitter,
            shutdown_grace=sidecar.shutdown_grace,
        )
        return asyncio.run(loop.run())
    finally:
        db.dispose()
