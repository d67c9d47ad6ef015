"""The sidecar's rows in the app's database: the single-instance lease and the pass state.

The lease is what keeps two sidecars of one app on one database from running
passes at once (the duplicate-run failure every scheduler in a replicated web
app meets). It is a row naming its holder and an expiry on the wall clock;
the holder renews it, a standby takes it over once it has expired, so a
holder killed with SIGKILL is replaced within the lease time. On SQLite the
check-and-take runs in a ``BEGIN IMMEDIATE`` write transaction, so the read
and the write cannot interleave with another process's.

The state row is how the web process learns what the sidecar last did — for
``GET /api/next-due`` and for anyone asking whether the sidecar is alive.
Its instants are `Instant` columns, like every instant the framework stores.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, Float, Integer, String, Table, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from ..storage import METADATA, Database, Instant

DEFAULT_NAME = "default"
"""The lease and state key of an app's sidecar; set another when two apps share a database."""

lease_table = Table(
    "rastrillo_sidecar_lease",
    METADATA,
    Column("name", String(200), primary_key=True),
    Column("holder", String(200), nullable=False),
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


class Lease:
    """A renewable, expiring claim on running passes, held by one process at a time.

    ``wall`` is the clock the expiry is measured on; every process sharing the
    database must agree on it, so it is the wall clock, not a monotonic one.
    """

    def __init__(
        self,
        db: Database,
        name: str = DEFAULT_NAME,
        ttl: float = 60.0,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if ttl <= 0:
            raise ValueError("lease ttl must be positive")
        self.db = db
        self.name = name
        self.ttl = ttl
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._wall = wall

    def acquire(self) -> bool:
        """Take the lease if it is free or expired, or renew it if held; True when held."""
        now = self._wall()
        expires = now + self.ttl
        try:
            with self.db.write() as conn:
                row = conn.execute(
                    select(lease_table.c.holder, lease_table.c.expires_at)
                    .where(lease_table.c.name == self.name)
                    .with_for_update()
                ).first()
                if row is None:
                    conn.execute(
                        insert(lease_table).values(
                            name=self.name, holder=self.holder, expires_at=expires
                        )
                    )
                    return True
                if row.holder != self.holder and row.expires_at > now:
                    return False
                conn.execute(
                    update(lease_table)
                    .where(lease_table.c.name == self.name)
                    .values(holder=self.holder, expires_at=expires)
                )
                return True
        except IntegrityError:
            return False  # another process inserted the row first (PostgreSQL)

    def release(self) -> None:
        """Give the lease up, so a standby can take over without waiting out the ttl."""
        with self.db.write() as conn:
            conn.execute(
                delete(lease_table).where(
                    lease_table.c.name == self.name, lease_table.c.holder == self.holder
                )
            )


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
        changed = conn.execute(
            update(state_table).where(state_table.c.name == name).values(**values)
        ).rowcount
        if not changed:
            conn.execute(insert(state_table).values(name=name, **values))


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


def recorded_next_due(db: Database, name: str = DEFAULT_NAME) -> datetime | None:
    """When the sidecar said its next pass is due; None when nothing is scheduled or recorded."""
    state = read_state(db, name)
    return state.next_due if state is not None else None
