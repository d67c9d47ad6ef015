"""The tickets demo end to end in headless Chromium: a person, an agent, and the approval between.

Only what a person does in the browser: plain links and forms, no scripts
injected, no requests made around the pages.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import update

from rastrillo.app import App
from rastrillo.tools.consent import approvals_table
from tests.browser.chromium import ARTIFACTS, PHONE

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

ALICE = "alice@example.com"  # user 1: orders 1 and 2
BOB = "bob@example.com"  # user 2: order 3
CANCEL = "Cancel order 1? Its tickets go back on sale."

Person = Callable[..., "Page"]


def sign_in(page: Page, email: str, then: str = "/") -> None:
    """Sign in on the demo's sign-in page with the demo password it lists, as a newcomer would."""
    from playwright.sync_api import expect

    page.goto(f"/signin?next={then}")
    page.get_by_label("Email").fill(email)
    demo = page.get_by_role("region", name="Demo accounts")
    expect(demo).to_contain_text(email)
    page.get_by_label("Password").fill(demo.locator("p code").inner_text())
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(re.escape(then) + "$"))


def call_tool(page: Page, tool: str, **args: str) -> None:
    """Fill one tool's form on the console and call it as the default agent."""
    form = page.locator("form", has=page.get_by_role("button", name=f"Call {tool}"))
    for name, value in args.items():
        form.get_by_label(name).fill(value)
    form.get_by_role("button", name=f"Call {tool}").click()


def propose_cancel(page: Page) -> str:
    """As the console's agent, ask to cancel order 1; return the approval page's path."""
    from playwright.sync_api import expect

    page.goto("/_rastrillo/console")
    call_tool(page, "orders_id_cancel_post", id="1")
    result = page.locator("#result")
    expect(result.locator(".sentence")).to_have_text(CANCEL)
    href = result.get_by_role("link", name="Review it on the approval page").get_attribute("href")
    assert href is not None and href.startswith("/_rastrillo/approvals/")
    return href


def expect_fits(page: Page) -> None:
    """Nothing on the page is wider than the window: no sideways scrolling on a phone."""
    window = page.viewport_size
    assert window is not None
    assert page.evaluate("document.documentElement.scrollWidth") <= window["width"]


def expect_order(page: Page, status: str) -> None:
    from playwright.sync_api import expect

    page.goto("/orders/1")
    expect(page.locator(".status")).to_have_text(status)


def test_a_person_cancels_an_order(person: Person) -> None:
    from playwright.sync_api import expect

    page = person()
    sign_in(page, ALICE)
    page.get_by_role("link", name="My orders").click()
    page.get_by_role("link", name="#1", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Order #1")
    expect(page.locator(".status")).to_have_text("paid")
    page.get_by_role("link", name="Cancel order").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Cancel order #1?")
    page.get_by_role("button", name="Yes, cancel it").click()
    expect(page).to_have_url(re.compile(r"/orders/1$"))
    expect(page.locator(".status")).to_have_text("cancelled")
    expect(page.locator(".cancelled-by")).to_have_text("user 1")


def test_an_agent_reads_then_cancels_once_the_person_approves(person: Person) -> None:
    from playwright.sync_api import expect

    page = person(viewport=PHONE)
    sign_in(page, ALICE)
    page.get_by_role("link", name="Tool console").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Tool console")

    page.get_by_role("link", name="openai", exact=True).click()
    expect(page.get_by_role("link", name="openai", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    page.get_by_text("Schema (openai)").first.click()
    expect(page.locator("details[open] pre")).to_contain_text('"strict": true')
    expect_fits(page)

    call_tool(page, "orders_id_get", id="1")
    result = page.locator("#result")
    expect(result.locator(".status")).to_have_text("200")
    expect(result.locator(".body")).to_contain_text('"status": "paid"')

    approval = propose_cancel(page)
    page.get_by_role("link", name="Review it on the approval page").first.click()
    expect(page).to_have_url(re.compile(re.escape(approval) + "$"))
    expect(page.locator(".sentence")).to_have_text(CANCEL)
    expect(page.get_by_role("row", name='id text "1"')).to_be_visible()
    expect_fits(page)
    page.screenshot(path=ARTIFACTS / "approval-page-phone.png", full_page=True)
    page.get_by_role("button", name="Approve").click()
    expect(page.locator(".state")).to_contain_text("You approved this")
    expect_order(page, "paid")  # approved, not yet run

    page.get_by_role("link", name="Tool console").click()
    page.get_by_role("button", name="Run the approved call").click()
    expect(result.locator(".status")).to_have_text("200")
    expect(result.locator(".body")).to_contain_text('"status": "cancelled"')
    expect_order(page, "cancelled")
    expect(page.locator(".cancelled-by")).to_contain_text(
        "agent:console for user 1, approved by user 1"
    )

    page.get_by_role("link", name="Tool console").click()
    latest = page.locator(".audit li").first
    expect(latest).to_contain_text('orders_id_cancel_post(id="1")')
    expect(latest.locator(".who")).to_have_text(
        re.compile(r"^agent:console for user 1, approved by user 1 at [\d-]+ [\d:]+ UTC$")
    )
    expect(latest).to_contain_text("→ 200")
    expect_fits(page)


def test_a_declined_approval_leaves_the_order_alone(person: Person) -> None:
    from playwright.sync_api import expect

    page = person()
    sign_in(page, ALICE)
    page.goto(propose_cancel(page))
    page.get_by_role("button", name="Decline").click()
    expect(page.locator(".state")).to_contain_text("You declined this")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    page.goto("/_rastrillo/console")
    expect(page.locator(".audit li").first).to_contain_text("Approval declined.")
    expect(page.get_by_role("button", name="Run the approved call")).to_have_count(0)
    expect_order(page, "paid")


def test_another_user_gets_404_on_the_approval_page(person: Person, app: App) -> None:
    from playwright.sync_api import expect

    alice = person()
    sign_in(alice, ALICE)
    approval = propose_cancel(alice)
    bob = person()
    sign_in(bob, BOB)
    response = bob.goto(approval)
    assert response is not None and response.status == 404
    expect(bob.get_by_role("button", name="Approve")).to_have_count(0)
    expect_order(alice, "paid")


def test_an_expired_approval_is_refused(person: Person, app: App) -> None:
    from playwright.sync_api import expect

    page = person()
    sign_in(page, ALICE)
    approval = propose_cancel(page)
    page.goto(approval)
    page.get_by_role("button", name="Approve").click()
    page.get_by_role("link", name="Tool console").click()
    run = page.get_by_role("button", name="Run the approved call")
    expect(run).to_be_visible()
    with app.db.write() as conn:  # the clock passes the expiry while the console is open
        past = datetime.now(UTC) - timedelta(minutes=1)
        conn.execute(update(approvals_table).values(expires_at=past))
    run.click()
    expect(page.locator("#result .refused")).to_have_text(
        "Refused: approval invalid (expired): the approval expired before it was used"
    )
    expect(page.locator(".audit")).to_contain_text("Approval expired.")
    expect_order(page, "paid")
    page.goto(approval)
    expect(page.locator(".state")).to_contain_text("This request expired before it was run")


def test_typed_args_from_the_console_to_the_approval_page(person: Person) -> None:
    from playwright.sync_api import expect

    page = person(viewport=PHONE)
    sign_in(page, ALICE)
    page.goto("/_rastrillo/console")
    buy = page.locator("form", has=page.get_by_role("button", name="Call events_id_buy_post"))
    expect(buy.get_by_label("quantity")).to_have_attribute("type", "number")
    expect(buy.get_by_label("quantity")).to_have_attribute("step", "1")
    orders = page.locator("form", has=page.get_by_role("button", name="Call orders_get"))
    status = orders.get_by_label("status")
    expect(status.locator("option")).to_have_text(["(leave out)", "held", "paid", "cancelled"])

    status.select_option("cancelled")
    orders.get_by_role("button", name="Call orders_get").click()
    result = page.locator("#result")
    expect(result.locator(".status")).to_have_text("200")
    expect(result.locator(".body")).to_contain_text('"orders": []')
    expect(page.locator(".audit li").first).to_contain_text('orders_get(status="cancelled")')

    orders = page.locator("form", has=page.get_by_role("button", name="Call orders_get"))
    expect(orders.get_by_label("status")).to_have_value("cancelled")  # the form keeps the call
    orders.get_by_label("status").select_option("")  # left out: every order
    orders.get_by_role("button", name="Call orders_get").click()
    expect(result.locator(".body")).to_contain_text('"status": "paid"')
    expect(page.locator(".audit li").first).to_contain_text("orders_get()")

    call_tool(page, "events_id_buy_post", id="1", quantity="2")
    expect(result.locator(".sentence")).to_have_text("Buy 2 ticket(s) for event 1?")
    expect(page.locator(".audit li").first).to_contain_text(
        'events_id_buy_post(id="1", quantity=2)'
    )
    result.get_by_role("link", name="Review it on the approval page").click()
    expect(page.get_by_role("row", name="quantity whole number 2")).to_be_visible()
    expect(page.get_by_role("row", name='id text "1"')).to_be_visible()
    expect_fits(page)
    page.screenshot(path=ARTIFACTS / "approval-page-typed-args.png", full_page=True)
    page.get_by_role("button", name="Approve").click()
    page.get_by_role("link", name="Tool console").click()
    page.get_by_role("button", name="Run the approved call").click()
    expect(result.locator(".status")).to_have_text("201")
    expect(result.locator(".body")).to_contain_text('"quantity": 2')


def test_a_person_buys_with_the_same_checks(person: Person) -> None:
    from playwright.sync_api import expect

    page = person()
    sign_in(page, ALICE, then="/events/2")
    quantity = page.get_by_label("Tickets (1 to 10)")
    expect(quantity).to_have_attribute("type", "number")
    quantity.fill("3")
    page.get_by_role("button", name="Buy").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"^Order #\d+$"))
    expect(page.locator("main")).to_contain_text("3")
    page.goto("/orders?status=held")
    expect(page.get_by_role("link", name="held", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("tbody")).to_contain_text("Chess Open, day one")


# A zero-width space, and the object replacement character, which Chromium draws as
# nothing though Unicode counts it neither as a space nor as ignorable.
@pytest.mark.parametrize("char", ["\u200b", "\ufffc"])
def test_the_person_sees_every_invisible_character_they_would_approve(
    person: Person, char: str
) -> None:
    """An agent proposes "2" and forty characters Chromium draws as nothing: the page must
    not read as "2"."""
    from playwright.sync_api import expect

    page = person(viewport=PHONE)
    sign_in(page, ALICE)
    page.goto("/_rastrillo/console")
    drawn = "(text) => { const s = document.createElement('span'); s.textContent = text;"
    drawn += " document.body.append(s); const w = s.getBoundingClientRect().width;"
    drawn += " s.remove(); return w; }"
    assert page.evaluate(drawn, "2" + char * 40) == page.evaluate(drawn, "2")  # as nothing
    hidden = "2" + char * 40  # the quantity is an integer now: the id is text
    call_tool(page, "events_id_buy_post", id=hidden, quantity="1")
    page.get_by_role("link", name="Review it on the approval page").first.click()
    marks = f"U+{ord(char):04X}" * 40
    expect(page.locator(".sentence")).to_have_text(f"Buy 1 ticket(s) for event 2{marks}?")
    expect(page.get_by_role("row", name=re.compile("^id"))).to_contain_text(f"2{marks}")
    assert char not in page.locator("main").inner_text()
    expect_fits(page)
    page.screenshot(path=ARTIFACTS / f"approval-page-invisible-{ord(char):04x}.png", full_page=True)
