"""The app as its own OAuth 2.1 authorization server, so MCP clients connect as they expect.

An MCP client finds its way here from the ``WWW-Authenticate`` header of
``/mcp``: protected-resource metadata (RFC 9728) names this app as the
authorization server, whose metadata (RFC 8414) lists the endpoints below. The
client registers itself (RFC 7591), sends the user's browser to authorize,
and trades the code it gets back for tokens. The HTTP side of every endpoint
is the ``mcp`` SDK's own handlers; this module is the provider behind them,
backed by the grants of :mod:`rastrillo.agents.grants` (OAuth is one more way
to obtain a grant, not a second token store).

The rules this provider adds to the SDK's:

- Every client is public (``token_endpoint_auth_method`` ``none``): with
  PKCE S256, exact redirect URIs and single-use codes a client secret proves
  nothing more, and not issuing one leaves no secret to store. Redirect URIs
  are ``https``, ``http`` on a loopback host, or a private-use scheme with a
  dot in it (``com.example.app:/cb``, RFC 8252); never a fragment or a user.
- A redirect URI matches a registered one exactly (both in the URL
  standard's normal form), except that a loopback ``http`` URI may use any
  port (RFC 8252).
- An agent name is one that none of the user's live grants has, in any case: refused
  on the consent page, and again, in one step with the insert, when the code is
  traded (:class:`grants.AgentNameTaken`).
- PKCE is S256 only: the SDK refuses any other method, and the challenge
  must be a SHA-256 digest in base64url (43 characters).
- ``resource``, when sent to authorize or token, must be ``<origin>/mcp``, named once.
- The authorize endpoint only records the request and sends the browser to
  the consent page (``/_rastrillo/agents/authorize``), where the signed-in
  user allows or denies it; the code is made only when they allow. A request
  it refuses is answered to the person, never sent on to the client's
  redirect URI, which anyone may have registered (no open redirector).
- Codes are random (256 bits), stored as digests, expire after two minutes
  and are used once: a second use revokes the grant the first one made.
- Refresh tokens rotate; one used twice revokes the whole grant (in grants).
- Registration and authorize store a row for anyone who asks, so each is rate
  limited (429 with ``Retry-After`` past the limit), in counts that no web page the
  person opens can spend for another client: on a developer's machine every page
  reaches the app from the address their MCP client comes from. A registration is
  JSON (RFC 7591), which no page can send without CORS; one a page sends (it carries
  an ``Origin``) is counted for that origin at that address, and one a program sends
  for its address. Authorize is counted per registered client, once the request is
  valid. A client that no authorization or grant ever named is forgotten a day after
  it registered: a flood of them neither fills the database nor lasts. What a row keeps
  is bounded too: a registration to 8 KiB, a request's ``state`` to :data:`STATE_MAX`.
- A refresh stores a token pair, so refreshes are rate limited per grant
  (:data:`REFRESHES_PER_GRANT`), counted before the refresh token is used.
- A database that cannot answer for a moment is answered 503 with ``Retry-After`` at
  every endpoint, as on every page (``availability``), authorize included: the SDK's
  handler would answer it 400 ``server_error``.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Collection, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.auth import (
    InvalidRedirectUriError,
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyUrl
from sqlalchemy import delete, select, update
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Message

from rastrillo import threads, visible
from rastrillo.actor import Actor
from rastrillo.agents import MCP_PATH, RESOURCE_METADATA_PATH, grants
from rastrillo.agents.tables import authorizations_table, clients_table
from rastrillo.availability import UnavailableMiddleware, retryable, unavailable
from rastrillo.registry.validate import unsafe_character
from rastrillo.routing import (
    AUTHORIZATION_SERVER_PATH,
    CONSENT_PATH,
    OAUTH_AUTHORIZE_PATH,
    OAUTH_REGISTER_PATH,
    OAUTH_REVOKE_PATH,
    OAUTH_TOKEN_PATH,
)
from rastrillo.sessions import throttle
from rastrillo.sessions.store import holds_session
from rastrillo.storage import Database

__all__ = [
    "CODE_TTL",
    "REQUEST_TTL",
    "Authority",
    "AuthorizationGone",
    "BadAgentName",
    "PendingAuthorization",
    "allow",
    "deny",
    "pending",
]


CODE_TTL = timedelta(minutes=2)
"""An authorization code is traded for tokens at once; two minutes allows a slow client."""
REQUEST_TTL = timedelta(minutes=10)
"""How long the consent page waits for the user (signing in first included)."""
_KEEP = timedelta(days=1)
"""How long a used or expired authorization is kept, so a replayed code still revokes; and
how long a client that no authorization or grant names is kept after it registered."""
REGISTRATIONS_PER_ADDRESS = 20
"""Client registrations the programs at one client address (requests with no ``Origin``
header) may make per :data:`RATE_WINDOW` (an MCP client registers once, when it is first
connected)."""
REGISTRATIONS_PER_ORIGIN = 20
"""Client registrations the pages of one web origin may make from one client address per
:data:`RATE_WINDOW` (a browser-based client, such as the MCP Inspector, sends ``Origin``).
A browser always sends a page's true origin, so a page spends this count and no other."""
REGISTRATIONS_FROM_PAGES = 60
"""Client registrations all requests that carry an ``Origin`` may make from one client
address per :data:`RATE_WINDOW`: a program can send any ``Origin`` it likes, and without
this each one it made up would be a new count. Pages on the person's own machine (a
loopback origin: a browser-based client such as the MCP Inspector) have a ceiling of their
own, apart from pages elsewhere, so that no site on the web, whatever number of origins it
sets pages of at the app, spends theirs."""
AUTHORIZATIONS_PER_CLIENT = 20
"""Authorization requests one registered client may make per :data:`RATE_WINDOW` (a person
connecting a client makes one, or a few). Counted once the request is valid (a known
client, a redirect URI it registered, PKCE), so only a request that would store a row is
counted, and only against the client it names."""
STATE_MAX = 1024
"""The most characters an authorization request's ``state`` may hold: it is stored with the
request, and a URL may be 64 KiB (a client sends a random value, or a short one it
encodes; RFC 6749 sets no bound)."""
REFRESHES_PER_GRANT = 20
"""Refreshes one grant may make per :data:`RATE_WINDOW` (a client refreshes when its access
token, good for an hour, runs out). Each stores a token pair, and the used refresh token
is kept for its 30 days (a replay of it revokes the grant), so a holder refreshing in a
loop would grow the tokens table without bound."""
RATE_WINDOW = timedelta(hours=1)

_CLIENT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_RANDOM_256 = re.compile(r"[A-Za-z0-9_-]{43}")
"""256 bits in base64url: a request id, a code, and an S256 code challenge alike."""
_PRIVATE_SCHEME = re.compile(r"[a-z][a-z0-9+-]*(?:\.[a-z0-9+-]+)+")
_LOOPBACK = frozenset({"127.0.0.1", "[::1]", "localhost"})
_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
_CLIENT_NAME_MAX = 100
_REDIRECT_URIS_MAX = 10
_REGISTRATION_MAX = 8 * 1024
"""The most a client's registration may take stored, as JSON (a client registers its
name, a few redirect URIs and a few links; the request body may be 4 MiB)."""
_GET = ["GET", "HEAD", "OPTIONS"]
_FORM_TYPE = b"application/x-www-form-urlencoded"
_JSON_TYPE = "application/json"
_POST = ["POST", "OPTIONS"]


@dataclass
class _Instead:
    """What the authorize endpoint answers in place of the SDK's handler, if anything."""

    response: Response | None = None


_INSTEAD: ContextVar[_Instead | None] = ContextVar("rastrillo_oauth_instead", default=None)
"""Set while :meth:`Authority._authorize_endpoint` runs the SDK's handler, which turns any
error of the provider's into a redirect to the client (or, past its own catch-all, a 400
``server_error`` and a traceback): a client past its authorizations is answered 429, a
database that cannot answer for a moment 503 with ``Retry-After``, as every page is."""


def _answer_instead(response: Response) -> None:
    """Have the authorize endpoint answer ``response``, whatever the SDK's handler makes of
    what the provider does next (a client not found, an :class:`AuthorizeError`): the
    endpoint sends this, never that."""
    instead = _INSTEAD.get()
    assert instead is not None, "only the authorize endpoint's handler calls this"
    instead.response = response


_UNSENT = "answered by the endpoint instead"
"""The description of the :class:`AuthorizeError` that :meth:`Authority.authorize` raises
to end the SDK's handler once it called :func:`_answer_instead`: the handler's answer to
it is made, and not sent."""


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

    @property
    def redirect_host(self) -> str:
        """Where the browser goes after the answer: the host of an ``https`` or loopback
        URI, or the scheme of an app's own. Only the scheme, for an app's own: the app that
        claims the scheme gets the answer whatever follows it, so a host written there
        (``com.evil.app://claude.ai/cb``) is not where it goes, and is not shown."""
        parts = urlsplit(self.redirect_uri)
        if parts.scheme in ("http", "https"):
            return parts.hostname or ""
        return f"{parts.scheme}:"

    @property
    def redirect_port(self) -> int | None:
        """The port an ``http`` or ``https`` redirect URI names, or None (the scheme's own)."""
        parts = urlsplit(self.redirect_uri)
        return parts.port if parts.scheme in ("http", "https") else None

    @property
    def redirect_target(self) -> str:
        """:attr:`redirect_host` and the port named, if any (``127.0.0.1:51234``,
        ``[::1]:8123``): what identifies the client for real, where its name is only its
        own claim. A program on this computer has its own port; a site, its own host."""
        host = self.redirect_host
        if self.redirect_port is None:
            return host
        return f"[{host}]:{self.redirect_port}" if ":" in host else f"{host}:{self.redirect_port}"

    @property
    def loopback(self) -> bool:
        return urlsplit(self.redirect_uri).scheme == "http"

    @property
    def app_scheme(self) -> bool:
        """Whether the answer goes to an app's own scheme (``com.example.app:``), which any
        app on the device may claim, and which may spell a website's name (``claude.ai:``)."""
        return urlsplit(self.redirect_uri).scheme not in ("http", "https")

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
    if not _RANDOM_256.fullmatch(request_id):
        return None
    query = (
        select(authorizations_table, clients_table.c.info)
        .join(clients_table, clients_table.c.client_id == authorizations_table.c.client_id)
        .where(authorizations_table.c.id == request_id)
    )
    with db.read() as conn:
        row = conn.execute(query).first()
    if row is None:
        return None
    m = row._mapping
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
    if not Actor.agent(agent).is_named_agent:
        raise BadAgentName(
            "An agent name is 1 to 64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit."
        )
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
        code_digest=_digest(code),
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
    if not _RANDOM_256.fullmatch(request_id):
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
        return conn.execute(select(table).where(table.c.id == request_id)).one()._mapping


class Client(OAuthClientInformationFull):
    """A registered client, whose redirect URIs match exactly but for a loopback port."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        registered = self.redirect_uris or []
        if redirect_uri is None:
            if len(registered) == 1:
                return registered[0]
            raise InvalidRedirectUriError(
                "redirect_uri is required: this client registered several"
            )
        if any(_same_redirect(redirect_uri, r) for r in registered):
            return redirect_uri
        raise InvalidRedirectUriError("redirect_uri is not one this client registered")


def _same_redirect(asked: AnyUrl, registered: AnyUrl) -> bool:
    if str(asked) == str(registered):
        return True
    return (
        asked.scheme == registered.scheme == "http"
        and asked.host == registered.host
        and asked.host in _LOOPBACK
        and (asked.username, asked.password, asked.path, asked.query, asked.fragment)
        == (registered.username, registered.password, registered.path, registered.query, None)
    )


def _on_this_machine(origin: str) -> bool:
    """Whether an ``Origin`` is a loopback host's: a page served on the person's own machine,
    which no page on the web can be (a browser sends a page's true origin)."""
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host is not None and (host in _LOOPBACK or f"[{host}]" in _LOOPBACK)


class Code(AuthorizationCode):
    request_id: str


class Refresh(RefreshToken):
    grant_id: str


class Access(AccessToken):
    grant_id: str


class Authority(OAuthAuthorizationServerProvider[Code, Refresh, Access]):
    """The ``mcp`` SDK's authorization-server provider for one app (its database and origin),
    and the routes that serve it.

    It names the SDK's protocol as its base, so a type checker holds it to the protocol,
    and what it leaves out (the identity-assertion grant, which its token handler keeps
    off) keeps the protocol's own refusal.
    """

    def __init__(self, db: Database, origin: str) -> None:
        self.db = db
        self.issuer = origin
        self.resource = origin + MCP_PATH
        # Strings, not AnyHttpUrl objects: the models keep an origin without a trailing
        # slash, as the issuer must be spelled the same everywhere (RFC 8414 3.3, RFC 9207).
        self.metadata = OAuthMetadata.model_validate(
            {
                "issuer": origin,
                "authorization_endpoint": origin + OAUTH_AUTHORIZE_PATH,
                "token_endpoint": origin + OAUTH_TOKEN_PATH,
                "registration_endpoint": origin + OAUTH_REGISTER_PATH,
                "revocation_endpoint": origin + OAUTH_REVOKE_PATH,
                "response_types_supported": ["code"],
                "grant_types_supported": sorted(_GRANT_TYPES),
                "token_endpoint_auth_methods_supported": ["none"],
                "revocation_endpoint_auth_methods_supported": ["none"],
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": True,
            }
        )
        self.resource_metadata = ProtectedResourceMetadata.model_validate(
            {"resource": self.resource, "authorization_servers": [origin]}
        )
        authenticator = ClientAuthenticator(self)
        self._authorize = AuthorizationHandler(self)
        self._token = TokenHandler(self, authenticator)
        self._revoke = RevocationHandler(self, authenticator)
        self._register = RegistrationHandler(self, ClientRegistrationOptions(enabled=True))

    # -- the SDK's provider protocol -------------------------------------------------------

    async def get_client(self, client_id: str) -> Client | None:
        if not _CLIENT_ID.fullmatch(client_id):
            return None
        try:
            return await threads.in_thread(self._get_client, client_id)
        except Exception as exc:
            # In the authorize handler, which would answer it 400 "server_error": no client
            # (the SDK answers "not found"), and the endpoint answers 503 instead. In the
            # others the error goes up to the endpoint's UnavailableMiddleware.
            if not retryable(exc) or _INSTEAD.get() is None:
                raise
            _answer_instead(unavailable(exc))
            return None

    def _get_client(self, client_id: str) -> Client | None:
        with self.db.read() as conn:
            info = conn.execute(
                select(clients_table.c.info).where(clients_table.c.client_id == client_id)
            ).scalar()
        return None if info is None else Client.model_validate_json(info)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        _check_registration(client_info)
        client_info.token_endpoint_auth_method = "none"
        client_info.client_secret = None
        client_info.client_secret_expires_at = None
        info = client_info.model_dump_json(exclude_none=True)
        if len(info.encode()) > _REGISTRATION_MAX:
            raise RegistrationError(
                "invalid_client_metadata",
                f"the registration is larger than {_REGISTRATION_MAX // 1024} KiB",
            )
        row = {"client_id": client_info.client_id, "info": info, "created_at": self.db.clock.now()}
        await threads.in_thread(self._record_client, row)

    def _record_client(self, row: dict[str, Any]) -> None:
        """The new client, and the clients registered over a day ago that no authorization
        or grant names forgotten: a registration nobody went on with."""
        clients = clients_table.c
        named = select(authorizations_table.c.client_id).union(
            select(grants.grants_table.c.client_id).where(
                grants.grants_table.c.client_id.is_not(None)
            )
        )
        with self.db.write() as conn:
            conn.execute(
                delete(clients_table).where(
                    clients.created_at < row["created_at"] - _KEEP,
                    clients.client_id.not_in(named),
                )
            )
            conn.execute(clients_table.insert().values(**row))

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        if not _RANDOM_256.fullmatch(params.code_challenge):
            raise AuthorizeError(
                "invalid_request", "code_challenge must be a SHA-256 digest in base64url (S256)"
            )
        if params.state is not None and len(params.state) > STATE_MAX:
            raise AuthorizeError("invalid_request", f"state is longer than {STATE_MAX} characters")
        now = self.db.clock.now()
        request_id = secrets.token_urlsafe(32)
        row = {
            "id": request_id,
            "client_id": client.client_id,
            "redirect_uri": str(params.redirect_uri),
            "redirect_uri_explicit": params.redirect_uri_provided_explicitly,
            "code_challenge": params.code_challenge,
            "state": params.state,
            "resource": params.resource,
            "scopes": " ".join(params.scopes or []),
            "created_at": now,
            "expires_at": now + REQUEST_TTL,
        }
        try:
            await threads.in_thread(self._record_request, row)
        except throttle.TooManyAttempts as exc:
            answer = _too_many(exc)
        except Exception as exc:
            if not retryable(exc):
                raise
            answer = unavailable(exc)
        else:
            return f"{self.issuer}{CONSENT_PATH}?request={request_id}"
        _answer_instead(answer)
        raise AuthorizeError("temporarily_unavailable", _UNSENT)

    def _record_request(self, row: dict[str, Any]) -> None:
        """The request counted against its client, then stored."""
        throttle.take_attempt(
            self.db,
            {f"oauth-authorize:{row['client_id']}": AUTHORIZATIONS_PER_CLIENT},
            RATE_WINDOW,
            "authorization requests",
        )
        table = authorizations_table
        with self.db.write() as conn:
            conn.execute(delete(table).where(table.c.created_at < row["created_at"] - _KEEP))
            conn.execute(table.insert().values(**row))

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> Code | None:
        if not _RANDOM_256.fullmatch(authorization_code):
            return None
        return await threads.in_thread(self._load_code, client.client_id, authorization_code)

    def _load_code(self, client_id: str, code: str) -> Code | None:
        table = authorizations_table
        with self.db.read() as conn:
            row = conn.execute(select(table).where(table.c.code_digest == _digest(code))).first()
        if row is None or row.client_id != client_id:
            return None
        if row.used_at is not None:
            self._replayed(row.id)
            return None
        return Code(
            code=code,
            scopes=row.scopes.split(),
            expires_at=row.expires_at.timestamp(),
            client_id=row.client_id,
            code_challenge=row.code_challenge,
            redirect_uri=AnyUrl(row.redirect_uri),
            redirect_uri_provided_explicitly=row.redirect_uri_explicit,
            resource=row.resource,
            subject=row.user_id,
            request_id=row.id,
        )

    def _replayed(self, request_id: str) -> None:
        """A code came back after it was used: revoke what its first use made (RFC 6749 4.1.2)."""
        table = authorizations_table
        with self.db.write() as conn:
            conn.execute(
                update(table)
                .where(table.c.id == request_id)
                .values(replayed_at=self.db.clock.now())
            )
            grant_id = conn.execute(
                select(table.c.grant_id).where(table.c.id == request_id)
            ).scalar()
        if grant_id is not None:
            grants.revoke(self.db, grant_id)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: Code
    ) -> OAuthToken:
        name = client.client_name or "unnamed client"
        tokens = await threads.in_thread(self._redeem, authorization_code.request_id, name)
        return _oauth_token(tokens)

    def _redeem(self, request_id: str, client_name: str) -> grants.Tokens:
        table = authorizations_table
        now = self.db.clock.now()
        with self.db.write() as conn:
            won = conn.execute(
                update(table)
                .where(
                    table.c.id == request_id, table.c.used_at.is_(None), table.c.expires_at > now
                )
                .values(used_at=now)
            ).rowcount
            row = conn.execute(select(table).where(table.c.id == request_id)).one()
        if not won:
            self._replayed(request_id)
            raise TokenError("invalid_grant", "authorization code already used or expired")
        try:
            tokens = grants.grant_with_tokens(
                self.db,
                user_id=row.user_id,
                agent=row.agent,
                client=client_name,
                client_id=row.client_id,
            )
        except grants.AgentNameTaken:
            # Allowed under a name that another grant of the user took since (two consents
            # under one name, traded at once): nothing is granted.
            raise TokenError(
                "invalid_grant",
                f"the agent name {row.agent!r} was given to another of the user's agents "
                "since it was allowed: authorize again, under another name",
            ) from None
        grant = tokens.grant
        # A concurrent second use marks replayed_at; whichever of the two writes last sees
        # the other's, so the grant is revoked either here or there.
        with self.db.write() as conn:
            conn.execute(update(table).where(table.c.id == request_id).values(grant_id=grant.id))
            replayed = conn.execute(
                select(table.c.replayed_at).where(table.c.id == request_id)
            ).scalar()
        if replayed is not None:  # or withdrawn as the user's access ended
            grants.revoke(self.db, grant.id)
            raise TokenError("invalid_grant", "authorization code already used or withdrawn")
        return tokens

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> Refresh | None:
        grant = await threads.in_thread(grants.refresh_grant, self.db, refresh_token)
        if grant is None or grant.client_id != client.client_id:
            return None
        return Refresh(
            token=refresh_token, client_id=client.client_id, scopes=[], grant_id=grant.id
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: Refresh, scopes: list[str]
    ) -> OAuthToken:
        """New tokens; :class:`throttle.TooManyAttempts` (answered 429 by
        :meth:`_token_endpoint`) past the grant's refreshes, the refresh token unused."""
        tokens = await threads.in_thread(self._rotate, refresh_token)
        if tokens is None:
            raise TokenError("invalid_grant", "refresh token already used: the grant is revoked")
        return _oauth_token(tokens)

    def _rotate(self, refresh_token: Refresh) -> grants.Tokens | None:
        key = f"oauth-refresh:{refresh_token.grant_id}"
        limit = {key: REFRESHES_PER_GRANT}
        throttle.take_attempt(self.db, limit, RATE_WINDOW, "token refreshes")
        return grants.rotate_refresh(self.db, refresh_token.token)

    async def load_access_token(self, token: str) -> Access | None:
        grant = await threads.in_thread(grants.authenticate, self.db, token)
        if grant is None or grant.client_id is None:
            return None
        return Access(token=token, client_id=grant.client_id, scopes=[], grant_id=grant.id)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        if isinstance(token, Access | Refresh):
            await threads.in_thread(grants.revoke, self.db, token.grant_id)

    # -- HTTP ------------------------------------------------------------------------------

    async def _authorize_endpoint(self, request: Request) -> Response:
        """The SDK's authorize handler, except that a refusal is answered to the person in
        the browser (400), never sent on to the client's redirect URI.

        Anyone can register a client with any ``https`` redirect URI, so a request refused
        before a person answered it (no PKCE, another resource, an unknown scope) sent on
        there would make this endpoint an open redirector: a link on the app's own address
        taking whoever opens it, signed in or not, to a site the link's author chose. RFC
        9700 (4.11.2) asks that the user be authenticated first and that only a trusted URI
        be redirected to unasked; no registered URI is trusted here. A person's Deny, on
        the consent page that named where their browser goes, is sent on (:func:`deny`).
        A client past its authorization requests is answered 429 (:meth:`authorize`), and a
        database that cannot answer for a moment 503 with ``Retry-After`` (:data:`_INSTEAD`).
        """
        params = request.query_params if request.method == "GET" else await request.form()
        refused = self._resource_refused(params.getlist("resource"))
        if refused is not None:
            return JSONResponse(
                {"error": "invalid_target", "error_description": refused},
                status_code=400,
                headers={"Cache-Control": "no-store"},
            )
        instead = _Instead()
        reset = _INSTEAD.set(instead)
        try:
            response = await self._authorize.handle(request)
        finally:
            _INSTEAD.reset(reset)
        if instead.response is not None:
            return instead.response
        location = response.headers.get("location")
        if location is None or location.startswith(self.issuer + CONSENT_PATH + "?"):
            return response
        # The SDK's own fields, last: a registered URI may hold a query of its own.
        sent = parse_qs(urlsplit(location).query)
        answer = {k: sent[k][-1] for k in ("error", "error_description", "state") if k in sent}
        return JSONResponse(answer, status_code=400, headers={"Cache-Control": "no-store"})

    def _resource_refused(self, named: Sequence[object]) -> str | None:
        """Why the ``resource`` values a request names are refused (RFC 8707), or None: it
        may name none, or this app's ``/mcp`` once. Named more than once, it asks for a
        token for each, and the SDK would read the last alone: a token the client meant
        for another resource too, which that one could replay here."""
        if not named or list(named) == [self.resource]:
            return None
        if len(named) > 1:
            return f"resource is named {len(named)} times: name {self.resource} once"
        return f"resource must be {self.resource}"

    async def _token_endpoint(self, request: Request) -> Response:
        """The SDK's token handler, after the ``resource`` check it leaves to the provider;
        429 for a grant past its refreshes."""
        refused = self._resource_refused((await request.form()).getlist("resource"))
        if refused is not None:
            error = TokenErrorResponse(error="invalid_target", error_description=refused)
            return PydanticJSONResponse(
                content=error, status_code=400, headers={"Cache-Control": "no-store"}
            )
        try:
            return await self._token.handle(request)
        except throttle.TooManyAttempts as exc:
            return _too_many(exc)

    async def _register_endpoint(self, request: Request) -> Response:
        """The SDK's registration handler, for a JSON request within its sender's count.

        RFC 7591 has a client send its registration as ``application/json``; the SDK's
        handler would read any body. Held to JSON, a registration is one no web page can
        send without a CORS preflight, so a page's request carries its true ``Origin``
        and is counted for that origin (:data:`REGISTRATIONS_PER_ORIGIN`); a request
        without one, from a program, for its address (:data:`REGISTRATIONS_PER_ADDRESS`).
        Either way a page spends only its own count, never that of the person's MCP
        client on the same machine, nor of a browser-based client on another origin.
        """
        media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type != _JSON_TYPE:
            return JSONResponse(
                {
                    "error": "invalid_client_metadata",
                    "error_description": "send the registration as application/json",
                },
                status_code=400,
                headers={"Cache-Control": "no-store"},
            )
        address = request.client.host if request.client else "unknown"
        origin = request.headers.get("origin")
        if origin is None:
            limits = {throttle.address_key(address, "oauth-register"): REGISTRATIONS_PER_ADDRESS}
        else:
            pages = "oauth-reg-local" if _on_this_machine(origin) else "oauth-reg-pages"
            limits = {
                throttle.origin_key(address, origin, "oauth-reg-origin"): REGISTRATIONS_PER_ORIGIN,
                throttle.address_key(address, pages): REGISTRATIONS_FROM_PAGES,
            }
        try:
            await threads.in_thread(
                throttle.take_attempt, self.db, limits, RATE_WINDOW, "registrations"
            )
        except throttle.TooManyAttempts as exc:
            return _too_many(exc)
        return await self._register.handle(request)

    async def _revocation_endpoint(self, request: Request) -> Response:
        """The SDK's revocation handler. Its request model wants a ``client_secret`` key
        even from a public client, which has none to send (RFC 7009 allows leaving it
        out), so an empty one is added to such a request before the handler reads it."""
        form = await request.form()
        if "client_secret" in form:
            return await self._revoke.handle(request)
        fields = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
        body = urlencode([*fields, ("client_secret", "")]).encode()
        headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
        scope = {**request.scope, "headers": [*headers, (b"content-type", _FORM_TYPE)]}

        async def receive() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        return await self._revoke.handle(Request(scope, receive))

    def routes(self) -> list[Route]:
        """The well-known metadata and the OAuth endpoints, served outside the app's
        middleware (no cookie, no CSRF check: a client authenticates with PKCE and tokens)."""
        resource = ProtectedResourceMetadataHandler(self.resource_metadata).handle
        posted: list[tuple[str, Callable[[Request], Any]]] = [
            (OAUTH_TOKEN_PATH, self._token_endpoint),
            (OAUTH_REGISTER_PATH, self._register_endpoint),
            (OAUTH_REVOKE_PATH, self._revocation_endpoint),
        ]
        return [
            # RFC 9728 puts the resource's path after the well-known name; the bare path
            # is the one /mcp's WWW-Authenticate names. Both answer.
            *(
                Route(path, _cors(request_response(handle), _GET), methods=_GET)
                for path, handle in (
                    (RESOURCE_METADATA_PATH, resource),
                    (RESOURCE_METADATA_PATH + MCP_PATH, resource),
                    (AUTHORIZATION_SERVER_PATH, MetadataHandler(self.metadata).handle),
                )
            ),
            # No CORS here: a browser is sent to authorize, no script calls it.
            Route(OAUTH_AUTHORIZE_PATH, _limited(self._authorize_endpoint), methods=["GET"]),
            *(
                Route(path, _cors(_limited(handle), _POST), methods=_POST)
                for path, handle in posted
            ),
        ]


def _too_many(exc: throttle.TooManyAttempts) -> Response:
    return JSONResponse(
        {"error": "too_many_requests", "error_description": str(exc)},
        status_code=429,
        headers={"Retry-After": str(exc.retry_after), "Cache-Control": "no-store"},
    )


def _limited(handle: Callable[[Request], Any]) -> ASGIApp:
    """``handle`` with the SDK's body limit, and a database that cannot answer for a moment
    answered 503 with ``Retry-After`` as on every page (the SDK's handlers let such an
    error go up, but the authorize one, which :data:`_INSTEAD` covers)."""
    return UnavailableMiddleware(
        RequestBodyLimitMiddleware(request_response(handle), DEFAULT_MAX_REQUEST_BODY_SIZE)
    )


def _cors(app: ASGIApp, methods: list[str]) -> ASGIApp:
    """Any origin may call it from a script (a browser-based MCP client): nothing here
    reads a cookie, so nothing is exposed that the caller does not already hold."""
    return CORSMiddleware(
        app, allow_origins="*", allow_methods=methods, allow_headers=[MCP_PROTOCOL_VERSION_HEADER]
    )


def _check_registration(info: OAuthClientInformationFull) -> None:
    if len(info.redirect_uris or []) > _REDIRECT_URIS_MAX:
        raise RegistrationError(
            "invalid_redirect_uri", f"at most {_REDIRECT_URIS_MAX} redirect URIs"
        )
    for uri in info.redirect_uris or []:
        problem = _redirect_problem(uri)
        if problem:
            raise RegistrationError("invalid_redirect_uri", f"{str(uri)[:200]}: {problem}")
    if not set(info.grant_types) <= _GRANT_TYPES:
        raise RegistrationError(
            "invalid_client_metadata",
            "grant_types may be authorization_code and refresh_token only",
        )
    if info.response_types != ["code"]:
        raise RegistrationError(
            "invalid_client_metadata", "response_types must be exactly ['code']"
        )
    if info.client_name is not None and len(info.client_name) > _CLIENT_NAME_MAX:
        raise RegistrationError(
            "invalid_client_metadata", f"client_name is longer than {_CLIENT_NAME_MAX} characters"
        )
    if info.client_name is not None and (problem := _name_problem(info.client_name)):
        raise RegistrationError("invalid_client_metadata", f"client_name {problem}")


def _name_problem(name: str) -> str | None:
    """Why a client's name could read as another, or None.

    The consent page shows the name the client chose. One holding a character no tool
    arg may hold (a control character, a bidirectional override: ``validate``'s rule), one
    that shows as nothing or moves the text around it, or one drawn as an ASCII character
    (``visible``: a Cyrillic a in ``Claude``) reads as a name it is not: refused, naming the
    character. The page marks such characters too, in a name stored before this rule."""
    bad = unsafe_character(name)
    if bad is not None:
        return f"holds {visible.label(bad)}, which no text here may hold"
    marked = next((p for p in visible.parts(name) if p.label is not None), None)
    if marked is None:
        return None
    if marked.lookalike:
        return f"holds {marked.label}, which is drawn as an ASCII character it is not"
    return f"holds {marked.label}, which shows as nothing or moves the text around it"


def _redirect_problem(uri: AnyUrl) -> str | None:
    if uri.fragment is not None:
        return "a redirect URI has no fragment"
    if uri.username is not None or uri.password is not None:
        return "a redirect URI has no user or password"
    if uri.scheme == "https":
        return None if uri.host else "an https redirect URI needs a host"
    if uri.scheme == "http":
        return None if uri.host in _LOOPBACK else "http is for loopback hosts only; use https"
    if _PRIVATE_SCHEME.fullmatch(uri.scheme):
        return None
    return "use https, http on a loopback host, or an app's own scheme (com.example.app:/)"


def _oauth_token(tokens: grants.Tokens) -> OAuthToken:
    return OAuthToken(
        access_token=tokens.access_token,
        expires_in=int(grants.ACCESS_TTL.total_seconds()),
        refresh_token=tokens.refresh_token,
    )


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("ascii")).hexdigest()
