"""Clickjacking: a page on another port of the same host frames the approval page under its
own button. The browser sends the user's cookie (same site), and must still show nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from playwright.sync_api import Page

from rastrillo.app import App
from rastrillo.tools import consent
from tests.browser.hostile import hostile_site
from tests.browser.test_tickets import ALICE, Person, propose_cancel, sign_in

pytestmark = pytest.mark.browser

Framer = Callable[[Page, str], None]


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
