"""A person signed in long ago gives an agent access, in headless Chromium on the tickets demo.

The agents page and the consent page ask a session older than ``Options.recent_sign_in``
to sign in again (docs/agents.md): the person follows the link, signs in on the demo's
own page and comes back to the page they were on, where the token is made, or the
client allowed. The server's clock moves when told to; nothing sleeps.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rastrillo.agents import grants
from rastrillo.app import App
from rastrillo.loader import load_options
from rastrillo.options import DEFAULT_RECENT_SIGN_IN
from rastrillo.routing import CONSENT_PATH
from rastrillo.testing import ManualClock, live_server
from tests.browser.chromium import ARTIFACTS, TICKETS
from tests.browser.hostile import loopback_site
from tests.browser.test_framing import start_authorization
from tests.browser.test_tickets import ALICE, Person, sign_in
from tests.support import LIGHT

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

LATER = DEFAULT_RECENT_SIGN_IN.total_seconds() + 1


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def app(tmp_path: Path, clock: ManualClock) -> Iterator[App]:
    """The tickets demo (MCP on) on a clock that moves when told to; passwords hashed light."""
    options = dataclasses.replace(
        load_options(TICKETS), db=str(tmp_path / "tickets.db"), mcp=True, clock=clock
    )
    with live_server(options) as served:
        password = importlib.import_module("ticketing").DEMO_PASSWORD
        served.db.execute("UPDATE users SET password_hash = :h", h=LIGHT.hash(password))
        yield served


def sign_in_again(page: Page, back: str) -> None:
    """Follow the page's link, sign in on the demo's page, and land back on ``back``."""
    from playwright.sync_api import expect

    page.get_by_role("link", name="Sign in again").click()
    expect(page).to_have_url(re.compile(r"/signin\?next="))
    page.get_by_label("Email").fill(ALICE)
    demo = page.get_by_role("region", name="Demo accounts")
    page.get_by_label("Password").fill(demo.locator("p code").inner_text())
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(re.escape(back) + "$"))


def test_a_token_needs_a_recent_sign_in_and_the_link_comes_back(
    person: Person, app: App, clock: ManualClock
) -> None:
    from playwright.sync_api import expect

    page = person()
    sign_in(page, ALICE, then="/_rastrillo/agents")
    expect(page.get_by_role("button", name="New token")).to_be_visible()
    clock.advance(LATER)
    page.reload()
    expect(page.get_by_role("button", name="New token")).to_have_count(0)
    expect(page.get_by_role("alert")).to_contain_text("needs a recent sign-in")
    page.screenshot(path=ARTIFACTS / "agents-sign-in-again.png", full_page=True)
    sign_in_again(page, "/_rastrillo/agents")
    page.get_by_label("Agent name").fill("claude")
    page.get_by_role("button", name="New token").click()
    assert page.get_by_label("Personal access token").input_value().startswith("rst_pt_")
    [grant] = grants.list_grants(app.db, "1")
    assert grant.agent == "claude"


def test_allowing_a_client_needs_a_recent_sign_in_and_the_link_comes_back(
    person: Person, app: App, clock: ManualClock
) -> None:
    from playwright.sync_api import expect

    page = person()
    sign_in(page, ALICE)
    clock.advance(LATER)
    answers: list[str] = []
    with loopback_site(b"You can close this window.", "text/plain", seen=answers) as root:
        consent = start_authorization(app, root + "callback").removeprefix(app.origin)
        assert consent.startswith(CONSENT_PATH + "?request=")
        page.goto(consent)
        expect(page.get_by_role("button", name="Allow")).to_have_count(0)
        expect(page.get_by_role("button", name="Deny")).to_be_visible()
        page.screenshot(path=ARTIFACTS / "consent-sign-in-again.png", full_page=True)
        sign_in_again(page, consent)
        page.get_by_role("button", name="Allow").click()
        expect(page.get_by_text("You can close this window.")).to_be_visible()
    assert "code=" in answers[-1]
