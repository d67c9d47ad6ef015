"""Roads by which a session made for an agent's calls could still act outside one
(docs/sessions.md, "Sessions made for an agent"), tried over uvicorn on loopback, on SQLite
and PostgreSQL.

A tool call runs in the agent's session. If its ``handle`` signs in (an app's own "renew
my session" write, or a sign-in form an author made a tool), the session it starts is
made inside the agent's call, and its id goes back in that call's ``Set-Cookie``: to the
code that dispatched it, never to a person's browser. It must be the agent's alone too,
not a person's session of the user for its full lifetime, which no grant's revocation ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

from rastrillo.app import App
from rastrillo.loader import load_options
from rastrillo.sessions import cookie_name, create_session
from rastrillo.testing import live_server
from rastrillo.tools import Call, ConfirmRequired, Result, dispatch_sync
from tests.redteam.test_agent_only_session import FILES, PAGES, browser, leaked
from tests.support import write_app

ROADS = {
    **PAGES,
    "session/renew.POST.py": """
        import rastrillo
        from rastrillo import sessions

        TOOL = rastrillo.Tool(
            description="Start a fresh session for me, ending this one.",
            access=rastrillo.ToolWrite,
            confirm="Renew your session?",
        )


        def handle(ctx):
            sessions.sign_in(ctx, ctx.user_id)
            return ctx.text("renewed")
    """,
    "later.GET.py": """
        from rastrillo.sessions import require


        @require
        async def handle(ctx):
            return ctx.text(f"account of {ctx.user_id}, asynchronously")
    """,
}

# Options.wrap: the app's own middleware, which makes the session middleware check the row
# before it (not in the handle's thread, as without it).
WRAPPED = """
class Passing:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        await self.app(scope, receive, send)
"""


@pytest.fixture(params=["router checks", "wrapped"])
def served(request: pytest.FixtureRequest, tmp_path: Path, db_url: str) -> Iterator[App]:
    wrapped = request.param == "wrapped"
    app_dir = write_app(
        tmp_path / "app",
        ROADS,
        extra="mcp=True," + (" wrap=Passing," if wrapped else ""),
        files=FILES,
        prelude=WRAPPED if wrapped else "",
    )
    with live_server(dataclasses.replace(load_options(app_dir), db=db_url)) as app:
        yield app


def issued(app: App, result: Result) -> str:
    """The session id the response's ``Set-Cookie`` issues."""
    name = cookie_name(app.origin)
    for header in result.headers.getlist("set-cookie"):
        morsel = SimpleCookie(header).get(name)
        if morsel is not None and morsel.value:
            return morsel.value
    raise AssertionError(f"no session issued: {result.headers.getlist('set-cookie')}")


def test_a_session_signed_in_inside_an_agents_call_is_the_agents_alone(served: App) -> None:
    grant, session = leaked(served)
    renew = Call(tool="session_renew_post", actor=grant.actor, session=session)
    with pytest.raises(ConfirmRequired) as pending:
        dispatch_sync(served, renew)
    with browser(served, create_session(served.db, "3")) as person:
        assert person.post(pending.value.url, data={"decision": "approve"}).status_code == 303
    ran = dispatch_sync(served, dataclasses.replace(renew, approval=pending.value.approval_id))
    assert (ran.status, ran.text) == (200, "renewed")
    renewed = issued(served, ran)
    with browser(served, renewed) as program:
        answered = program.get("/account")
        posted = program.post("/notes", data={"body": "the agent's own"})
    assert (answered.status_code, answered.headers["location"]) == (303, "/signin?next=%2Faccount")
    assert (posted.status_code, posted.text) == (403, "Sign in first.")
    # It is still a session of the grant's user for a dispatched call, as the one it ended.
    read = dispatch_sync(served, Call(tool="notes_get", actor=grant.actor, session=renewed))
    assert read.json()["user"] == "3"


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("path", ["/account", "/later"])
def test_a_grants_session_is_none_whatever_the_method_handle_or_middleware(
    served: App, method: str, path: str
) -> None:
    """HEAD as GET, an async ``handle`` (its row checked in a hop of its own) as a sync one
    (checked in its thread), with ``Options.wrap`` (checked before the app's middleware) as
    without: a stranger's answer, a sign-in redirect."""
    _, session = leaked(served)
    with browser(served, session) as program:
        answered = program.request(method, path)
    assert (answered.status_code, answered.headers.get("location")) == (
        303,
        f"/signin?next=%2F{path[1:]}",
    )
    with browser(served, create_session(served.db, "3")) as person:
        assert person.request(method, path).status_code == 200
