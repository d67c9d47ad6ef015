"""The agents page, ``/_rastrillo/agents``: the signed-in user's agent grants.

Each grant (an MCP client acting for this user as one named agent) is listed
with its client, when it was created and last used, and a Revoke button; a
revoked grant's tokens are refused from their next call on. "New token" makes
a personal access token for an agent that cannot do OAuth, and shows it once,
in the answer to that POST: only its digest is kept. Both are CSRF-checked
POSTs from the user's own browser session, and a tool call can never reach
them (an agent cannot mint or revoke tokens). A token outlives the session that
made it, so "New token" needs a recent sign-in (``Options.recent_sign_in``): an
older session is offered a sign-in that comes back here. Revoke needs none.
"""

from __future__ import annotations

from datetime import timedelta

from starlette.responses import Response

from rastrillo import visible
from rastrillo.agents import grants
from rastrillo.context import Context
from rastrillo.routing import Route
from rastrillo.sessions import SESSION_SCOPE_KEY, require, sign_in_url, signed_in_recently

__all__ = ["AGENTS_PATH", "agents_routes"]

AGENTS_PATH = "/_rastrillo/agents"
_SOURCE = "rastrillo/pages/agents.py"
_LIFETIMES = {"7": timedelta(days=7), "30": timedelta(days=30), "90": timedelta(days=90)}


def agents_routes(mcp_url: str) -> list[Route]:
    """The agents page's routes; ``mcp_url`` is the address agents connect to."""

    @require
    def show(ctx: Context) -> Response:
        return _page(ctx, mcp_url)

    @require
    def new_token(ctx: Context) -> Response:
        if not ctx.actor.human or ctx.user_id is None:
            return ctx.not_found()
        if not signed_in_recently(ctx):
            return _page(ctx, mcp_url, status=403)
        agent = (ctx.form.get("agent") or "").strip()
        lifetime = _LIFETIMES.get(ctx.form.get("days") or "30")
        if lifetime is None:
            return _page(ctx, mcp_url, error="Choose how long the token lasts.", status=400)
        try:
            grant, token, expires = grants.personal_token(
                ctx.db,
                user_id=ctx.user_id,
                agent=agent,
                ttl=lifetime,
                # Made only while the session giving it lives: never after revoke_user.
                session=ctx.request.scope[SESSION_SCOPE_KEY],
            )
        except grants.GrantError as exc:
            return _page(ctx, mcp_url, error=str(exc), agent=agent, status=400)
        return _page(ctx, mcp_url, new=(grant, token, expires))

    @require
    def revoke(ctx: Context) -> Response:
        if not ctx.actor.human:
            return ctx.not_found()
        grants.revoke(ctx.db, ctx.params["id"], user_id=ctx.user_id)
        return ctx.redirect(AGENTS_PATH)

    return [
        Route("GET", AGENTS_PATH, _SOURCE, show),
        Route("POST", AGENTS_PATH + "/tokens", _SOURCE, new_token),
        Route("POST", AGENTS_PATH + "/{id}/revoke", _SOURCE, revoke),
    ]


def _page(ctx: Context, mcp_url: str, status: int = 200, **extra: object) -> Response:
    if not ctx.actor.human:  # an agent never sees or makes grants, even with a session
        return ctx.not_found()
    return ctx.render(
        "_rastrillo/agents.html",
        status=status,
        grants=grants.list_grants(ctx.db, ctx.user_id),
        # A client's name is what it called itself at registration, anyone's choice:
        # shown as the consent page shows it, every invisible character marked.
        parts=visible.parts,
        plain=visible.for_terminal,
        mcp_url=mcp_url,
        agents_path=AGENTS_PATH,
        # A token outlives the session that made it: only a recent sign-in makes one.
        recent=signed_in_recently(ctx),
        sign_in_again=sign_in_url(ctx, AGENTS_PATH),
        **extra,
    )
