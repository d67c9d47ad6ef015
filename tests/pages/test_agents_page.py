"""/_rastrillo/agents: a user's grants, Revoke, and a personal token shown once."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from rastrillo.agents import grants
from rastrillo.sessions import end_sessions, revoke_user
from rastrillo.testing import TestApp
from rastrillo.tools import consent
from tests.agents.mcp_app import make_app, tools_call

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


@pytest.fixture
def t(tmp_path):
    with TestApp(make_app(tmp_path / "app"), tmp_path) as test_app:
        yield test_app


def signed_in(t: TestApp, user: str) -> TestClient:
    browser = t.browser()
    t.sign_in(browser, user)
    return browser


def new_token(browser: TestClient, agent: str = "assistant", days: str = "30") -> str:
    page = browser.post("/_rastrillo/agents/tokens", data={"agent": agent, "days": days})
    assert page.status_code == 200, page.text
    [token] = re.findall(r'value="(rst_pt_[A-Za-z0-9_-]{43})"', page.text)
    return token


def mcp(t: TestApp, token: str) -> int:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    return t.client.post("/mcp", json=LIST, headers=headers).status_code


def test_a_new_token_is_shown_once_and_works_at_mcp(t):
    alice = signed_in(t, "3")
    token = new_token(alice, "assistant", "7")
    assert mcp(t, token) == 200
    page = alice.get("/_rastrillo/agents")
    assert token not in page.text and token[7:20] not in page.text
    assert "<code>assistant</code>" in page.text and "personal token" in page.text
    assert page.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    [grant] = grants.list_grants(t.db, "3")
    assert grant.agent == "assistant"


def test_revoke_refuses_the_next_call_and_only_the_owner_can(t):
    alice, mallory = signed_in(t, "3"), signed_in(t, "4")
    token = new_token(alice)
    [grant] = grants.list_grants(t.db, "3")
    revoke = f"/_rastrillo/agents/{grant.id}/revoke"
    assert mallory.post(revoke, follow_redirects=False).status_code == 303
    assert "No agent acts for you" in mallory.get("/_rastrillo/agents").text  # not hers
    assert mcp(t, token) == 200
    done = alice.post(revoke, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/_rastrillo/agents"
    assert mcp(t, token) == 401
    assert "No agent acts for you" in alice.get("/_rastrillo/agents").text


@pytest.mark.parametrize("grant_id", ["%00", "%ED%A0%80", "a" * 5000])
def test_revoking_what_is_no_grant_id_is_revoking_no_grant(tmp_path, db_url, caplog, grant_id):
    """The router decodes the path: a NUL (PostgreSQL refuses it in text) or a byte that
    is no UTF-8 reaches the page as the id. The answer is the one for another's grant."""
    with TestApp(make_app(tmp_path / "app"), tmp_path, db=db_url) as t:
        alice = signed_in(t, "3")
        token = new_token(alice)
        answer = alice.post(f"/_rastrillo/agents/{grant_id}/revoke", follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/_rastrillo/agents"
        assert mcp(t, token) == 200
    assert "Traceback" not in caplog.text and "Error" not in caplog.text


def test_the_page_is_for_a_signed_in_user_and_its_posts_are_csrf_checked(t):
    anonymous = t.browser()
    assert anonymous.get("/_rastrillo/agents", follow_redirects=False).status_code == 303
    assert anonymous.post("/_rastrillo/agents/tokens", data={"agent": "a"}).status_code == 403
    forged = TestClient(t.app, base_url=t.app.origin, headers={"Origin": "http://evil.example"})
    t.sign_in(forged, "3")
    assert forged.post("/_rastrillo/agents/tokens", data={"agent": "a"}).status_code == 403
    assert grants.list_grants(t.db) == []


@pytest.mark.parametrize("agent", ["", "<script>alert(1)</script>", "a b", "x" * 65])
def test_a_bad_agent_name_is_a_clear_400_escaped(t, agent):
    page = signed_in(t, "3").post("/_rastrillo/agents/tokens", data={"agent": agent})
    assert page.status_code == 400
    assert "agent name" in page.text and "<script>alert" not in page.text
    assert grants.list_grants(t.db) == []


def test_without_the_lifespan_mcp_says_so(tmp_path):
    t = TestApp(make_app(tmp_path / "app"), tmp_path)
    answer = t.client.post("/mcp", json=LIST, headers=MCP_HEADERS)
    assert answer.status_code == 503 and "lifespan" in answer.text


def test_revoking_the_user_ends_their_tokens_and_ending_their_sessions_alone_does_not(t):
    """``revoke_user`` (a password change, a locked account) ends the user's agents too: a
    token made from a stolen session must not outlive it. ``end_sessions`` keeps them: the
    grant's session is made anew at its next call."""
    token = new_token(signed_in(t, "3"))
    call = tools_call("notes_get", {}, request_id=2)
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    first = t.client.post("/mcp", json=call, headers=headers).json()["result"]
    assert first["structuredContent"]["user"] == "3"
    end_sessions(t.db, "3")
    again = t.client.post("/mcp", json=call, headers=headers).json()["result"]
    assert again["isError"] is False and again["structuredContent"]["user"] == "3"
    write = tools_call("notes_post", {"body": "hi"}, request_id=3)
    proposed = t.client.post("/mcp", json=write, headers=headers).json()["result"]
    assert proposed["isError"] is True and "approve" in proposed["content"][0]["text"]
    approval = proposed["_meta"]["rastrillo/approval"]["id"]
    assert consent.get(t.db, approval).state(t.db.clock.now()) == "pending"
    revoke_user(t.db, "3")
    assert t.client.post("/mcp", json=call, headers=headers).status_code == 401
    assert consent.get(t.db, approval).state(t.db.clock.now()) == "expired"
    assert "No agent acts for you" in signed_in(t, "3").get("/_rastrillo/agents").text


def test_a_hostile_client_name_is_listed_with_every_character_shown(t):
    """Anyone can register an OAuth client under any name, and the person reads this
    list to choose what to revoke: a name padded with a zero-width space or a word
    joiner, or split by a line separator, must not pass for another client's. Control
    and bidirectional characters are replaced when the grant is stored; the others are
    shown as the consent page shows them, each as its labelled mark, and named escaped
    in the Revoke button's label."""
    hostile = "Claude\u2028Desktop\u200b\u2060\u3164"
    grants.create_grant(t.db, user_id="3", agent="assistant", client=hostile)
    page = signed_in(t, "3").get("/_rastrillo/agents").text
    assert not any(c in page for c in "\u2028\u200b\u2060\u3164")
    for label in ("U+2028", "U+200B", "U+2060", "U+3164"):
        assert f'title="an invisible character, {label}">{label}</span>' in page
    revoke = 'aria-label="Revoke assistant (Claude\\u2028Desktop\\u200b\\u2060\\u3164)"'
    assert revoke in page


def test_a_client_name_that_passes_for_another_is_listed_marked(t):
    """``Claude`` spelled with a Cyrillic a (U+0430) is drawn as ``Claude``: listed beside
    the real one, the person could revoke the wrong client. The look-alike is shown with
    its code point, and escaped in the Revoke button's label."""
    grants.create_grant(t.db, user_id="3", agent="assistant", client="Cl\u0430ude")
    page = signed_in(t, "3").get("/_rastrillo/agents").text
    mark = '<span class="lookalike" title="not an ASCII character: U+0430">'
    assert mark + '\u0430<span class="cp">U+0430</span></span>' in page
    assert 'aria-label="Revoke assistant (Cl\\u0430ude)"' in page
