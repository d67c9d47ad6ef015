"""The tickets sidecar: release the tickets of orders whose hold ran out.

An order starts ``held`` and unpaid, with ``hold_expires_at``. One pass
expires every hold already past and puts its tickets back on sale, then
returns the earliest hold still pending: the loop sleeps until then, and
``GET /api/next-due`` tells the platform to wake the app at that moment.

The pass is idempotent without a bookmark: the ``status = 'held'`` condition
is the key, so an order is released exactly once however often the pass
runs, and the status change and the stock change commit together.

It works in batches of `BATCH` orders, one short write transaction each, and
checks ``ctx.stopping`` between them: a long catch-up never holds the write
lock for long, and a SIGTERM stops it within one batch (the sidecar then exits
0 and hands its lease over). What is left is still past due, so the next pass
carries on.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text

from rastrillo.sidecar import PassContext
from rastrillo.storage import Database

BATCH = 200


def release_expired_holds(ctx: PassContext) -> datetime | None:
    """Expire the holds that ran out; return when the next one runs out, or None."""
    assert ctx.db is not None
    now = ctx.started_at.isoformat()
    while not ctx.stopping.is_set():
        with ctx.db.write() as conn:
            released = conn.execute(
                text(
                    "UPDATE orders SET status = 'expired', hold_expires_at = NULL"
                    " WHERE id IN (SELECT id FROM orders WHERE status = 'held'"
                    " AND hold_expires_at <= :now ORDER BY id LIMIT :batch)"
                    " RETURNING event_id, quantity"
                ),
                {"now": now, "batch": BATCH},
            ).all()
            for order in released:
                conn.execute(
                    text("UPDATE events SET tickets_left = tickets_left + :n WHERE id = :id"),
                    {"n": order.quantity, "id": order.event_id},
                )
        if len(released) < BATCH:
            break
    return next_hold_expiry(ctx.db)


def next_hold_expiry(db: Database) -> datetime | None:
    """When the earliest pending hold runs out: ``GET /api/next-due`` answers with it.

    Asked fresh on every poll, so a hold taken a second ago is already counted.
    """
    earliest = db.query_one("SELECT MIN(hold_expires_at) AS at FROM orders WHERE status = 'held'")
    return datetime.fromisoformat(earliest.at) if earliest and earliest.at else None
