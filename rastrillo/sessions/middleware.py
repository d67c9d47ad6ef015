"""The session middleware, and `sign_in` / `sign_out` for a handler.

The middleware reads the session cookie, checks its row and puts the user's id
in the ASGI scope, where ``ctx.user_id`` finds it. With nothing between it and
the router (no ``Options.wrap``), it leaves the row's check to the router, which
makes it in the worker thread a sync ``handle`` runs in: one thread hop a
request, not two, and still a check of the row before every ``handle``. ``sign_in`` and
``sign_out`` change the row during ``handle`` and leave the cookie for the
middleware to set on the way out: plain functions for a sync ``handle``, which runs in
a worker thread; an async ``handle`` awaits ``sign_in_async`` / ``sign_out_async``, which
write the row in one, for nothing may wait on the database's lock on the event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rastrillo import threads
from rastrillo.context import USER_SCOPE_KEY, FoundSession, is_tool_call, tool_call_marker
from rastrillo.errors import ConfigError
from rastrillo.options import DEFAULT_SESSION_LIFETIME
from rastrillo.sessions.store import (
    create_session,
    delete_session,
    find_session,
    find_session_from_loop,
    is_session_id,
)
from rastrillo.storage import Database

if TYPE_CHECKING:
    from rastrillo.context import Context

SESSION_SCOPE_KEY = "rastrillo.session_id"
"""ASGI scope key holding the current session's id (the cookie value), or None."""

_STATE_KEY = "rastrillo.session"


def cookie_name(origin: str) -> str:
    """The session cookie's name: ``__Host-`` prefixed on https, so no subdomain can set it."""
    return "__Host-rastrillo_session" if _is_https(origin) else "rastrillo_session"


@dataclass
class RequestSession:
    """One request's session, shared by reference even when a middleware copies the scope."""

    middleware: SessionMiddleware
    id: str | None
    user_id: str | None
    set_cookie: str | None = None
    unchecked: str | None = None
    """A presented cookie whose row is not checked yet: :meth:`check` does it."""
    tool_call: bool = False
    """The request carries the tool-call marker, which only dispatch puts in the scope: it
    alone may act in a session made for an agent's calls (``create_session(agent_only=)``);
    any other request presenting one has no session, as a browser with no cookie has."""

    @property
    def pending(self) -> bool:
        return self.unchecked is not None

    def check(self, scope: Scope) -> None:
        """Check the presented cookie's row and put the user in ``scope``.

        It queries the database, so it runs in a worker thread, never on the event loop.
        """
        presented = self.unchecked
        if presented is None:
            return
        self.found(scope, find_session(self.middleware.db, presented, tool_call=self.tool_call))

    async def check_now(self, scope: Scope) -> None:
        """:meth:`check`, on the event loop, for a request whose ``handle`` runs there (an
        async one) or behind ``Options.wrap``: with no thread hop on SQLite, save for a
        write (:func:`~rastrillo.sessions.store.find_session_from_loop`)."""
        presented = self.unchecked
        if presented is None:
            return
        db = self.middleware.db
        self.found(scope, await find_session_from_loop(db, presented, tool_call=self.tool_call))

    def found(self, scope: Scope, found: FoundSession | None) -> None:
        """The presented cookie's row as the caller checked it (a tool call's write checks
        it in the transaction that uses its approval), put in ``scope`` as :meth:`check`
        does."""
        self.unchecked = None
        if found is None:
            self.set_cookie = self.middleware.cookie_header(None)
        else:
            self.id, self.user_id = found.id, found.user_id
        scope[SESSION_SCOPE_KEY] = self.id
        scope[USER_SCOPE_KEY] = self.user_id


class SessionMiddleware:
    """Resolve the session cookie to a user for every HTTP request.

    ``deferred``: the app inside is the router, which calls :func:`pending_session`
    and checks the row itself before ``handle``; otherwise it is checked here.
    """

    def __init__(
        self,
        app: ASGIApp,
        db: Database,
        origin: str,
        *,
        deferred: bool = False,
    ) -> None:
        self.app = app
        self.db = db
        self.deferred = deferred
        self.cookie = cookie_name(origin)
        self._attributes = "; Path=/; HttpOnly; SameSite=Lax" + (
            "; Secure" if _is_https(origin) else ""
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = await self._resolve(scope)
        scope[_STATE_KEY] = state
        scope[SESSION_SCOPE_KEY] = state.id
        scope[USER_SCOPE_KEY] = state.user_id

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and state.set_cookie is not None:
                MutableHeaders(scope=message).append("set-cookie", state.set_cookie)
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    async def _resolve(self, scope: Scope) -> RequestSession:
        marker = tool_call_marker(scope)
        # A dispatched call's session id passed dispatch's own `is_session_id`.
        dispatched = None if marker is None else marker.session_id
        presented = dispatched or _cookie(scope, self.cookie)
        if presented is None:
            return RequestSession(self, None, None)
        resolved = None if marker is None else marker.session
        if resolved is not None and resolved.id == presented:
            # A dispatched tool call: the dispatcher looked this session up a moment ago.
            return RequestSession(self, resolved.id, resolved.user_id)
        state = RequestSession(self, None, None, unchecked=presented, tool_call=marker is not None)
        if dispatched is None and not is_session_id(presented):
            state.found(scope, None)  # no query: a malformed id matches no row
        elif not self.deferred:
            await state.check_now(scope)
        return state

    def cookie_header(
        self, session_id: str | None, lifetime: timedelta = DEFAULT_SESSION_LIFETIME
    ) -> str:
        """A Set-Cookie value that issues ``session_id`` for ``lifetime``, or clears it for None."""
        if session_id is None:
            return f"{self.cookie}={self._attributes}; Max-Age=0"
        max_age = int(lifetime.total_seconds())
        return f"{self.cookie}={session_id}{self._attributes}; Max-Age={max_age}"


def sign_in(ctx: Context, user_id: str | int) -> str:
    """Start a session for ``user_id`` under a fresh id, ending the request's old one.

    A new id at every sign-in means a session id planted before sign-in
    (session fixation) is worth nothing after it. Returns the new id.

    Signed in inside a dispatched tool call, the session is an agent's (``agent_only``),
    as the session the call ran in: made in the agent's call, its id goes back to the
    code that dispatched it, and outside a tool call it must sign nobody in.

    For a sync ``handle``; an async one awaits :func:`sign_in_async`.
    """
    _off_the_loop("sign_in")
    state = request_session(ctx)
    if state.id is not None:
        delete_session(ctx.db, state.id)
    user = str(user_id)
    idle, lifetime = ctx.options.session_idle, ctx.options.session_lifetime
    agent_only = is_tool_call(ctx.request.scope)
    new_id = create_session(ctx.db, user, idle=idle, lifetime=lifetime, agent_only=agent_only)
    _set(ctx, state, new_id, user)
    state.set_cookie = state.middleware.cookie_header(new_id, lifetime)
    return new_id


async def sign_in_async(ctx: Context, user_id: str | int) -> str:
    """:func:`sign_in` for an async ``handle``: the row written in a worker thread."""
    return await threads.in_thread(sign_in, ctx, user_id)


def sign_out(ctx: Context) -> None:
    """End the request's session: its row is deleted, so the old cookie is dead everywhere.

    For a sync ``handle``; an async one awaits :func:`sign_out_async`."""
    _off_the_loop("sign_out")
    state = request_session(ctx)
    if state.id is not None:
        delete_session(ctx.db, state.id)
    _set(ctx, state, None, None)
    state.set_cookie = state.middleware.cookie_header(None)


async def sign_out_async(ctx: Context) -> None:
    """:func:`sign_out` for an async ``handle``: the row deleted in a worker thread."""
    await threads.in_thread(sign_out, ctx)


def _off_the_loop(name: str) -> None:
    """Refuse to write a session's row on the event loop, where waiting on the database's
    lock (SQLite's writer, a PostgreSQL round trip) would stall every request. (The
    framework serves on asyncio, whose running loop is what this finds.)"""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # a worker thread, or no loop at all
    raise ConfigError(
        f"sessions.{name} writes the session's row, which must not wait on the event "
        f"loop: in an async handle, await sessions.{name}_async(...) instead"
    )


def _set(ctx: Context, state: RequestSession, session_id: str | None, user_id: str | None) -> None:
    state.id, state.user_id = session_id, user_id
    ctx.request.scope[SESSION_SCOPE_KEY] = session_id
    ctx.request.scope[USER_SCOPE_KEY] = user_id
    ctx.user_id = user_id


def pending_session(scope: Scope) -> RequestSession | None:
    """The request's session if its row is still to be checked (see ``deferred``), else None."""
    state = scope.get(_STATE_KEY)
    return state if isinstance(state, RequestSession) and state.pending else None


def request_session(ctx: Context) -> RequestSession:
    state = ctx.request.scope.get(_STATE_KEY)
    if not isinstance(state, RequestSession):
        raise ConfigError("no session middleware: serve the app with rastrillo.handler(options)")
    return state


def _cookie(scope: Scope, name: str) -> str | None:
    """The value of the cookie named ``name`` exactly, the last one sent if several are.

    Only the spaces and tabs HTTP allows around a pair are trimmed. A Unicode-aware trim
    (Starlette's ``cookie_parser``) also drops a leading NBSP or NEL byte, which the browser
    keeps as part of the name: a sibling subdomain could then plant ``\xa0__Host-…``, no
    ``__Host-`` cookie to the browser, and have it read as the session cookie here.
    """
    found = None
    for key, value in scope["headers"]:
        if key == b"cookie":
            for pair in value.decode("latin-1").split(";"):
                cookie, equals, cookie_value = pair.strip(" \t").partition("=")
                if equals and cookie == name:
                    found = cookie_value
    return found


def _is_https(origin: str) -> bool:
    return origin.lower().startswith("https://")
