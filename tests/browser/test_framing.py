"""Clickjacking: a page on another port of the same host frames the approval page under its
own button. The browser sends the user's cookie (same site), and must still show nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING

import httpx
import pytest

from rastrillo.app import App
from rastrillo.routing import OAUTH_AUTHORIZE_PATH, OAUTH_REGISTER_PATH
from rastrillo.tools import consent
from tests.browser.hostile import hostile_site
from tests.browser.test_tickets import ALICE, Person, propose_cancel, sign_in
from tests.support import TLS

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

Framer = Callable[["Page", str], None]


@pytest.fixture
def hostile_page(app: App) -> Iterator[Framer]:
    """Open, from another loopback port, a page that frames a path of the app."""
    with ExitStack() as sites:

        def open_framing(page: Page, path: str) -> None:
            html = (
                "<!doctype html><title>Win a prize</title>"
                "<button>Claim your prize</button>"
                f'<iframe id="victim" src="{app.origin}{path}" '
                'width="600" height="600"></iframe>'
            )
            page.goto(sites.enter_context(hostile_site(html)))

        yield open_framing


def test_another_port_cannot_frame_the_approval_page(person: Person, hostile_page: Framer) -> None:
    page = person()
    sign_in(page, ALICE)
    approval = propose_cancel(page)
    with page.expect_response(lambda r: approval in r.url) as answered:
        hostile_page(page, approval)
    response = answered.value
    assert response.status == 200  # the signed-in user's page was fetched, cookie and all
    page.wait_for_load_state("load")  # the frames' too
    assert page.frame_locator("#victim").get_by_role("button").count() == 0
    assert page.get_by_role("button", name="Claim your prize").is_visible()


def test_a_form_on_another_port_cannot_decide_the_approval(person: Person, app: App) -> None:
    """Cross-site request forgery of the decision itself: a page on another port of the
    same host (same site, so SameSite=Lax sends the cookie) posts Approve to the approval
    when the user clicks its button. Chromium says ``Sec-Fetch-Site: same-site``; the
    post is refused and the approval stays pending."""
    page = person()
    sign_in(page, ALICE)
    approval = propose_cancel(page)
    html = (
        "<!doctype html><title>Win a prize</title>"
        f'<form method="post" action="{app.origin}{approval}">'
        '<button name="decision" value="approve">Claim your prize</button></form>'
    )
    with hostile_site(html) as hostile:
        page.goto(hostile)
        with page.expect_response(lambda r: r.request.method == "POST") as answered:
            page.get_by_role("button", name="Claim your prize").click()
    response = answered.value
    assert response.status == 403
    assert response.request.all_headers()["sec-fetch-site"] == "same-site"
    record = consent.get(app.db, approval.rsplit("/", 1)[1])
    assert record is not None and record.state(app.db.clock.now()) == "pending"
    page.goto(approval)  # the user, on the app itself, still has the choice to make
    assert page.get_by_role("button", name="Approve").is_visible()


HELD_AT_READY = """
document.addEventListener("DOMContentLoaded", () => {
  const approve = document.querySelector('button[value="approve"]');
  if (!approve) return;
  window.heldAtReady = approve.disabled;
  approve.click();  // the second click of a double-click that a hostile window set up
});
"""


def test_a_click_before_the_page_had_the_focus_a_moment_decides_nothing(
    person: Person, app: App
) -> None:
    """Double-clickjacking: a hostile window asks for a double-click, closes on the first
    press and leaves the approval page under the second. Nothing is framed, so only the
    page itself can refuse a click that comes before the person could have read it."""
    from playwright.sync_api import expect

    page = person(scripts=True)
    sign_in(page, ALICE)
    approval = propose_cancel(page)
    page.add_init_script(HELD_AT_READY)
    page.goto(approval)
    approve = page.get_by_role("button", name="Approve")
    assert page.evaluate("window.heldAtReady") is True
    expect(approve).to_be_enabled()  # a moment later, for the person
    record = consent.get(app.db, approval.rsplit("/", 1)[1])
    assert record is not None and record.state(app.db.clock.now()) == "pending"
    # The window losing the focus holds the buttons again; getting it back, for a moment.
    page.evaluate("window.dispatchEvent(new Event('blur'))")
    expect(approve).to_be_disabled()
    assert (
        page.evaluate(
            "window.dispatchEvent(new Event('focus')), "
            "document.querySelector('button[value=approve]').disabled"
        )
        is True
    )
    expect(approve).to_be_enabled()
    approve.click()
    expect(page.locator(".state")).to_contain_text("You approved this")


def start_authorization(
    app: App, redirect: str = "http://127.0.0.1:9/cb", name: str = "Quick"
) -> str:
    """A client named ``name`` registered, its person sent to authorize: the consent page's
    address; the client's answer goes to ``redirect``."""
    with httpx.Client(verify=TLS, base_url=app.origin) as client:
        registered = client.post(
            OAUTH_REGISTER_PATH, json={"redirect_uris": [redirect], "client_name": name}
        )
        asked = client.get(
            OAUTH_AUTHORIZE_PATH,
            params={
                "response_type": "code",
                "client_id": registered.json()["client_id"],
                "redirect_uri": redirect,
                "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuKZWMnvkPc",
                "code_challenge_method": "S256",
            },
        )
    return asked.headers["location"]


def test_the_consent_page_holds_allow_too(person: Person, app: App) -> None:
    from playwright.sync_api import expect

    page = person(scripts=True)
    sign_in(page, ALICE)
    page.add_init_script(HELD_AT_READY.replace('button[value="approve"]', 'button[value="allow"]'))
    page.goto(start_authorization(app))
    assert page.evaluate("window.heldAtReady") is True
    expect(page.get_by_role("button", name="Allow")).to_be_enabled()
    expect(page.get_by_role("heading", level=1)).to_contain_text("to your account?")
