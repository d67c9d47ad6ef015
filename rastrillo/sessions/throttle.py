"""Rate limits: attempts counted per key (an account, a client address) in a window.

Password attempts are counted per account and per client address; the OAuth
endpoints that store a row for anyone who asks per address, per web origin at an
address (registration), or per registered client (authorize). Counts live in the
app's database so every worker sees them. An attempt is counted *before* the work
it limits, in one write transaction, so a burst of parallel attempts cannot slip
past the limit; a sign-in that succeeds takes its count back.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import Column, Connection, Integer, String, Table, delete, select

from rastrillo.errors import RastrilloError
from rastrillo.storage import METADATA, Database, Instant, serialize, upsert

attempts_table = Table(
    "rastrillo_sign_in_attempts",
    METADATA,
    Column("key", String(80), primary_key=True),
    Column("attempts", Integer, nullable=False),
    Column("window_start", Instant, nullable=False),
)


class TooManyAttempts(RastrilloError):
    """Refused for now: a limit is used up; ``retry_after`` says for how many seconds."""

    def __init__(self, retry_after: int, what: str = "failed sign-in attempts") -> None:
        super().__init__(f"too many {what}; try again in {retry_after} s")
        self.retry_after = retry_after


def account_key(account: str) -> str:
    return "account:" + hashlib.sha256(account.strip().casefold().encode()).hexdigest()[:64]


def address_key(address: str, purpose: str = "address") -> str:
    """The key of a client address's count; ``purpose`` (at most 16 characters) keeps the
    counts of different limits apart. The address is counted as :func:`client_of` says."""
    return f"{purpose}:{client_of(address)[:63]}"


def origin_key(address: str, origin: str, purpose: str) -> str:
    """The key of the count of one web origin's requests from a client address, as a
    digest (an ``Origin`` header may be long); ``purpose`` as for :func:`address_key`."""
    digest = hashlib.sha256(f"{client_of(address)} {origin}".encode()).hexdigest()
    return f"{purpose}:{digest[:63]}"


def client_of(address: str) -> str:
    """The client an address stands for: an IPv6 address's /64, an IPv4 address however
    it is written (``::ffff:203.0.113.7`` is ``203.0.113.7``), anything else as it is.

    A host is given a whole /64 and may use any address in it, so counting IPv6
    addresses one by one would give one client 2**64 limits instead of one.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))


def take_attempt(
    db: Database, limits: dict[str, int], window: timedelta, what: str = "failed sign-in attempts"
) -> None:
    """Count one attempt against each key, or raise TooManyAttempts (saying ``what`` was
    too many) if any is used up."""
    t = db.clock.now()
    with db.write() as conn:
        serialize(conn, attempts_table.name)  # every process counts against the same rows
        rows = {key: _current(conn, key, t, window) for key in limits}
        waits = [
            (start + window - t).total_seconds()
            for key, (attempts, start) in rows.items()
            if attempts >= limits[key]
        ]
        if waits:
            raise TooManyAttempts(max(1, math.ceil(max(waits))), what)
        _forget_passed(conn, t, window, rows)
        for key, (attempts, start) in rows.items():
            _save(conn, key, attempts + 1, start)


def give_back(db: Database, keys: list[str]) -> None:
    """Undo one counted attempt on each key (the attempt succeeded)."""
    with db.write() as conn:
        serialize(conn, attempts_table.name)
        for key in keys:
            row = conn.execute(select(attempts_table).where(attempts_table.c.key == key)).first()
            if row is not None:
                _save(conn, key, max(0, row.attempts - 1), row.window_start)


def _forget_passed(conn: Connection, t: datetime, window: timedelta, keys: Iterable[str]) -> None:
    """Delete the counts whose window has passed, of each kind of key counted here.

    Each name an unauthenticated client tries leaves a count; kept, they would grow
    the table by a row per name, for ever. A kind (``account``, ``address``, an OAuth
    purpose) is counted over one window; its own row, its name alone, says when its
    passed counts were last deleted, so they are looked for once a window, not at
    every attempt.
    """
    for kind in {key.partition(":")[0] for key in keys}:
        if _current(conn, kind, t, window)[0]:
            continue
        conn.execute(
            delete(attempts_table).where(
                attempts_table.c.key > kind + ":",
                attempts_table.c.key < kind + ";",  # ";" follows ":": every "kind:…" key
                attempts_table.c.window_start <= t - window,
            )
        )
        _save(conn, kind, 1, t)


def _current(conn: Connection, key: str, t: datetime, window: timedelta) -> tuple[int, datetime]:
    row = conn.execute(select(attempts_table).where(attempts_table.c.key == key)).first()
    if row is None or t >= row.window_start + window:
        return 0, t
    return row.attempts, row.window_start


def _save(conn: Connection, key: str, attempts: int, start: datetime) -> None:
    if attempts:
        row = {"key": key, "attempts": attempts, "window_start": start}
        upsert(conn, attempts_table, row, key=["key"])
    else:
        conn.execute(delete(attempts_table).where(attempts_table.c.key == key))
