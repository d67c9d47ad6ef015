"""`Authority`: the ``mcp`` SDK's authorization-server provider for one app, backed by
its grants, and the endpoints that serve it."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
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
    TokenError,
)
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import AnyUrl
from sqlalchemy import delete, select, update
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response
from starlette.types import Message

from rastrillo import threads
from rastrillo.agents import MCP_PATH, RESOURCE_METADATA_PATH, grants
from rastrillo.agents.oauth.consent import RANDOM_256, REQUEST_TTL
from rastrillo.agents.oauth.guards import (
    cors,
    count_authorization,
    count_refresh,
    count_registration,
    limited,
    too_many,
)
from rastrillo.agents.oauth.registration import GRANT_TYPES, Client, stored_registration
from rastrillo.agents.tables import authorizations_table, clients_table
from rastrillo.availability import retryable, unavailable
from rastrillo.routing import (
    AUTHORIZATION_SERVER_PATH,
    CONSENT_PATH,
    OAUTH_AUTHORIZE_PATH,
    OAUTH_REGISTER_PATH,
    OAUTH_REVOKE_PATH,
    OAUTH_TOKEN_PATH,
)
from rastrillo.sessions import throttle
from rastrillo.sessions.store import secret_digest
from rastrillo.storage import Database

_KEEP = timedelta(days=1)
"""How long a used or expired authorization is kept, so a replayed code still revokes; and
how long a client that no authorization or grant names is kept after it registered."""
STATE_MAX = 1024
"""The most characters an authorization request's ``state`` may hold: it is stored with the
request, and a URL may be 64 KiB (a client sends a random value, or a short one it
encodes; RFC 6749 sets no bound)."""
_CLIENT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
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
                "grant_types_supported": sorted(GRANT_TYPES),
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
        info = stored_registration(client_info)
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
        if not RANDOM_256.fullmatch(params.code_challenge):
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
            answer = too_many(exc)
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
        count_authorization(self.db, row["client_id"])
        table = authorizations_table
        with self.db.write() as conn:
            conn.execute(delete(table).where(table.c.created_at < row["created_at"] - _KEEP))
            conn.execute(table.insert().values(**row))

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> Code | None:
        if not RANDOM_256.fullmatch(authorization_code):
            return None
        return await threads.in_thread(self._load_code, client.client_id, authorization_code)

    def _load_code(self, client_id: str, code: str) -> Code | None:
        table = authorizations_table
        with self.db.read() as conn:
            found = select(table).where(table.c.code_digest == secret_digest(code))
            row = conn.execute(found).first()
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
        count_refresh(self.db, refresh_token.grant_id)
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
            return too_many(exc)

    async def _register_endpoint(self, request: Request) -> Response:
        """The SDK's registration handler, for a JSON request within its sender's count.

        RFC 7591 has a client send its registration as ``application/json``; the SDK's
        handler would read any body. Held to JSON, a registration is one no web page can
        send without a CORS preflight, so a page's request carries its true ``Origin``
        and is counted for that origin; a request without one, from a program, for its
        address (:func:`guards.count_registration`).
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
        try:
            await threads.in_thread(count_registration, self.db, address, origin)
        except throttle.TooManyAttempts as exc:
            return too_many(exc)
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
                Route(path, cors(request_response(handle), _GET), methods=_GET)
                for path, handle in (
                    (RESOURCE_METADATA_PATH, resource),
                    (RESOURCE_METADATA_PATH + MCP_PATH, resource),
                    (AUTHORIZATION_SERVER_PATH, MetadataHandler(self.metadata).handle),
                )
            ),
            # No CORS here: a browser is sent to authorize, no script calls it.
            Route(OAUTH_AUTHORIZE_PATH, limited(self._authorize_endpoint), methods=["GET"]),
            *(Route(path, cors(limited(handle), _POST), methods=_POST) for path, handle in posted),
        ]


def _oauth_token(tokens: grants.Tokens) -> OAuthToken:
    return OAuthToken(
        access_token=tokens.access_token,
        expires_in=int(grants.ACCESS_TTL.total_seconds()),
        refresh_token=tokens.refresh_token,
    )
