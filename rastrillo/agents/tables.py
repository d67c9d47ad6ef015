"""The tables behind ``/mcp`` and OAuth: registered clients, authorizations, and keys.

Defined apart from :mod:`rastrillo.agents.oauth` and :mod:`rastrillo.agents.mcp`,
which use them, because those import the MCP SDK (over a second of a process's
start) and are imported only when an agent first reaches the app; the app still
creates these tables at start, with the framework's others.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, String, Table, Text

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

keys_table = Table(
    "rastrillo_keys",
    METADATA,
    Column("name", String(64), primary_key=True),
    Column("value", String(255), nullable=False),
)
"""Secrets every process of the app shares (the key that seals MCP request state)."""
