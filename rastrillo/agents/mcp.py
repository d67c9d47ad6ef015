"""``/mcp``: the app's tools for any MCP client, on the official ``mcp`` SDK.

Streamable HTTP, protocol revisions 2025-06-18, 2025-11-25 and 2026-07-28, the
SDK's server, transport, bearer-token middleware and request-state sealing.
What this module adds is the mapping: ``tools/list`` is the registry in the
``mcp`` format, and ``tools/call`` is :func:`rastrillo.tools.dispatch` as the
grant's agent for the grant's user, so everything that holds for dispatch —
the same handler, middleware, guards, consent and audit rows — holds here.

The credential is the bearer token of a grant (:mod:`rastrillo.agents.grants`)
and nothing else: ``/mcp`` is answered outside the app's session and CSRF
middleware, so a cookie is never read there. A request whose ``Origin`` is
present and is not the app's is refused (DNS rebinding); no ``Origin`` — as
the official clients send — is fine.

A write is proposed, not run, until the user approved that exact call in their
own browser. A client on 2026-07-28 that can open a URL gets an
input-required result: a URL-mode elicitation naming the approval page, and a
request state (sealed by the SDK, bound to this call and this grant) whose
retry redeems the approval. Any other client gets an ``isError`` result that
gives the sentence and the approval URL and says to call again with the same
arguments once approved; the identical call then redeems the approval (see
:func:`rastrillo.tools.consent.settle`).

A grant's tool calls are counted before dispatch (``Options.mcp_call_limit``, in
this process's memory): one over the limit runs nothing, writes no audit row, and
is an ``isError`` result saying when to call again, which the model reads.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import (
    AESGCMRequestStateCodec,
    InvalidRequestState,
    RequestStateBoundary,
    RequestStateSecurity,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import AnyHttpUrl, ConfigDict
from sqlalchemy import false, select
from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rastrillo import limits, threads
from rastrillo.agents import MCP_PATH, RESOURCE_METADATA_PATH, grants
from rastrillo.agents.tables import keys_table
from rastrillo.csrf import canonical_origin
from rastrillo.errors import ConfigError
from rastrillo.limits import CallCounter, CallLimit, Refused
from rastrillo.registry.declare import ToolDef
from rastrillo.registry.errors import ApprovalInvalid, BadActor, ConfirmRequired, ToolError
from rastrillo.registry.schemas import schemas
from rastrillo.sessions import cookie_name
from rastrillo.storage import Database, upsert
from rastrillo.tools import consent

if TYPE_CHECKING:
    from rastrillo.tools.calls import Target
from rastrillo.tools.calls import Call, Result, dispatch

__all__ = ["APPROVAL_META", "RATE_LIMIT_META", "McpEndpoint", "state_key"]

log = logging.getLogger("rastrillo.mcp")

APPROVAL_META = "rastrillo/approval"
"""The ``_meta`` key of a write waiting for approval: ``{"id", "url"}``."""
RATE_LIMIT_META = "rastrillo/rate_limit"
"""The ``_meta`` key of a call refused for its grant's rate: ``{"retry_after": seconds}``."""
_ELICITATION_KEY = "approval"
_STATE_KEY = "mcp-request-state"
_REVOKED_SCOPE_KEY = "rastrillo.mcp.revoked"
_UNCONFIRMED_SCOPE_KEY = "rastrillo.mcp.unconfirmed"
"""True while the request's token is one remembered, not looked up, and no session check
of the call has shown its grant live yet (:meth:`McpEndpoint.__call__`)."""
_SDK_TRANSPORT_LOG = "mcp.server.streamable_http"
_RECHECK = timedelta(minutes=1)
_MAX_CHECKED = 10_000


class GrantToken(AccessToken):
    """The SDK's access token, carrying the grant it authenticates."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    grant: grants.Grant
    key: bytes
    """The token's key in the verifier's memory (a digest: the token itself is not kept)."""


class _GrantBackend(AuthenticationBackend):
    """The bearer check of ``/mcp``: ``Authorization: Bearer <token>`` to its grant.

    A request may use a token this process checked in the last minute, until
    its expiry; any other token is looked up in the grant store, in a worker
    thread. A revocation since the check shows in the session check a tool
    call makes anyway, before the app runs, in the thread hop the call has for
    its handler, since revoking a grant ends the sessions of its calls
    (:func:`grants.grant_session`). Then :class:`McpEndpoint` looks the grant
    up, finds it revoked and answers 401. So a tool call costs one thread hop,
    not two. A request answered without that session check (any other method,
    or a call refused before the app runs) is marked
    (:data:`_UNCONFIRMED_SCOPE_KEY`), and its grant looked up before it is answered:
    one hop for it too, as a lookup of the token would have been.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._checked: dict[bytes, tuple[GrantToken, datetime]] = {}

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        scheme, _, token = conn.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        key = hashlib.sha256(token.encode()).digest()
        known = self._checked.get(key)
        if known is not None and self.db.clock.now() < known[1]:
            conn.scope[_UNCONFIRMED_SCOPE_KEY] = True
            return AuthCredentials([]), AuthenticatedUser(known[0])
        access = await self._access(token, key)
        return None if access is None else (AuthCredentials([]), AuthenticatedUser(access))

    async def _access(self, token: str, key: bytes) -> GrantToken | None:
        """The token looked up in the store, and remembered for a minute at most."""
        now = self.db.clock.now()
        found = await threads.in_thread(grants.authenticate_until, self.db, token)
        if found is None:
            self._checked.pop(key, None)
            return None
        grant, expires = found
        # The principal the SDK binds request state (and sessions) to is this grant.
        access = GrantToken(
            token="", client_id=grant.id, subject=grant.user_id, scopes=[], grant=grant, key=key
        )
        if len(self._checked) >= _MAX_CHECKED:
            self._checked.clear()
        self._checked[key] = (access, min(expires, now + _RECHECK))
        return access

    def forget(self, access: GrantToken) -> None:
        """The next request with this token reads the store again."""
        self._checked.pop(access.key, None)

    async def live(self, access: GrantToken) -> bool:
        """Whether the remembered token's grant is still live, read from the store; if not,
        the token is forgotten."""
        grant = await threads.in_thread(grants.get_grant, self.db, access.grant.id)
        if grant is None or grant.revoked_at is not None:
            self.forget(access)
            return False
        return True


@dataclass
class _Settings:
    app: Any
    """The app's ASGI app, the one dispatch sends calls through."""
    defs: tuple[ToolDef, ...]
    """A tuple: dispatch works out each tool's checks once for it, not on every call."""
    db: Database
    origin: str


class McpEndpoint:
    """The ASGI app answering ``/mcp``; run :meth:`running` around serving (the lifespan)."""

    def __init__(
        self,
        app: Target,
        defs: Sequence[ToolDef],
        db: Database,
        origin: str,
        *,
        name: str,
        version: str,
        state_ttl: float = 600.0,
        call_limit: CallLimit | None = None,
        max_body: int = limits.DEFAULT_MAX_BODY,
    ) -> None:
        self._max_body = max_body
        self._settings = _Settings(app, tuple(defs), db, canonical_origin(origin))
        self._tools = [types.Tool.model_validate(t) for t in schemas(defs, "mcp")]
        # Only a schema that names a header (x-mcp-header) gives the SDK an Mcp-Param-*
        # header to check against the call's arguments; ours name none. Given one that
        # does not, the SDK walks it on every call to find nothing: given None, it skips.
        self._schemas = {t.name: t.input_schema for t in self._tools if _names_headers(t)}
        self._sessions: dict[str, str] = {}
        self._calls = None if call_limit is None else CallCounter(call_limit, db.clock)
        self._cookie = cookie_name(self._settings.origin)
        server: Server[Any] = Server(
            name,
            version=version,
            instructions=(
                "Tools of this app, acting for the user who granted this connection. Reads "
                "run at once; a write runs only after the user approved that exact call in "
                "their browser."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            get_tool_input_schema=self._schemas.get,
        )
        server.middleware[:] = [
            _WhenTraced(m) if _is_sdk_tracing(m) else m for m in server.middleware
        ]
        self._codec = _StateCodec()
        security = RequestStateSecurity(codec=self._codec, ttl=state_ttl, bind_principal=_principal)
        server.middleware.append(
            RequestStateBoundary(security, default_audience=self._settings.origin + MCP_PATH)
        )
        # The SDK's Host/Origin check stays off (``__call__`` checks Origin against the app's):
        # its settings given once, not built again by the SDK for every request.
        self._manager = StreamableHTTPSessionManager(
            server,
            stateless=True,
            json_response=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        metadata = AnyHttpUrl(self._settings.origin + RESOURCE_METADATA_PATH)
        protected = RequireAuthMiddleware(self._answer, [], metadata)
        self._bearer = _GrantBackend(db)
        self._asgi: ASGIApp = AuthenticationMiddleware(
            AuthContextMiddleware(protected), backend=self._bearer
        )
        self._unauthorized = protected
        self._started = False
        logging.getLogger(_SDK_TRANSPORT_LOG).addFilter(_no_stateless_termination)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's session manager, started for as long as the app serves."""
        self._codec.load(await threads.in_thread(state_key, self._settings.db))
        async with self._manager.run():
            self._started = True
            try:
                yield
            finally:
                self._started = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _header(scope, b"origin")
        if origin is not None and _same_origin(origin, self._settings.origin) is False:
            await PlainTextResponse("Forbidden: foreign Origin", 403)(scope, receive, send)
            return
        if not self._started:
            await PlainTextResponse("MCP is not started: serve the app with its lifespan", 503)(
                scope, receive, send
            )
            return

        async def send_unless_revoked(message: Message) -> None:
            if message["type"] == "http.response.start" and scope.pop(
                _UNCONFIRMED_SCOPE_KEY, False
            ):
                # A request answered on a remembered token without the session check
                # that tells of a revocation (not a tool call that reached the app):
                # the store says.
                access = _grant_token(scope)
                if access is None or not await self._bearer.live(access):
                    scope[_REVOKED_SCOPE_KEY] = True
            if not scope.get(_REVOKED_SCOPE_KEY):
                await send(message)
            elif message["type"] == "http.response.start":
                # The grant was revoked while its token was still known here: the
                # 401 the next request would get, in place of the tool's result.
                await self._unauthorized({**scope, "user": None}, receive, send)

        await self._asgi(scope, receive, send_unless_revoked)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's transport, for POST (and its own 405 to DELETE). A GET would open the
        transport's standalone server stream, on which a stateless server never sends
        anything: held open for as long as the client liked, one task and connection each,
        past the grant's revocation. So it is 405, as the transport answers a server that
        offers no such stream."""
        if scope["method"] == "GET":
            message = "Method Not Allowed: /mcp sends no server stream; POST each message"
            await PlainTextResponse(message, 405, headers={"Allow": "POST"})(scope, receive, send)
            return
        # The transport reads the whole body into memory before it parses it: read it here
        # first, held to Options.max_body as a form is, once the token is known good.
        too_large = limits.declared_too_large(scope, self._max_body)
        whole = None if too_large else await _read_whole(receive, self._max_body)
        if whole is None:
            await limits.too_large(self._max_body)(scope, receive, send)
            return
        await self._manager.handle_request(scope, whole, send)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        access = _access_of(ctx)
        if self._calls is not None:
            refused = self._calls.take(access.grant.id)
            if refused is not None:
                return _too_fast(access.grant, self._calls.limit, refused)
        approval = params.request_state  # unsealed by the SDK: ours, for this call and grant
        declined = _declined_elicitation(params.input_responses)
        try:
            result = await self._dispatch(access, params.name, params.arguments or {}, approval)
        except ConfirmRequired as pending:
            if _can_elicit_url(ctx):
                if declined is not None:
                    return _refusal(
                        f"Not run: the user chose {declined!r} instead of opening the approval "
                        f"page. {pending.sentence} still waits at {pending.url} until it expires."
                    )
                return _input_required(pending)
            return _approval_needed(pending)
        except ApprovalInvalid as exc:
            if exc.reason == "pending" and declined is None and _can_elicit_url(ctx):
                record = await threads.in_thread(consent.get, self._settings.db, approval)
                if record is not None:
                    return _input_required(
                        ConfirmRequired(
                            record.tool,
                            record.sentence,
                            record.id,
                            self._settings.origin + record.url,
                        )
                    )
            return _refusal(str(exc))
        except ToolError as exc:
            return _refusal(str(exc))
        assert ctx.request is not None  # a request over HTTP: _access_of found its user
        if result is None:
            ctx.request.scope[_REVOKED_SCOPE_KEY] = True
            return _refusal("This connection was revoked by the user.")
        # The app ran the call in the grant's session: the session check showed it live.
        ctx.request.scope.pop(_UNCONFIRMED_SCOPE_KEY, None)
        return _result(result)

    async def _dispatch(
        self, access: GrantToken, tool: str, args: Mapping[str, Any], approval: str | None
    ) -> Result | None:
        """The call run by dispatch as the grant's agent for its user; None if the grant
        was revoked."""
        settings, grant = self._settings, access.grant
        # The agent claims no user of its own: a call acts for the user whose session it
        # carries, the grant's. So dispatch does not look a read's session up before the
        # app runs; the app checks it in the thread hop the read has anyway.
        actor = grant.actor
        for attempt in (1, 2):
            session = self._sessions.get(grant.id)
            if session is None:
                session = await threads.in_thread(grants.grant_session, settings.db, grant)
                if session is None:
                    self._bearer.forget(access)
                    return None
                self._sessions[grant.id] = session
            call = Call(
                tool=tool,
                args=args,
                actor=actor,
                session=session,
                approval=approval,
                client=grant.client,
            )
            try:
                result = await dispatch(settings.app, settings.defs, call)
            except BadActor:  # a write whose session had ended
                if attempt == 2:
                    raise
            else:
                if attempt == 2 or not _clears_cookie(result, self._cookie):
                    return result
                # The app cleared the session cookie: this read ran as nobody (a GET:
                # nothing changed), and its answer is not given.
            # The session had ended: the grant was revoked, or the user ended their
            # sessions. A new one if the grant is live, and the call again.
            if self._sessions.get(grant.id) == session:  # not another call's new one
                del self._sessions[grant.id]
            self._bearer.forget(access)
        raise AssertionError("unreachable")


class _WhenTraced:
    """The SDK's OpenTelemetry middleware, run only when its span could be seen.

    With no tracer provider set (none in code, none named by the environment) the
    SDK's span is a non-recording one: nothing is kept or exported, and the only
    thing it could carry on is a caller's ``traceparent`` from the request's
    ``_meta``. Then the span is made, as it always is; otherwise the call goes
    straight on, sparing it the span's context switch and attributes (about 6 %
    of an in-process ``/mcp`` call). Checked on every request, so a provider set
    after startup is seen at once.
    """

    def __init__(self, traced: Callable[..., Awaitable[HandlerResult]]) -> None:
        self._traced = traced

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        if _tracing() or (ctx.meta is not None and _TRACEPARENT in ctx.meta):
            return await self._traced(ctx, call_next)
        return await call_next(ctx)


_TRACEPARENT = "traceparent"


def _is_sdk_tracing(middleware: object) -> bool:
    """Whether a middleware the SDK's ``Server`` starts with is its OpenTelemetry one.

    Told by the class's name, not imported: it lives in a private module
    (``mcp.server._otel``) that a minor release of the SDK may move, and an import
    would then stop every app with MCP from starting. Renamed, it is simply not
    recognised and runs at every call, as the SDK itself runs it."""
    return type(middleware).__name__ == "OpenTelemetryMiddleware"


def _tracing() -> bool:
    """Whether a tracer provider is set, so that a span made now may be recorded."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _names_headers(tool: types.Tool) -> bool:
    """Whether the tool's input schema declares an argument mirrored in a header."""
    schema = tool.input_schema
    return find_invalid_x_mcp_header(schema) is None and bool(x_mcp_header_map(schema))


def _clears_cookie(result: Result, cookie: str) -> bool:
    cleared = cookie + "=;"
    return any(value.startswith(cleared) for value in result.headers.getlist("set-cookie"))


def _access_of(ctx: ServerRequestContext[Any]) -> GrantToken:
    access = _grant_token(ctx.request.scope) if ctx.request is not None else None
    if access is None:
        raise RuntimeError("an /mcp request reached a tool without a grant")
    return access


def _grant_token(scope: Scope) -> GrantToken | None:
    """The grant token the bearer check found for this request, if it found one."""
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser) or not isinstance(user.access_token, GrantToken):
        return None
    return user.access_token


def _can_elicit_url(ctx: ServerRequestContext[Any]) -> bool:
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


def _declined_elicitation(responses: Mapping[str, Any] | None) -> str | None:
    answer = (responses or {}).get(_ELICITATION_KEY)
    if isinstance(answer, types.ElicitResult) and answer.action != "accept":
        return answer.action
    return None


def _input_required(pending: ConfirmRequired) -> types.InputRequiredResult:
    elicit = types.ElicitRequest(
        params=types.ElicitRequestURLParams(message=pending.sentence, url=pending.url)
    )
    return types.InputRequiredResult(
        input_requests={_ELICITATION_KEY: elicit}, request_state=pending.approval_id
    )


def _approval_needed(pending: ConfirmRequired) -> types.CallToolResult:
    text = (
        f"Not run yet: this change needs the user's approval. {pending.sentence}\n"
        f"Ask the user to approve it at {pending.url} and then call {pending.tool} again "
        "with the same arguments; it runs once, after they approve."
    )
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        is_error=True,
        _meta={APPROVAL_META: {"id": pending.approval_id, "url": pending.url}},
    )


def _too_fast(grant: grants.Grant, limit: CallLimit, refused: Refused) -> types.CallToolResult:
    """The answer to a call over its grant's limit: an ``isError`` result, which a client
    hands the model, saying when to call again. A refusal writes no audit row; a grant's
    first in a window writes a log line, so a flood of calls grows neither the table
    nor the log past a line a minute."""
    window = _span(limit.window)
    if refused.first:
        log.warning(
            "MCP tool calls of agent %s for user %r (grant %s) refused: over %d in %s; "
            "no more of its refusals are logged for %s",
            grant.agent,
            grant.user_id,
            grant.id,
            limit.calls,
            window,
            window,
        )
    text = (
        f"Not run: this connection is over its limit of {limit.calls} tool calls in "
        f"{window}. Call again in {refused.retry_after} s."
    )
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        is_error=True,
        _meta={RATE_LIMIT_META: {"retry_after": refused.retry_after}},
    )


def _span(window: timedelta) -> str:
    """``a minute``, ``5 minutes``, ``90 s``."""
    seconds = window.total_seconds()
    if seconds % 60:
        return f"{seconds:g} s"
    minutes = int(seconds // 60)
    return "a minute" if minutes == 1 else f"{minutes} minutes"


def _refusal(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _result(result: Result) -> types.CallToolResult:
    text = result.text
    if not text:
        location = result.headers.get("location")
        text = f"HTTP {result.status}" + (f", Location: {location}" if location else "")
    structured = None
    if result.headers.get("content-type", "").startswith("application/json"):
        try:
            body = result.json()
        except ValueError:
            body = None
        structured = body if isinstance(body, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=structured,
        is_error=result.status >= 400,
    )


class _StateCodec:
    """The SDK's AES-GCM request-state codec under the app's key, loaded at startup."""

    def __init__(self) -> None:
        self._codec: AESGCMRequestStateCodec | None = None

    def load(self, key: bytes) -> None:
        self._codec = AESGCMRequestStateCodec([key])

    def seal(self, payload: bytes) -> str:
        if self._codec is None:
            raise InvalidRequestState("no key yet")
        return self._codec.seal(payload)

    def unseal(self, token: str) -> bytes:
        if self._codec is None:
            raise InvalidRequestState("no key yet")
        return self._codec.unseal(token)


def state_key(db: Database) -> bytes:
    """The key that seals request state, the same for every process of the app.

    Made at random by the first process that needs it and kept in the database,
    so a client's retry may reach any process. Holding it lets one forge a
    request state, which names an approval and nothing more: redeeming it still
    needs the user's approval of that exact call, for that grant's user and agent.
    """
    find = select(keys_table.c.value).where(keys_table.c.name == _STATE_KEY)
    with db.read() as conn:
        key = conn.execute(find).scalar()
    if key is None:
        with db.write() as conn:
            # Never overwrite: a process that made the key first keeps it.
            made = {"name": _STATE_KEY, "value": secrets.token_hex(32)}
            upsert(conn, keys_table, made, key=["name"], where=false())
            key = conn.execute(find).scalar_one()
    return bytes.fromhex(key)


def _principal(ctx: ServerRequestContext[Any]) -> str:
    return _access_of(ctx).grant.id


async def _read_whole(receive: Receive, max_bytes: int) -> Receive | None:
    """A ``receive`` that gives the whole body again, read here; ``None`` once more than
    ``max_bytes`` arrived (the rest is left unread)."""
    read: list[Message] = []
    bounded = limits.limited(receive, max_bytes)
    more = True
    while more:
        try:
            message = await bounded()
        except limits.BodyTooLarge:
            return None
        read.append(message)
        more = message["type"] == "http.request" and message.get("more_body", False)
    return _replay(read, receive)


def _replay(read: list[Message], receive: Receive) -> Receive:
    """``receive`` that gives the messages already ``read`` first, then the rest."""

    async def replay() -> Message:
        return read.pop(0) if read else await receive()

    return replay


def _no_stateless_termination(record: logging.LogRecord) -> bool:
    """Drops the SDK's INFO line "Terminating session: None", which its stateless transport
    logs after every request of a handshake-era client: under `python app.py`'s INFO
    logging, a line per tool call saying that a session that never was has ended."""
    return record.getMessage() != "Terminating session: None"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def _same_origin(origin: str, ours: str) -> bool:
    try:
        return canonical_origin(origin) == ours
    except ConfigError:
        return False
