"""The tables behind ``/mcp`` and OAuth: registered clients, authorizations, and keys.

Defined apart from :mod:`rastrillo.agents.oauth` and :mod:`rastrillo.agents.mcp`,
which use them, because those import the MCP SDK (over a second of a process's
start) and are imported only when an agent first reaches the app; the app still
creates these tables at start, with the framework's others, and ``revoke_user``
finds here what ending a user means for the codes they allowed, whether or not an
agent came to this process.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Column, Connection, String, Table, Text, update

from rastrillo.agents import grants
from rastrillo.sessions.store import WHEN_USER_REVOKED
from rastrillo.storage import METADATA, Instant

__all__ = ["authorizations_table", "clients_table", "keys_table"]

clients_table = Table(
    "rastrillo_oauth_clients",
    METADATA,
    Column("client_id", String(64), primary_key=True),
    Column("info", Text, nullable=False),
    Column("created_at", Instant, nullable=False),
)
"""The OAuth clients that registered themselves (RFC 7591), each as it registered."""

authorizations_table = Table(
    "rastrillo_oauth_authorizations",
    METADATA,
    Column("id", String(64), primary_key=True),
    Column("client_id", String(64), nullable=False),
    Column("redirect_uri", Text, nullable=False),
    Column("redirect_uri_explicit", Boolean, nullable=False),
    Column("code_challenge", String(64), nullable=False),
    Column("state", Text),
    Column("resource", Text),
    Column("scopes", Text, nullable=False),
    Column("created_at", Instant, nullable=False),
    Column("expires_at", Instant, nullable=False),
    Column("decided_at", Instant),
    Column("user_id", String(255)),
    Column("agent", String(64)),
    Column("code_digest", String(64), unique=True),
    Column("used_at", Instant),
    Column("replayed_at", Instant),
    Column("grant_id", String(64)),
)
"""Each authorization request, from the consent page's answer to its code's one use."""


def _user_revoked(conn: Connection, now: datetime, user_id: str) -> None:
    """``sessions.revoke_user``'s end of the codes the user allowed: one not traded yet
    expires (the session that allowed it may be a thief's, and the grant is made only
    when it is traded); one being traded now is marked as a replay, which the trade
    finds when it links its grant, and revokes it; then the user's grants are revoked
    again, a grant such a trade linked meanwhile among them."""
    table = authorizations_table
    allowed = [table.c.user_id == user_id, table.c.code_digest.is_not(None)]
    unused = [table.c.used_at.is_(None), table.c.expires_at > now]
    conn.execute(update(table).where(*allowed, *unused).values(expires_at=now))
    trading = [table.c.used_at.is_not(None), table.c.grant_id.is_(None)]
    unmarked = table.c.replayed_at.is_(None)
    conn.execute(update(table).where(*allowed, *trading, unmarked).values(replayed_at=now))
    grants.revoke_all_in(conn, now, user_id)


authorizations_table.info[WHEN_USER_REVOKED] = _user_revoked

keys_table = Table(
    "rastrillo_keys",
    METADATA,
    Column("name", String(64), primary_key=True),
    Column("value", String(255), nullable=False),
)
"""Secrets every process of the app shares (the key that seals MCP request state)."""
