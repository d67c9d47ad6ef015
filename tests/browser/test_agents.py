"""The agents page and an MCP client in headless Chromium, on the tickets demo.

A person makes a token for an agent on /_rastrillo/agents; the agent (a raw MCP
client over HTTP) reads, proposes a cancellation and is told to wait; the person
approves on the approval page; the agent's identical call runs; the person
revokes the agent and its next call is refused.
"""

from __future__ import annotations

import httpx
import pytest

from rastrillo.app import App
from tests.agents.mcp_app import tools_call
from tests.browser.chromium import ARTIFACTS, PHONE
from tests.browser.test_tickets import ALICE, CANCEL, Person, sign_in
from tests.support import TLS

pytestmark = pytest.mark.browser

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def call(app: App, token: str, tool: str, args: dict) -> httpx.Response:
    body = tools_call(tool, args)
    return httpx.post(
        app.origin + "/mcp",
        json=body,
        timeout=30,
        headers={**HEADERS, "Authorization": f"Bearer {token}"},
        verify=TLS,
    )


def test_a_person_gives_an_agent_a_token_approves_its_write_and_revokes_it(
    person: Person, app: App
) -> None:
    from playwright.sync_api import expect

    page = person(viewport=PHONE)
    sign_in(page, ALICE, then="/_rastrillo/agents")
    expect(page.get_by_role("heading", level=1)).to_have_text("Your agents")
    expect(page.get_by_text("No agent acts for you")).to_be_visible()
    page.get_by_label("Agent name").fill("claude")
    page.get_by_role("button", name="New token").click()
    token = page.get_by_label("Personal access token").input_value()
    assert token.startswith("rst_pt_")
    page.screenshot(path=ARTIFACTS / "agents-new-token-phone.png", full_page=True)

    read = call(app, token, "orders_id_get", {"id": "1"}).json()["result"]
    assert read["isError"] is False and read["structuredContent"]["order"]["status"] == "paid"
    waiting = call(app, token, "orders_id_cancel_post", {"id": "1"}).json()["result"]
    assert waiting["isError"] is True and CANCEL in waiting["content"][0]["text"]
    url = waiting["_meta"]["rastrillo/approval"]["url"]

    page.goto(url)
    expect(page.locator(".sentence")).to_have_text(CANCEL)
    page.get_by_role("button", name="Approve").click()
    expect(page.locator(".state")).to_contain_text("You approved this")
    ran = call(app, token, "orders_id_cancel_post", {"id": "1"}).json()["result"]
    assert ran["isError"] is False, ran
    read = call(app, token, "orders_id_get", {"id": "1"}).json()["result"]
    assert read["structuredContent"]["order"]["status"] == "cancelled"

    page.goto("/_rastrillo/agents")
    expect(page.get_by_role("row", name="claude")).to_contain_text("personal token")
    expect(page.get_by_label("Personal access token")).to_have_count(0)  # shown once
    page.get_by_role("button", name="Revoke claude (personal token)").click()
    expect(page.get_by_text("No agent acts for you")).to_be_visible()
    assert call(app, token, "orders_id_get", {"id": "1"}).status_code == 401
