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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from starlette.responses import HTMLResponse, Response

from rastrillo import visible
from rastrillo.agents import grants
from rastrillo.context import Context
from rastrillo.logs import Repeats
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


def authorize_routes(issuer: str, tools: Sequence[ToolDef], templates: Environment) -> list[Route]:
    """The consent page's routes for an app whose origin (the OAuth issuer) is ``issuer``
    and whose pages ``templates`` renders."""
    reads = [t for t in tools if t.access != ToolWrite]
    writes = [t for t in tools if t.access == ToolWrite]
    # The framework's own templates alone: the notice, and the page shown when an app's
    # restyled one leaves the notice out, are never the app's. (An overlay: the app's
    # globals, its console link say, stay.)
    own = templates.overlay(loader=PackageLoader("rastrillo", "templates"))
    left_out = Repeats()  # the app's page that leaves the notice out: logged once a window

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
            left_out,
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
    ctx: Context,
    own: Environment,
    left_out: Repeats,
    *,
    status: int,
    notice: Markup,
    **context: Any,
) -> Response:
    """The consent page, if it holds ``notice`` whole; else the framework's own, and an
    error logged: a restyled page that forgot the notice must not let a person allow a
    client without reading whose claim its name is and where the answer goes. (The app
    writes its template and its CSS: this catches a notice left out, not one hidden.)"""
    page = ctx.render(_TEMPLATE, status=status, notice=notice, **context)
    if notice in bytes(page.body).decode():
        return page
    due = left_out.due(_TEMPLATE, ctx.db.clock.monotonic())
    if due is not None:
        log.error(
            "templates/%s does not show {{ notice }} (what the person allows: the client's "
            "name is its own claim, and where the answer goes): the framework's own consent "
            "page was shown instead%s",
            _TEMPLATE,
            due.since("pages", "like it", "like it"),
        )
    html = own.get_template(_TEMPLATE).render(ctx=ctx, notice=notice, **context)
    return HTMLResponse(html, status_code=status)


def _gone(ctx: Context) -> Response:
    return ctx.render(_TEMPLATE, status=400, request=None)
