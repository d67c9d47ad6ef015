"""A tiny app whose sidecar the process tests start as ``python sidecar_app.py sidecar run``.

``SIDECAR_MODE`` picks the pass; ``SIDECAR_DIR`` is where it leaves marks for
the test to read, and holds the database. Marks are stamped with the host's
monotonic clock, which all processes share and no clock step moves.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import rastrillo
from rastrillo.sidecar import PassContext, Sidecar

HERE = Path(os.environ["SIDECAR_DIR"])
MODE = os.environ["SIDECAR_MODE"]


def mark(text: str) -> None:
    with open(HERE / f"marks-{os.getpid()}", "a") as f:
        f.write(f"{text} {time.monotonic():.6f}\n")


def idle(ctx: PassContext) -> None:
    mark("pass")


def failing(ctx: PassContext) -> None:
    mark("pass")
    raise RuntimeError("the dependency is down")


def cooperative(ctx: PassContext) -> None:
    mark("start")
    while not ctx.stopping.wait(0.05):
        pass
    mark("stopped")


def stubborn(ctx: PassContext) -> None:
    mark("start")
    time.sleep(60)


async def cancellable(ctx: PassContext) -> None:
    mark("start")
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        mark("cancelled")
        raise


def busy(ctx: PassContext) -> datetime:
    mark("start")
    time.sleep(random.uniform(0, 0.03))
    mark("end")
    return datetime.now(UTC)


PASSES = {
    "idle": idle,
    "failing": failing,
    "cooperative": cooperative,
    "stubborn": stubborn,
    "cancellable": cancellable,
    "busy": busy,
}

sidecar = None
if MODE != "none":
    sidecar = Sidecar(
        pass_fn=PASSES[MODE],
        lease_ttl=float(os.environ.get("SIDECAR_TTL", "60")),
        shutdown_grace=float(os.environ.get("SIDECAR_GRACE", "15")),
    )

OPTIONS = rastrillo.Options(app_dir=HERE, db=str(HERE / "app.db"), sidecar=sidecar)

if __name__ == "__main__":
    sys.exit(rastrillo.run(OPTIONS, sys.argv[1:]))
