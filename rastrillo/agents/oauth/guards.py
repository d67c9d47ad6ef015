"""What stands before the OAuth endpoints: the counts a sender may spend (429 past them),
the SDK's body limit, 503 for a database that cannot answer, and CORS for scripts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import request_response
from starlette.types import ASGIApp

from rastrillo.agents.oauth.registration import LOOPBACK
from rastrillo.availability import UnavailableMiddleware
from rastrillo.sessions import throttle
from rastrillo.storage import Database

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
REFRESHES_PER_GRANT = 20
"""Refreshes one grant may make per :data:`RATE_WINDOW` (a client refreshes when its access
token, good for an hour, runs out). Each stores a token pair, and the used refresh token
is kept for its 30 days (a replay of it revokes the grant), so a holder refreshing in a
loop would grow the tokens table without bound."""
RATE_WINDOW = timedelta(hours=1)


def _on_this_machine(origin: str) -> bool:
    """Whether an ``Origin`` is a loopback host's: a page served on the person's own machine,
    which no page on the web can be (a browser sends a page's true origin)."""
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host is not None and (host in LOOPBACK or f"[{host}]" in LOOPBACK)


def count_registration(db: Database, address: str, origin: str | None) -> None:
    """Count a client's registration against its sender: a program (no ``Origin``) at
    ``address``, or a page of ``origin`` there, and all pages there, those on the person's
    own machine apart; :class:`throttle.TooManyAttempts` past a count."""
    if origin is None:
        limits = {throttle.address_key(address, "oauth-register"): REGISTRATIONS_PER_ADDRESS}
    else:
        pages = "oauth-reg-local" if _on_this_machine(origin) else "oauth-reg-pages"
        limits = {
            throttle.origin_key(address, origin, "oauth-reg-origin"): REGISTRATIONS_PER_ORIGIN,
            throttle.address_key(address, pages): REGISTRATIONS_FROM_PAGES,
        }
    throttle.take_attempt(db, limits, RATE_WINDOW, "registrations")


def count_authorization(db: Database, client_id: str) -> None:
    """Count a valid authorization request against the client it names;
    :class:`throttle.TooManyAttempts` past :data:`AUTHORIZATIONS_PER_CLIENT`."""
    limit = {f"oauth-authorize:{client_id}": AUTHORIZATIONS_PER_CLIENT}
    throttle.take_attempt(db, limit, RATE_WINDOW, "authorization requests")


def count_refresh(db: Database, grant_id: str) -> None:
    """Count a refresh against its grant, before its refresh token is used;
    :class:`throttle.TooManyAttempts` past :data:`REFRESHES_PER_GRANT`."""
    limit = {f"oauth-refresh:{grant_id}": REFRESHES_PER_GRANT}
    throttle.take_attempt(db, limit, RATE_WINDOW, "token refreshes")


def too_many(exc: throttle.TooManyAttempts) -> Response:
    return JSONResponse(
        {"error": "too_many_requests", "error_description": str(exc)},
        status_code=429,
        headers={"Retry-After": str(exc.retry_after), "Cache-Control": "no-store"},
    )


def limited(handle: Callable[[Request], Any]) -> ASGIApp:
    """``handle`` with the SDK's body limit, and a database that cannot answer for a moment
    answered 503 with ``Retry-After`` as on every page (the SDK's handlers let such an
    error go up, but the authorize one, which :data:`authority._INSTEAD` covers)."""
    return UnavailableMiddleware(
        RequestBodyLimitMiddleware(request_response(handle), DEFAULT_MAX_REQUEST_BODY_SIZE)
    )


def cors(app: ASGIApp, methods: list[str]) -> ASGIApp:
    """Any origin may call it from a script (a browser-based MCP client): nothing here
    reads a cookie, so nothing is exposed that the caller does not already hold."""
    return CORSMiddleware(
        app, allow_origins="*", allow_methods=methods, allow_headers=[MCP_PROTOCOL_VERSION_HEADER]
    )
