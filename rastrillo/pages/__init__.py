"""The framework's own pages: approvals, agents, the consent page and the tool console."""

from __future__ import annotations

from rastrillo.agents import grants
from rastrillo.context import Context
from rastrillo.sessions import SESSION_SCOPE_KEY


def in_person(ctx: Context) -> bool:
    """Whether the request is the person's own: not a dispatched tool call, nor a request
    presenting a session made for an agent grant's calls (``grants.is_grant_session``),
    which may decide nothing a person decides."""
    session_id = ctx.request.scope.get(SESSION_SCOPE_KEY)
    return ctx.actor.human and not grants.is_grant_session(ctx.db, session_id)
