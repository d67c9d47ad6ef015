"""Giving an agent lasting access needs a recent sign-in (docs/agents.md, "sudo mode").

The attack: someone holds a user's session cookie (stolen, or a shared computer left
signed in) and makes a personal token on ``/_rastrillo/agents`` or presses Allow on the
consent page. The token outlives the session. So both need a session made by a sign-in
no longer ago than ``Options.recent_sign_in`` (15 minutes); an older one is told to sign
in again, and sent back afterwards. Served for real by uvicorn on a clock that moves when
told to, on SQLite and on PostgreSQL; the session cookie is all the attacker has.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import httpx

from rastrillo.agents import grants, oauth
from rastrillo.options import DEFAULT_RECENT_SIGN_IN
from rastrillo.routing import CONSENT_PATH
from rastrillo.sessions import cookie_name, create_session
from rastrillo.testing import ManualClock, TestApp
from rastrillo.tools import Call, dispatch_sync
from tests.agents import test_oauth
from tests.agents.test_oauth import Server, pkce, query_of
from tests.support import TLS, write_app

AGENTS = "/_rastrillo/agents"
WINDOW = DEFAULT_RECENT_SIGN_IN.total_seconds()
USER = "7"


clocked = test_oauth.clocked  # the tools app served with MCP on, on a clock told to move


def holding(server: Server, session: str) -> httpx.Client:
    """A browser that holds ``session`` as its cookie and posts as a same-origin form does."""
    client = httpx.Client(verify=TLS, base_url=server.origin, headers={"Origin": server.origin})
    client.cookies.set(cookie_name(server.origin), session)
    return client


def sign_in_again(back: str) -> str:
    """The link the page gives: the app's sign-in page, and back here afterwards."""
    return "/signin?" + urlencode({"next": back})


def new_token(browser: httpx.Client) -> httpx.Response:
    return browser.post(AGENTS + "/tokens", data={"agent": "helper", "days": "90"})


def test_an_old_session_cannot_make_a_token(clocked: tuple[Server, ManualClock]) -> None:
    """Signed in 15 minutes and a second ago, the session used all along (its idle expiry
    moved forward each time): the page offers no token but a sign-in, and a POST
    straight to the endpoint makes none."""
    server, clock = clocked
    with holding(server, create_session(server.app.db, USER)) as thief:
        for _ in range(3):
            clock.advance(WINDOW / 3)
            assert thief.get(AGENTS).status_code == 200  # still signed in
        clock.advance(1)
        page = thief.get(AGENTS)
        assert page.status_code == 200
        assert 'action="/_rastrillo/agents/tokens"' not in page.text
        assert f'href="{sign_in_again(AGENTS)}"' in page.text
        refused = new_token(thief)
    assert refused.status_code == 403
    assert f'href="{sign_in_again(AGENTS)}"' in refused.text
    assert "rst_pt_" not in refused.text
    assert grants.list_grants(server.app.db, include_revoked=True) == []


def test_a_page_loaded_in_time_cannot_make_a_token_after(
    clocked: tuple[Server, ManualClock],
) -> None:
    server, clock = clocked
    with holding(server, create_session(server.app.db, USER)) as browser:
        assert 'action="/_rastrillo/agents/tokens"' in browser.get(AGENTS).text
        clock.advance(WINDOW + 1)
        assert new_token(browser).status_code == 403
    assert grants.list_grants(server.app.db, include_revoked=True) == []


def test_a_fresh_sign_in_makes_a_token_and_an_old_session_still_revokes(
    clocked: tuple[Server, ManualClock],
) -> None:
    """Right at the window's end a session still may; revoking needs no recent sign-in
    (ending access must never wait on one)."""
    server, clock = clocked
    with holding(server, create_session(server.app.db, USER)) as browser:
        clock.advance(WINDOW)
        made = new_token(browser)
        assert made.status_code == 200, made.text
        [token] = re.findall(r'value="(rst_pt_[A-Za-z0-9_-]{43})"', made.text)
        [grant] = grants.list_grants(server.app.db, USER)
        clock.advance(1)
        revoked = browser.post(f"{AGENTS}/{grant.id}/revoke", follow_redirects=False)
    assert revoked.status_code == 303
    assert grants.authenticate(server.app.db, token) is None


def consent_request(server: Server) -> str:
    """A client registered and sent the person to the consent page: its request id."""
    consent = server.consent_url(server.register(), pkce()[1])
    return query_of(consent)["request"]


def allow(browser: httpx.Client, request_id: str) -> httpx.Response:
    return browser.post(
        CONSENT_PATH, data={"request": request_id, "decision": "allow", "agent": "helper"}
    )


def test_an_old_session_cannot_allow_an_oauth_client(clocked: tuple[Server, ManualClock]) -> None:
    """The consent page names the client and offers a sign-in instead of Allow; a POST of
    Allow straight to the endpoint makes no code; the request waits for the person, who may
    still deny it."""
    server, clock = clocked
    session = create_session(server.app.db, USER)
    clock.advance(WINDOW + 1)
    request_id = consent_request(server)
    back = CONSENT_PATH + "?" + urlencode({"request": request_id})
    with holding(server, session) as thief:
        page = thief.get(back)
        assert page.status_code == 200
        assert 'value="allow"' not in page.text and 'value="deny"' in page.text
        assert f'href="{sign_in_again(back)}"' in page.text
        refused = allow(thief, request_id)
    assert refused.status_code == 403
    assert "location" not in refused.headers
    typed = back + "&" + urlencode({"agent": "helper"})  # the page keeps the name typed
    assert f'href="{sign_in_again(typed)}"' in refused.text
    assert oauth.pending(server.app.db, request_id) is not None
    with holding(server, session) as person:
        denied = person.post(CONSENT_PATH, data={"request": request_id, "decision": "deny"})
    assert denied.status_code == 303 and "error=access_denied" in denied.headers["location"]


def test_a_consent_page_loaded_in_time_cannot_be_allowed_after(
    clocked: tuple[Server, ManualClock],
) -> None:
    """Signed in 14 minutes ago, the page is shown with Allow; pressed two minutes later
    (the request has eight more to live), the session is too old: no code. Signed in
    again, the same request is allowed."""
    server, clock = clocked
    session = create_session(server.app.db, USER)
    clock.advance(WINDOW - 60)
    request_id = consent_request(server)
    with holding(server, session) as browser:
        shown = browser.get(CONSENT_PATH, params={"request": request_id})
        assert 'value="allow"' in shown.text
        clock.advance(120)
        refused = allow(browser, request_id)
        assert refused.status_code == 403
    assert oauth.pending(server.app.db, request_id) is not None
    [link] = re.findall(r'href="/signin\?next=([^"]+)"', refused.text)
    with holding(server, create_session(server.app.db, USER)) as signed_in_again:
        back = signed_in_again.get(query_of("/?next=" + link)["next"])
        assert 'value="allow"' in back.text
        assert 'name="agent" value="helper"' in back.text  # the name typed before
        forged = signed_in_again.get(
            CONSENT_PATH, params={"request": request_id, "agent": '"><b>x'}
        )  # a link anyone can make: the name only fills the field, escaped
        assert '"><b>x' not in forged.text and 'value="&#34;&gt;&lt;b&gt;x"' in forged.text
        done = allow(signed_in_again, request_id)
    assert done.status_code == 303, done.text
    assert "code" in query_of(done.headers["location"])


FRESH = {
    # A read tool that says whether its request counts as a recent sign-in.
    "fresh.GET.py": """
        import rastrillo
        from rastrillo import sessions

        TOOL = rastrillo.Tool(description="Whether this is a recent sign-in.")


        @sessions.require
        def handle(ctx):
            return ctx.json({"recent": sessions.signed_in_recently(ctx)})
    """,
}


def test_an_agents_session_is_never_a_recent_sign_in(tmp_path: Path) -> None:
    """The session made for an agent's calls (a grant's, ``TestApp.agent``'s) is made by no
    sign-in, however new: a dispatched call never counts as one, whichever its session."""
    app_dir = write_app(tmp_path / "app", FRESH)
    with TestApp(app_dir, tmp_path) as t:
        browser = t.browser()
        person = t.sign_in(browser, USER)
        assert browser.get("/fresh").json() == {"recent": True}
        agent = t.agent("helper", USER)
        assert agent.call("fresh_get").json() == {"recent": False}
        in_persons_session = Call(tool="fresh_get", actor=agent.actor, session=person)
        assert dispatch_sync(t.app, in_persons_session).json() == {"recent": False}
