"""The consent page, ``/_rastrillo/agents/authorize``: where a person lets an MCP client in.

An MCP client's authorize request (see :mod:`rastrillo.agents.oauth`) ends
here. The page is for a signed-in user only (anyone else is sent to the app's
own sign-in page and comes back); it names the client as it registered
itself, the host its answer goes to, the agent name it will act as (the user
may change it) and what that agent may do. Allow and Deny are CSRF-checked
POSTs from the user's own browser session; a POST made inside a frame is
refused too, on top of the framework pages' no-framing headers. The access
outlives the session, so Allow needs a recent sign-in (``Options.recent_sign_in``):
an older session is offered a sign-in that comes back here, and may still Deny.
Plain HTML, no JavaScript; an app can restyle it with
``templates/_rastrillo/authorize.html``, which shows ``{{ notice }}``: the framework's
own words on what the person allows (the client's name is its own claim; the host and
port the answer goes to), rendered from the framework's templates alone. A page that
leaves them out is not shown: the framework's own is, and an error is logged.

:mod:`rastrillo.agents.oauth` (and with it the MCP SDK) is imported by the page's
handlers, when the page is first asked for: an app serving only its own pages
starts without it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from starlette.responses import HTMLResponse, Response

from rastrillo import visible
from rastrillo.agents import grants
from rastrillo.context import Context
from rastrillo.registry.declare import ToolDef, ToolWrite
from rastrillo.routing import CONSENT_PATH, Route
from rastrillo.sessions import SESSION_SCOPE_KEY, require, sign_in_url, signed_in_recently

if TYPE_CHECKING:
    from rastrillo.agents.oauth import PendingAuthorization

__all__ = ["authorize_routes"]

_SOURCE = "rastrillo/pages/authorize.py"
_FRAMED = frozenset({"iframe", "frame", "embed", "object", "fencedframe"})
_TEMPLATE = "_rastrillo/authorize.html"
log = logging.getLogger(__name__)


def authorize_routes(issuer: str, tools: Sequence[ToolDef]) -> list[Route]:
    """The consent page's routes for an app whose origin (the OAuth issuer) is ``issuer``."""
    reads = [t for t in tools if t.access != ToolWrite]
    writes = [t for t in tools if t.access == ToolWrite]
    # The framework's own templates alone: the notice, and the page shown when an app's
    # restyled one leaves the notice out, are never the app's.
    own = Environment(loader=PackageLoader("rastrillo", "templates"), autoescape=True)

    def page(
        ctx: Context,
        request: PendingAuthorization,
        agent: str,
        error: str = "",
        status: int | None = None,
        *,
        typed: bool = False,
    ) -> Response:
        """The page, offering ``agent`` as the name; ``typed``: the person's own, which the
        page keeps when it sends them to sign in again."""
        back = f"{CONSENT_PATH}?{urlencode({'request': request.id})}"
        if typed:
            back += "&" + urlencode({"agent": agent})
        client_name = visible.parts(request.client_name)
        notice = Markup(
            own.get_template("_rastrillo/consent_notice.html").render(
                request=request, client_name=client_name
            )
        )
        return _with_notice(
            ctx,
            own,
            status=status or (400 if error else 200),
            notice=notice,
            # The access outlives the session that allows it: only a recent sign-in may.
            recent=signed_in_recently(ctx),
            sign_in_again=sign_in_url(ctx, back),
            action=CONSENT_PATH,
            request=request,
            client_name=client_name,
            client_title=visible.for_terminal(request.client_name),
            agent=agent,
            error=error,
            reads=reads,
            writes=writes,
        )

    @require
    def show(ctx: Context) -> Response:
        from rastrillo.agents import oauth

        request = oauth.pending(ctx.db, ctx.query.get("request", ""))
        if request is None or not ctx.actor.human:
            return _gone(ctx)
        typed = ctx.query.get("agent", "").strip()  # back from signing in again
        if typed:
            return page(ctx, request, typed, typed=True)
        taken = {g.agent for g in grants.list_grants(ctx.db, ctx.user_id)}
        return page(ctx, request, request.agent_suggestion(taken))

    @require
    def post_decision(ctx: Context) -> Response:
        if not ctx.actor.human or ctx.request.headers.get("sec-fetch-dest") in _FRAMED:
            return ctx.text("Answer on the page itself, not inside another.", status=403)
        from rastrillo.agents import oauth

        request_id = ctx.form.get("request", "")
        decision = ctx.form.get("decision")
        try:
            if decision == "deny":
                return ctx.redirect(oauth.deny(ctx.db, request_id, issuer=issuer))
            if decision != "allow":
                return ctx.text("Choose Allow or Deny.", status=400)
            agent = ctx.form.get("agent", "").strip()
            if not signed_in_recently(ctx):
                request = oauth.pending(ctx.db, request_id)
                if request is None:
                    return _gone(ctx)
                return page(ctx, request, agent, status=403, typed=True)
            return ctx.redirect(
                oauth.allow(
                    ctx.db,
                    request_id,
                    user_id=str(ctx.user_id),
                    session=ctx.request.scope[SESSION_SCOPE_KEY],
                    agent=agent,
                    issuer=issuer,
                )
            )
        except oauth.BadAgentName as exc:
            request = oauth.pending(ctx.db, request_id)
            if request is None:
                return _gone(ctx)
            return page(ctx, request, agent, str(exc), typed=True)
        except oauth.AuthorizationGone:
            return _gone(ctx)

    return [
        Route("GET", CONSENT_PATH, _SOURCE, show),
        Route("POST", CONSENT_PATH, _SOURCE, post_decision),
    ]


def _with_notice(
    ctx: Context, own: Environment, *, status: int, notice: Markup, **context: Any
) -> Response:
    """The consent page, if it shows ``notice`` whole; else the framework's own, and an
    error logged: an app's restyled page must not let a person allow a client without
    reading whose claim its name is and where the answer goes."""
    page = ctx.render(_TEMPLATE, status=status, notice=notice, **context)
    if _shows(bytes(page.body).decode(), notice):
        return page
    log.error(
        "templates/%s does not show {{ notice }} (what the person allows: the client's "
        "name is its own claim, and where the answer goes): the framework's own consent "
        "page was shown instead",
        _TEMPLATE,
    )
    html = own.get_template(_TEMPLATE).render(ctx=ctx, notice=notice, **context)
    return HTMLResponse(html, status_code=status)


_UNSHOWN = frozenset(
    {"head", "title", "script", "style", "template", "noscript", "textarea", "select", "iframe"}
)
"""Elements whose content a browser does not show as the page's markup."""
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
_OPENS = '<div class="consent-notice">'
"""How the notice's markup begins (``_rastrillo/consent_notice.html``)."""


def _shows(html: str, notice: str) -> bool:
    """Whether ``html`` shows ``notice`` whole where a person sees it: not in a comment, not
    in an element whose content is not shown (``<template>``, ``<noscript>``,
    ``<textarea>`` …), not under one with the ``hidden`` attribute. Commented out, say, it
    would be in the page's text and not on the screen. (What the app's CSS hides, no
    reading of the markup can tell.)"""
    at = set(_find_all(html, notice))
    if not at:
        return False
    finder = _Finder(shift=notice.index(_OPENS))
    finder.feed(html)
    finder.close()
    return bool(at & finder.shown)


def _find_all(text: str, part: str) -> Iterator[int]:
    i = text.find(part)
    while i >= 0:
        yield i
        i = text.find(part, i + 1)


class _Finder(HTMLParser):
    """Reads a page, noting where each ``<div class="consent-notice">`` that a person would
    see begins, less ``shift`` (where the notice's text begins)."""

    def __init__(self, shift: int) -> None:
        super().__init__(convert_charrefs=True)
        self._shift = shift
        self.shown: set[int] = set()
        self._open: list[tuple[str, bool]] = []  # each open element: its tag, whether it hides
        self._lines = [0]

    def feed(self, data: str) -> None:
        self._lines = [0, *(i + 1 for i, c in enumerate(data) if c == "\n")]
        super().feed(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        hides = (
            tag in _UNSHOWN
            or any(name == "hidden" for name, _ in attrs)
            or (bool(self._open) and self._open[-1][1])
        )
        if not hides and tag == "div" and attrs == [("class", "consent-notice")]:
            line, column = self.getpos()
            self.shown.add(self._lines[line - 1] + column - self._shift)
        if tag not in _VOID:
            self._open.append((tag, hides))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == tag:
                del self._open[i:]
                return


def _gone(ctx: Context) -> Response:
    return ctx.render(_TEMPLATE, status=400, request=None)
