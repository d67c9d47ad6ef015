"""The person's answer to an authorization request, on the consent page: the request as
the page shows it, Allow (the code made, while the session giving it lives) and Deny."""

from __future__ import annotations

import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any
from urllib.parse import SplitResult, urlsplit

from mcp.server.auth.provider import construct_redirect_uri
from mcp.shared.auth import OAuthClientInformationFull
from sqlalchemy import select, update

from rastrillo.agents import grants
from rastrillo.agents.tables import authorizations_table, clients_table
from rastrillo.sessions.store import holds_session, secret_digest
from rastrillo.storage import Database

CODE_TTL = timedelta(minutes=2)
"""An authorization code is traded for tokens at once; two minutes allows a slow client."""
REQUEST_TTL = timedelta(minutes=10)
"""How long the consent page waits for the user (signing in first included)."""
RANDOM_256 = re.compile(r"[A-Za-z0-9_-]{43}")
"""256 bits in base64url: a request id, a code, and an S256 code challenge alike."""


class AuthorizationGone(LookupError):
    """The authorization request is unknown, expired or already answered."""


class BadAgentName(ValueError):
    """The agent name the user typed is not one a grant may take; the message says why,
    for the person (:func:`grants.check_agent_name`)."""


@dataclass(frozen=True)
class PendingAuthorization:
    """An authorization request waiting on the consent page for the user's answer."""

    id: str
    client_id: str
    client_name: str
    """As the client registered it: untrusted text (show it with :mod:`rastrillo.visible`)."""
    redirect_uri: str
    expires_at: datetime

    @cached_property
    def _redirect(self) -> SplitResult:
        return urlsplit(self.redirect_uri)

    @property
    def app_scheme(self) -> bool:
        """Whether the answer goes to an app's own scheme (``com.example.app:``), which any
        app on the device may claim, and which may spell a website's name (``claude.ai:``)."""
        return self._redirect.scheme not in ("http", "https")

    @property
    def redirect_host(self) -> str:
        """Where the browser goes after the answer: the host of an ``https`` or loopback
        URI, or the scheme of an app's own. Only the scheme, for an app's own: the app that
        claims the scheme gets the answer whatever follows it, so a host written there
        (``com.evil.app://claude.ai/cb``) is not where it goes, and is not shown."""
        if self.app_scheme:
            return f"{self._redirect.scheme}:"
        return self._redirect.hostname or ""

    @property
    def redirect_port(self) -> int | None:
        """The port an ``http`` or ``https`` redirect URI names, or None (the scheme's own)."""
        return None if self.app_scheme else self._redirect.port

    @property
    def redirect_target(self) -> str:
        """:attr:`redirect_host` and the port named, if any (``127.0.0.1:51234``,
        ``[::1]:8123``): what identifies the client for real, where its name is only its
        own claim. A program on this computer has its own port; a site, its own host."""
        host, port = self.redirect_host, self.redirect_port
        if port is None:
            return host
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def loopback(self) -> bool:
        return self._redirect.scheme == "http"

    def agent_suggestion(self, taken: Collection[str] = ()) -> str:
        """An agent name made from the client's name (``Claude Code`` → ``claude-code``),
        and none of ``taken``, the names of the user's live agents, in any case
        (``claude-code-2``).

        Approvals and the audit log know an agent by its name: a client that calls
        itself after one the user already connected is not handed that agent's name, or
        the two could redeem each other's approvals and the log not tell them apart.
        """
        taken = {t.lower() for t in taken} | grants.RESERVED_AGENTS
        slug = re.sub(r"[^a-z0-9_.-]+", "-", self.client_name.lower()).strip("-._")
        return grants.unused_name(slug[:64].rstrip("-._") or "agent", taken)


def pending(db: Database, request_id: str) -> PendingAuthorization | None:
    """The authorization request waiting for an answer; None when unknown, expired or answered."""
    if not RANDOM_256.fullmatch(request_id):
        return None
    query = (
        select(authorizations_table, clients_table.c.info)
        .join(clients_table, clients_table.c.client_id == authorizations_table.c.client_id)
        .where(authorizations_table.c.id == request_id)
    )
    with db.read() as conn:
        m = conn.execute(query).mappings().first()
    if m is None:
        return None
    if m["decided_at"] is not None or m["expires_at"] <= db.clock.now():
        return None
    client = OAuthClientInformationFull.model_validate_json(m["info"])
    return PendingAuthorization(
        id=m["id"],
        client_id=m["client_id"],
        client_name=client.client_name or "an unnamed client",
        redirect_uri=m["redirect_uri"],
        expires_at=m["expires_at"],
    )


def allow(
    db: Database, request_id: str, *, user_id: str, session: str, agent: str, issuer: str
) -> str:
    """The user allowed, in their browser ``session``: make the code, and return where to
    send their browser.

    Raises :class:`AuthorizationGone` when the request cannot be answered any
    more (only one answer counts), or ``session`` has ended: the code is made only while
    it lives, in one transaction with its row locked (:func:`sessions.store.holds_session`),
    so a ``sessions.revoke_user`` as it is made either comes first or ends the code too.
    :class:`BadAgentName` for a bad agent name or one
    that one of the user's live grants has (in any case). The grant itself is made when
    the code is traded, and refused then if the name was taken in between.
    """
    try:
        grants.check_agent_name(agent)
    except grants.GrantError as exc:
        raise BadAgentName(str(exc)) from None
    taken = grants.live_grants_named(db, user_id, agent)
    if taken:
        raise BadAgentName(str(grants.AgentNameTaken(taken[0])))
    code = secrets.token_urlsafe(32)
    now = db.clock.now()
    row = _decide(
        db,
        request_id,
        now,
        session=session,
        user_id=user_id,
        agent=agent,
        code_digest=secret_digest(code),
        expires_at=now + CODE_TTL,
    )
    return construct_redirect_uri(row["redirect_uri"], code=code, state=row["state"], iss=issuer)


def deny(db: Database, request_id: str, *, issuer: str) -> str:
    """The user denied: where to send their browser (``error=access_denied``)."""
    row = _decide(db, request_id, db.clock.now())
    return construct_redirect_uri(
        row["redirect_uri"],
        error="access_denied",
        error_description="The user denied the request.",
        state=row["state"],
        iss=issuer,
    )


def _decide(
    db: Database, request_id: str, now: datetime, session: str | None = None, **values: Any
) -> Any:
    if not RANDOM_256.fullmatch(request_id):
        raise AuthorizationGone(request_id)
    table = authorizations_table
    with db.write() as conn:
        if session is not None and not holds_session(conn, now, session, values["user_id"]):
            raise AuthorizationGone(request_id)
        done = conn.execute(
            update(table)
            .where(table.c.id == request_id, table.c.decided_at.is_(None), table.c.expires_at > now)
            .values(decided_at=now, **values)
        ).rowcount
        if not done:
            raise AuthorizationGone(request_id)
        return conn.execute(select(table).where(table.c.id == request_id)).mappings().one()
