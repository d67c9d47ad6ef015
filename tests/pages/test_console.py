"""The tool console without a browser: when it is served, who may use it, what it answers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rastrillo.pages.console import CONSOLE_PATH
from rastrillo.testing import TestApp
from rastrillo.tools import audit

TICKETS = Path(__file__).resolve().parents[2] / "examples" / "tickets"


@pytest.fixture
def tickets(tmp_path: Path) -> TestApp:
    return TestApp(TICKETS, tmp_path, console=True)


@pytest.mark.parametrize(
    ("console", "dev", "served"),
    [(False, None, False), (False, "0", False), (False, "1", True), (True, None, True)],
)
def test_on_when_asked_for_or_under_rastrillo_dev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, console: bool, dev: str | None, served: bool
) -> None:
    if dev is None:
        monkeypatch.delenv("RASTRILLO_DEV", raising=False)
    else:
        monkeypatch.setenv("RASTRILLO_DEV", dev)
    app = TestApp(TICKETS, tmp_path, console=console)
    app.sign_in(app.client, 1)
    assert app.client.get(CONSOLE_PATH).status_code == (200 if served else 404)


def test_signed_in_users_only(tickets: TestApp) -> None:
    page = tickets.client.get(CONSOLE_PATH, follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"] == "/signin?next=%2F_rastrillo%2Fconsole"
    call = tickets.client.post(CONSOLE_PATH, data={"tool": "orders_get", "agent": "console"})
    assert call.status_code == 403


def test_the_call_is_csrf_checked(tickets: TestApp) -> None:
    foreign = tickets.browser()
    foreign.headers["Origin"] = "https://evil.example"
    tickets.sign_in(foreign, 1)
    response = foreign.post(CONSOLE_PATH, data={"tool": "orders_get", "agent": "console"})
    assert response.status_code == 403
    assert tickets.db.query("SELECT * FROM rastrillo_audit") == []


def test_schemas_in_the_chosen_format(tickets: TestApp) -> None:
    tickets.sign_in(tickets.client, 1)
    anthropic = tickets.client.get(CONSOLE_PATH).text
    assert "&#34;input_schema&#34;" in anthropic
    mcp = tickets.client.get(CONSOLE_PATH, params={"format": "mcp"}).text
    assert "&#34;readOnlyHint&#34;" in mcp
    assert '<a href="/_rastrillo/console?format=mcp" aria-current="page">mcp</a>' in mcp
    wrong = tickets.client.get(CONSOLE_PATH, params={"format": "nope"})
    assert wrong.status_code == 400
    assert "anthropic" in wrong.text


def test_a_call_is_dispatched_as_the_console_for_the_user(tickets: TestApp) -> None:
    tickets.sign_in(tickets.client, 2)
    page = tickets.client.post(
        CONSOLE_PATH, data={"tool": "orders_get", "agent": "concierge", "format": "openai"}
    ).text
    assert 'Status <strong class="status">200</strong>' in page
    assert "Chess Open" in page  # user 2's order, read through the user's own session
    assert '<p class="who">agent:console for user 2</p>' in page  # never another agent's name
    assert "concierge" not in page
    assert "&#34;strict&#34;: true" in page  # the chosen format is kept


def test_a_write_links_to_its_approval_then_runs_once_approved(tickets: TestApp) -> None:
    client = tickets.client
    tickets.sign_in(client, 1)
    call = {"tool": "orders_id_cancel_post", "agent": "console", "arg.id": "1"}
    page = client.post(CONSOLE_PATH, data=call).text
    assert "Cancel order 1? Its tickets go back on sale." in page
    found = re.search(r'href="(/_rastrillo/approvals/[\w-]+)"', page)
    assert found is not None
    assert client.post(found[1], data={"decision": "approve"}).status_code == 200
    assert "Run the approved call" in client.get(CONSOLE_PATH).text
    approval = found[1].rsplit("/", 1)[1]
    done = client.post(CONSOLE_PATH, data={**call, "approval": approval}).text
    assert "&#34;status&#34;: &#34;cancelled&#34;" in done
    assert re.search(r"agent:console for user 1, approved by user 1 at [\d-]+ [\d:]+ UTC", done)
    again = client.post(CONSOLE_PATH, data={**call, "approval": approval}).text
    assert "Refused: approval invalid (used)" in again


def test_a_refusal_is_shown_with_its_reason(tickets: TestApp) -> None:
    tickets.sign_in(tickets.client, 1)
    page = tickets.client.post(CONSOLE_PATH, data={"tool": "orders_id_get"}).text
    assert "Refused: tool &#39;orders_id_get&#39; needs the arg &#39;id&#39;" in page


def test_an_approved_call_is_rerun_from_the_approval_itself(tickets: TestApp) -> None:
    alice = tickets.client
    tickets.sign_in(alice, 1)
    proposal = {
        "tool": "events_id_buy_post",
        "agent": "console",
        "arg.id": "2",
        "arg.quantity": "2",
    }
    page = alice.post(CONSOLE_PATH, data=proposal).text
    found = re.search(r'href="(/_rastrillo/approvals/([\w-]+))"', page)
    assert found is not None
    alice.post(found[1], data={"decision": "approve"})
    bob = tickets.browser()
    tickets.sign_in(bob, 2)
    assert bob.post(CONSOLE_PATH, data={"approval": found[2]}).status_code == 404
    done = alice.post(CONSOLE_PATH, data={"approval": found[2], "format": "mcp"}).text
    # Run, not refused: the args redeemed are the approved ones, typed (quantity 2).
    assert "Refused" not in done
    assert 'Status <strong class="status">201</strong>' in done
    assert "agent:console for user 1, approved by user 1" in done


def test_the_console_never_runs_another_agents_approval(tickets: TestApp) -> None:
    alice = tickets.client
    tickets.sign_in(alice, 1)
    agent = tickets.agent("concierge", user_id=1)
    sentence = "Cancel order 1? Its tickets go back on sale."
    pending = agent.needs_confirmation("orders_id_cancel_post", {"id": "1"}, sentence=sentence)
    agent.approve(pending)
    page = alice.get(CONSOLE_PATH).text
    assert "agent:concierge for user 1" in page
    assert "Run the approved call" not in page  # only the console's own proposals
    done = alice.post(CONSOLE_PATH, data={"approval": pending.approval_id}).text
    assert "Refused: approval invalid (actor)" in done
    ran = [r for r in audit.latest(tickets.db, limit=50) if r.status is not None]
    assert ran == []  # nothing ran, under any name
    assert agent.call("orders_id_cancel_post", {"id": "1"}, approval=pending).status == 200
