"""The tickets domain: queries and changes shared by the actions and the sidecar."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text
from starlette.responses import Response

from rastrillo import Context
from rastrillo.registry.validate import parse_int
from rastrillo.storage import Database, rows_as_dicts

MAX_PER_ORDER = 10
_DIGITS = re.compile(r"[0-9]{1,18}")
HOLD = timedelta(minutes=15)

DEMO_USERS = [
    ("alice@example.com", "Alice Martin"),
    ("bob@example.com", "Bob Okafor"),
]
DEMO_PASSWORD = "tickets-demo"
DEMO_PASSWORD_HASH = (
    "$argon2id$v=19$m=65536,t=3,p=4$11qypcwJSyS5EuwnCo7JCg$"
    "R4RSBhRVy8Z/asW7HklcYp5NviJzAQ/M/K94OGnfr40"
)
"""``hash_password(DEMO_PASSWORD)``, made once: seeding a demo database then runs no
argon2 hash (a fifth of a second of CPU, paid by every fresh database a test or a host
starts on). A sign-in verifies it as any stored hash."""
DEMO_EVENTS = [
    ("Jazz at the Harbour", "Harbour Hall", "2027-01-15T20:00:00+00:00", 120),
    ("Chess Open, day one", "City Library", "2027-02-03T09:30:00+00:00", 40),
    ("Comedy Night", "The Old Mill", "2027-02-20T21:00:00+00:00", 80),
]


class OrderError(Exception):
    """A change the order's state or the event's stock does not allow."""


def now() -> datetime:
    return datetime.now(UTC)


def seed_demo_data(db: Database) -> None:
    """Demo users, events and an order each, once, into an empty database.

    Seeded already: only a read, so the app starts while another process writes.
    """
    if db.query_one("SELECT 1 FROM events LIMIT 1") is not None:
        return
    with db.write() as conn:
        if conn.execute(text("SELECT COUNT(*) FROM events")).scalar_one():
            return  # another process seeded it meanwhile
        for email, name in DEMO_USERS:
            conn.execute(
                text(
                    "INSERT INTO users (email, name, password_hash)"
                    " VALUES (:email, :name, :password_hash)"
                ),
                {"email": email, "name": name, "password_hash": DEMO_PASSWORD_HASH},
            )
        for name, venue, starts_at, total in DEMO_EVENTS:
            conn.execute(
                text(
                    "INSERT INTO events (name, venue, starts_at, tickets_total, tickets_left)"
                    " VALUES (:name, :venue, :starts_at, :total, :total)"
                ),
                {"name": name, "venue": venue, "starts_at": starts_at, "total": total},
            )
        for user_id, event_id, quantity in ((1, 1, 2), (1, 3, 1), (2, 2, 4)):
            order_id = _reserve(conn, user_id, event_id, quantity)
            conn.execute(
                text("UPDATE orders SET status = 'paid', hold_expires_at = NULL WHERE id = :id"),
                {"id": order_id},
            )


def sign_in_page(ctx: Context, status: int = 200, **page: Any) -> Response:
    """The sign-in page; the demo accounts are listed in demo mode only."""
    demo = ctx.options.demo
    return ctx.render(
        "signin.html",
        status=status,
        demo_accounts=DEMO_USERS if demo else [],
        demo_password=DEMO_PASSWORD if demo else None,
        **page,
    )


def list_events(db: Database) -> list[dict[str, Any]]:
    rows = db.query("SELECT * FROM events ORDER BY starts_at, id")
    return rows_as_dicts(rows)


def get_event(db: Database, event_id: str) -> dict[str, Any] | None:
    row = db.query_one("SELECT * FROM events WHERE id = :id", id=_int(event_id))
    return dict(row._mapping) if row else None


def list_orders(db: Database, user_id: str, status: str | None = None) -> list[dict[str, Any]]:
    """The user's orders, newest first; only those with ``status`` when given."""
    only = " AND orders.status = :status" if status is not None else ""
    rows = db.query(
        "SELECT orders.*, events.name AS event_name FROM orders"
        " JOIN events ON events.id = orders.event_id"
        f" WHERE orders.user_id = :user{only} ORDER BY orders.id DESC",
        user=_int(user_id),
        **({"status": status} if status is not None else {}),
    )
    return rows_as_dicts(rows)


def get_order(db: Database, user_id: str, order_id: str) -> dict[str, Any] | None:
    """The user's order, or None — also when the order is someone else's."""
    row = db.query_one(
        "SELECT orders.*, events.name AS event_name, events.venue, events.starts_at"
        " FROM orders JOIN events ON events.id = orders.event_id"
        " WHERE orders.id = :id AND orders.user_id = :user",
        id=_int(order_id),
        user=_int(user_id),
    )
    return dict(row._mapping) if row else None


def buy(db: Database, user_id: str, event_id: int, quantity: int) -> int:
    """Hold ``quantity`` tickets for the user; returns the new order's id.

    ``quantity`` arrives checked against the action's declaration (an integer,
    1 to ``MAX_PER_ORDER``); the stock is what can still refuse it.
    """
    with db.write() as conn:
        return _reserve(conn, _int(user_id), event_id, quantity)


def _reserve(conn: Connection, user_id: int, event_id: int, count: int) -> int:
    taken = conn.execute(
        text(
            "UPDATE events SET tickets_left = tickets_left - :n"
            " WHERE id = :id AND tickets_left >= :n"
        ),
        {"n": count, "id": event_id},
    ).rowcount
    if not taken:
        raise OrderError("not enough tickets left for that event")
    created = now()
    order_id = conn.execute(
        text(
            "INSERT INTO orders (user_id, event_id, quantity, status, created_at, hold_expires_at)"
            " VALUES (:user, :event, :n, 'held', :created, :expires) RETURNING id"
        ),
        {
            "user": user_id,
            "event": event_id,
            "n": count,
            "created": created.isoformat(),
            "expires": (created + HOLD).isoformat(),
        },
    ).scalar_one()
    return int(order_id)


def pay(db: Database, user_id: str, order_id: str) -> None:
    with db.write() as conn:
        changed = conn.execute(
            text(
                "UPDATE orders SET status = 'paid', hold_expires_at = NULL"
                " WHERE id = :id AND user_id = :user AND status = 'held'"
            ),
            {"id": _int(order_id), "user": _int(user_id)},
        ).rowcount
    if not changed:
        raise OrderError("only a held order can be paid")


def cancel(db: Database, user_id: str, order_id: str, by: str) -> None:
    """Cancel the user's order and put its tickets back on sale."""
    with db.write() as conn:
        row = conn.execute(
            text(
                "UPDATE orders SET status = 'cancelled', hold_expires_at = NULL, cancelled_by = :by"
                " WHERE id = :id AND user_id = :user AND status IN ('held', 'paid')"
                " RETURNING event_id, quantity"
            ),
            {"id": _int(order_id), "user": _int(user_id), "by": by},
        ).first()
        if row is None:
            raise OrderError("this order cannot be cancelled")
        conn.execute(
            text("UPDATE events SET tickets_left = tickets_left + :n WHERE id = :id"),
            {"n": row.quantity, "id": row.event_id},
        )


def _int(value: str | int) -> int:
    """Ids arrive as text from the path: ASCII digits only, or they match nothing.

    Not ``int()``, which would also take " 7", "7_0" or Arabic-Indic digits.
    """
    if isinstance(value, int):
        return value
    number = parse_int(value)
    return -1 if number is None else number
