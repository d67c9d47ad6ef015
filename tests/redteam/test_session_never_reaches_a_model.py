"""A tool call's request never carries the session as a cookie, so no handler can hand it
to the model (docs/agents.md, "What the gate guarantees").

The session a call acts in is a full session of its user: presented from a program with
the app's ``Origin``, it passes the CSRF check and decides approvals like the user's own
browser. A read as innocent as "show the request's headers" (a debugging aid) returned it
to the model, which then approved its own write on the approval page, recorded as
"approved by user 3". Dispatch hands the session to the app in its in-process marker
alone; the request a handler reads has no cookie.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from rastrillo.agents import grants
from rastrillo.sessions import cookie_name
from rastrillo.testing import TestApp
from tests.agents.mcp_app import ACTIONS, FILES, tools_call
from tests.support import write_app

HEADERS_TOOL = """
import rastrillo

TOOL = rastrillo.Tool(description="Show this request's headers and cookies (a debugging aid).")


def handle(ctx):
    return ctx.json({"headers": dict(ctx.request.headers), "cookies": dict(ctx.request.cookies),
                     "user": ctx.user_id})
"""


@pytest.fixture
def app(tmp_path: Path) -> Iterator[TestApp]:
    actions = {**ACTIONS, "debug/headers.GET.py": HEADERS_TOOL}
    app_dir = write_app(tmp_path / "app", actions, extra="mcp=True, console=True,", files=FILES)
    with TestApp(app_dir, tmp_path) as t:
        yield t


def test_no_tool_can_return_the_session_a_write_could_be_approved_with(app: TestApp) -> None:
    _, token, _ = grants.personal_token(app.db, user_id="3", agent="claude")
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }

    def call(name: str, arguments: dict[str, str]) -> dict[str, object]:
        body = tools_call(name, arguments)
        result: dict[str, object] = app.client.post("/mcp", json=body, headers=headers).json()[
            "result"
        ]
        return result

    seen = call("debug_headers_get", {})["structuredContent"]
    assert isinstance(seen, dict)
    assert seen["user"] == "3"  # the read ran as the user
    leaked = "; ".join(f"{name}={value}" for name, value in seen["cookies"].items())
    # What a model holding a leaked session would do: approve its own write from a program.
    pending = call("notes_post", {"body": "the model's own"})
    meta = pending["_meta"]
    assert isinstance(meta, dict)
    url = meta["rastrillo/approval"]["url"]
    model = TestClient(app.app, base_url=app.app.origin)
    model.post(
        url,
        data={"decision": "approve"},
        headers={"Cookie": leaked, "Origin": app.app.origin},
        follow_redirects=False,
    )
    again = call("notes_post", {"body": "the model's own"})
    assert again["isError"] is True, again
    assert not app.db.query("SELECT * FROM notes WHERE body = 'the model''s own'")
    assert seen["cookies"] == {} and "cookie" not in seen["headers"]


def test_a_grants_session_decides_nothing_outside_a_tool_call(app: TestApp) -> None:
    """Should a grant's session leak by another road than a cookie (a handler returning its
    request's scope, say), it is still no browser's: the approval page and the agents page
    answer a request presenting it exactly as they answer one with no session, so it
    neither approves a write nor mints a token that would outlive the grant's revocation;
    nor does the tool console, which would show the user's calls and run tools as the
    console. (The app's own pages too: test_agent_only_session.py.)"""
    grant, token, _ = grants.personal_token(app.db, user_id="3", agent="claude")
    session = grants.grant_session(app.db, grant)
    assert session is not None
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    body = tools_call("notes_post", {"body": "leaked"})
    pending = app.client.post("/mcp", json=body, headers=headers).json()["result"]
    url = pending["_meta"]["rastrillo/approval"]["url"]
    model = TestClient(app.app, base_url=app.app.origin, follow_redirects=False)
    stolen = {"Cookie": f"{cookie_name(app.app.origin)}={session}", "Origin": app.app.origin}
    stranger = {"Origin": app.app.origin}

    def answers(method: str, path: str, **form: str) -> int:
        """The status a request presenting the stolen session gets: a stranger's."""
        data = form or None
        got = model.request(method, path, data=data, headers=stolen)
        expected = model.request(method, path, data=data, headers=stranger)
        assert (got.status_code, got.headers.get("location")) == (
            expected.status_code,
            expected.headers.get("location"),
        )
        assert "rst_pt_" not in got.text
        return got.status_code

    assert answers("GET", url) == 303  # to sign in
    assert answers("POST", url, decision="approve") == 403
    assert answers("POST", "/_rastrillo/agents/tokens", agent="mine") == 403
    assert [g.agent for g in grants.list_grants(app.db, "3")] == ["claude"]
    assert answers("GET", "/_rastrillo/console") == 303
    assert answers("POST", "/_rastrillo/console", tool="notes_post", **{"arg.body": "x"}) == 403
    again = app.client.post("/mcp", json=body, headers=headers).json()["result"]
    assert again["isError"] is True
    assert not app.db.query("SELECT * FROM notes WHERE body = 'leaked'")
