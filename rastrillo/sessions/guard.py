"""`@require` above ``handle``: the route is for signed-in users only."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.responses import PlainTextResponse, RedirectResponse, Response

from rastrillo.awaitable import is_async_callable
from rastrillo.context import Context, is_tool_call
from rastrillo.sessions.middleware import SESSION_SCOPE_KEY
from rastrillo.sessions.store import signed_in_at

H = TypeVar("H", bound=Callable[[Context], Any])

_REQUIRES_SESSION = "rastrillo_requires_session"


def require(handle: H) -> H:
    """Guard ``handle``: without a valid session, a GET is sent to sign in (303) and
    coming back afterwards; any other method is refused with 403.

    A dispatched tool call is guarded the same way, by the session of the user
    the agent acts for.
    """
    if is_async_callable(handle):

        @functools.wraps(handle)
        async def guarded_async(ctx: Context) -> Any:
            return _refusal(ctx) or await handle(ctx)

        setattr(guarded_async, _REQUIRES_SESSION, True)
        return guarded_async  # type: ignore[return-value]

    @functools.wraps(handle)
    def guarded(ctx: Context) -> Any:
        return _refusal(ctx) or handle(ctx)

    setattr(guarded, _REQUIRES_SESSION, True)
    return guarded  # type: ignore[return-value]


def requires_session(handle: Callable[..., Any]) -> bool:
    """Whether ``handle`` is guarded by :func:`require` (so the app need not read the body
    of a request without a session: the guard refuses it unread)."""
    return getattr(handle, _REQUIRES_SESSION, False) is True


def safe_next(url: str | None, default: str = "/") -> str:
    """``url`` if it is a path on this site, else ``default``: where to go after sign-in.

    Refuses ``//host`` and ``/\\host`` (both mean another host to a browser),
    and whitespace or control characters, which browsers strip before parsing.
    """
    if (
        not url
        or not url.startswith("/")
        or url.startswith(("//", "/\\"))
        or "\\" in url
        or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url)
    ):
        return default
    return url


def signed_in_recently(ctx: Context) -> bool:
    """Whether the request's session was made by a sign-in no longer ago than
    ``Options.recent_sign_in``: ask it before giving what outlives the session (an agent's
    access), and send the person to :func:`sign_in_url` when it is not.

    Never for a dispatched tool call, whichever session it runs in, nor for a session made
    for an agent's calls: an agent signs nobody in.
    """
    session_id = ctx.request.scope.get(SESSION_SCOPE_KEY)
    if session_id is None or is_tool_call(ctx.request.scope):
        return False
    signed_in = signed_in_at(ctx.db, session_id)
    return signed_in is not None and ctx.db.clock.now() - signed_in <= ctx.options.recent_sign_in


def sign_in_url(ctx: Context, back: str) -> str:
    """The app's sign-in page (``Options.sign_in_path``), whose ``next`` brings the person
    back to ``back``, a path on this site, once signed in (the sign-in page passes it
    through :func:`safe_next`)."""
    return f"{ctx.options.sign_in_path}?{urlencode({'next': back})}"


def _refusal(ctx: Context) -> Response | None:
    if ctx.user_id is not None:
        return None
    if ctx.request.method not in ("GET", "HEAD"):
        return PlainTextResponse("Sign in first.", status_code=403)
    scope = ctx.request.scope
    here = (scope.get("raw_path") or scope["path"].encode()).split(b"?", 1)[0]
    if scope.get("query_string"):
        here += b"?" + scope["query_string"]
    return RedirectResponse(sign_in_url(ctx, here.decode("latin-1")), status_code=303)
