"""The sidecar's rows in the app's database: the single-instance lease and the pass state.

The lease is what keeps two sidecars of one app on one database from running
passes at once (the duplicate-run failure every scheduler in a replicated web
app meets). It is a row naming its holder and when it expires; the holder
renews it, a standby takes it over once it has expired, so a holder killed
with SIGKILL is replaced within the lease time. Taking and renewing are one
conditional upsert, so two processes can never both win.

Expiry is never measured on the wall clock, which steps: it is seconds on the
clock the row names. On PostgreSQL that is the database server's clock, the
one clock every host sharing the database reads. On SQLite, whose processes
all run on one host, it is that host's monotonic clock, named by the host's
boot id so that a row left behind before a reboot counts as expired (where
the system names no boot, as outside Linux, the wall clock is the last resort).

The state row is how the web process learns what the sidecar last did — for
``GET /api/next-due`` and for anyone asking whether the sidecar is alive.
Its instants are `Instant` columns, like every instant the framework stores.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Float,
    Integer,
    String,
    Table,
    delete,
    func,
    or_,
    select,
)

from rastrillo.storage import METADATA, Database, Instant, upsert

DEFAULT_NAME = "default"
"""The lease and state key of an app's sidecar; set another when two apps share a database."""

lease_table = Table(
    "rastrillo_sidecar_lease",
    METADATA,
    Column("name", String(200), primary_key=True),
    Column("holder", String(200), nullable=False),
    Column("clock", String(64), nullable=False),
    Column("expires_at", Float, nullable=False),
)

state_table = Table(
    "rastrillo_sidecar_state",
    METADATA,
    Column("name", String(200), primary_key=True),
    Column("last_pass_at", Instant, nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("consecutive_failures", Integer, nullable=False),
    Column("next_due", Instant),
    Column("last_ok_at", Instant),
    Column("last_error_at", Instant),
)

_DATABASE_CLOCK = "database"


class Lease:
    """A renewable, expiring claim on running passes, held by one process at a time."""

    def __init__(self, db: Database, name: str = DEFAULT_NAME, ttl: float = 60.0) -> None:
        if ttl <= 0:
            raise ValueError("lease ttl must be positive")
        self.db = db
        self.name = name
        self.ttl = ttl
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def hold(self) -> bool:
        """Hold the lease for another ttl: take it if it is free or expired, renew it if it
        is this process's; True when this process holds it."""
        clock, now = self._clock()
        c = lease_table.c
        with self.db.write() as conn:
            return upsert(
                conn,
                lease_table,
                {
                    "name": self.name,
                    "holder": self.holder,
                    "clock": clock,
                    "expires_at": now + self.ttl,
                },
                key=["name"],
                where=or_(c.holder == self.holder, c.clock != clock, c.expires_at <= now),
            )

    def release(self) -> None:
        """Give the lease up, so a standby can take over without waiting out the ttl."""
        with self.db.write() as conn:
            conn.execute(
                delete(lease_table).where(
                    lease_table.c.name == self.name, lease_table.c.holder == self.holder
                )
            )

    def _clock(self) -> tuple[str, Any]:
        """The name of the clock expiry is measured on, and its reading (a SQL expression
        on PostgreSQL, read by the server as the statement runs)."""
        if not self.db.is_sqlite:
            now: ColumnElement[Any] = func.extract("epoch", func.clock_timestamp())
            return _DATABASE_CLOCK, now
        boot = _boot_id()
        if boot is None:  # no shared monotonic clock to name: the wall clock, as a last resort
            return "wall", self.db.clock.now().timestamp()
        return f"boot:{boot}", self.db.clock.monotonic()


@cache
def _boot_id() -> str | None:
    """This boot of this host (Linux), whose monotonic clock every process shares."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class SidecarState:
    """What the sidecar recorded after its last completed pass."""

    last_pass_at: datetime
    outcome: str
    consecutive_failures: int
    next_due: datetime | None
    last_ok_at: datetime | None
    last_error_at: datetime | None


def record_pass(
    db: Database,
    name: str,
    *,
    started_at: datetime,
    ok: bool,
    consecutive_failures: int,
    next_due: datetime | None,
) -> None:
    """Upsert the state row after a completed pass (ok or failed)."""
    values = {
        "last_pass_at": started_at,
        "outcome": "ok" if ok else "error",
        "consecutive_failures": consecutive_failures,
        "next_due": next_due,
        "last_ok_at" if ok else "last_error_at": started_at,
    }
    with db.write() as conn:
        upsert(conn, state_table, {"name": name, **values}, key=["name"])


def read_state(db: Database, name: str = DEFAULT_NAME) -> SidecarState | None:
    """The recorded state, or None when no pass has completed yet."""
    with db.read() as conn:
        row = conn.execute(select(state_table).where(state_table.c.name == name)).first()
    if row is None:
        return None
    return SidecarState(
        last_pass_at=row.last_pass_at,
        outcome=row.outcome,
        consecutive_failures=row.consecutive_failures,
        next_due=row.next_due,
        last_ok_at=row.last_ok_at,
        last_error_at=row.last_error_at,
    )
