"""Connecting an MCP client the way people do: the official Python SDK's OAuth client against
the tickets demo on uvicorn, with a person signing in and allowing it in headless Chromium.

The client discovers the authorization server from ``/mcp``'s 401, registers,
sends the person's browser to authorize; they sign in on the demo's own page,
read the consent page and allow; the client trades the code, calls a tool,
refreshes, and after revocation is refused. Nothing is mocked: the browser's
redirect to the client's loopback callback reaches a listener on a loopback port, as a
client's local listener would catch it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from rastrillo.agents import grants, oauth
from rastrillo.app import App
from rastrillo.loader import load_options
from rastrillo.routing import (
    CONSENT_PATH,
    OAUTH_REVOKE_PATH,
)
from rastrillo.testing import live_server
from tests.browser.chromium import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, DESKTOP, PHONE, TICKETS
from tests.browser.hostile import hostile_site, loopback_site
from tests.browser.test_framing import start_authorization
from tests.doc_examples import doc_block
from tests.support import TLS

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.browser

ALICE = "alice@example.com"
DEMO_PASSWORD = "tickets-demo"
DOCS_IMAGES = os.environ.get("RASTRILLO_DOCS_IMAGES")
"""Set (to ``docs/images``) to refresh the screenshots docs/mcp.md shows."""
T = TypeVar("T")


def screenshot_path(name: str) -> Path:
    return Path(DOCS_IMAGES) / name if DOCS_IMAGES else ARTIFACTS / name


class Memory(TokenStorage):
    """The client's token store, in memory (a real client keeps it on disk)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    options = dataclasses.replace(load_options(TICKETS), db=str(tmp_path / "tickets.db"), mcp=True)
    with live_server(options) as served:
        yield served


class Chromium(NamedTuple):
    """One Playwright driver and one headless Chromium for this module's tests, on an event
    loop of their own in a thread: ``run`` runs a test's scenario there. Each test's pages
    are in browser contexts of its own (cookies, storage and cache apart), closed when it
    ends; a driver and a Chromium started for each test cost about 1.5 s of CPU."""

    portal: BlockingPortal
    browser: Browser

    def run(self, scenario: Callable[..., Awaitable[T]], *args: object) -> T:
        return self.portal.call(scenario, *args)


@pytest.fixture(scope="module")
def shared() -> Iterator[Chromium]:
    from playwright.async_api import async_playwright

    with start_blocking_portal() as portal:
        playwright = portal.call(async_playwright().start)
        try:
            launch = partial(
                playwright.chromium.launch, executable_path=CHROMIUM, args=CHROMIUM_ARGS
            )
            browser = portal.call(launch)
            try:
                yield Chromium(portal, browser)
            finally:
                portal.call(browser.close)
        finally:
            portal.call(playwright.stop)


@asynccontextmanager
async def chromium(browser: Browser, app: App) -> AsyncIterator[BrowserContext]:
    """A context of the shared Chromium at the app, scripts off: a person's browser,
    closed after."""
    context = await browser.new_context(
        base_url=app.origin, viewport=DESKTOP, java_script_enabled=False
    )
    try:
        context.set_default_timeout(10_000)
        yield context
    finally:
        await context.close()


async def sign_in_on_the_way(page: Page) -> None:
    """The demo's own sign-in page, reached because the consent page needs a session."""
    from playwright.async_api import expect

    await expect(page).to_have_url(re.compile(r"/signin\?next="))
    await page.get_by_label("Email").fill(ALICE)
    await page.get_by_label("Password").fill(DEMO_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()


@pytest.fixture
def callback() -> Iterator[tuple[str, list[str]]]:
    """The client's local listener for the authorization's redirect: its callback URL,
    and the URL of each request it answered (``You can close this window.``)."""
    answers: list[str] = []
    with loopback_site(b"You can close this window.", "text/plain", seen=answers) as root:
        yield root + "callback", answers


class Person:
    """Alice at her browser: whenever the client sends her to authorize, she signs in if
    she must, reads the consent page and presses ``button``; her browser's trip to the
    client's loopback callback reaches the client's listener (the ``callback`` fixture)."""

    def __init__(self, browser: Browser, app: App, callback: tuple[str, list[str]]) -> None:
        self.browser = browser
        self.app = app
        self.callback, self.answers = callback
        self.visits = 0
        self.page: Page | None = None

    async def open(self) -> Page:
        context = await self.browser.new_context(
            base_url=self.app.origin, viewport=DESKTOP, java_script_enabled=False
        )
        context.set_default_timeout(10_000)
        self.page = await context.new_page()
        return self.page

    async def close(self) -> None:
        """Her browser's context, if she opened one: the Chromium is the module's."""
        if self.page is not None:
            await self.page.context.close()

    async def authorize(self, url: str) -> None:
        from playwright.async_api import expect

        self.visits += 1
        page = self.page or await self.open()
        await page.goto(url)
        if "/signin" in page.url:
            await sign_in_on_the_way(page)
        await expect(page).to_have_url(re.compile(re.escape(CONSENT_PATH) + r"\?request="))
        await expect(page.get_by_role("heading", level=1)).to_have_text(
            "Connect Ticket Desk Agent to your account?"
        )
        await expect(page.get_by_text("your browser goes to 127.0.0.1")).to_be_visible()
        await expect(page.get_by_label("Agent name")).to_have_value("ticket-desk-agent")
        await expect(page.get_by_text("each write waits for your approval")).to_be_visible()
        await page.locator("body").screenshot(path=screenshot_path("mcp-consent.png"))
        await page.get_by_role("button", name="Allow").click()
        await expect(page.get_by_text("You can close this window.")).to_be_visible()

    async def callback_result(self) -> AuthorizationCodeResult:
        answer = {k: v[0] for k, v in parse_qs(urlsplit(self.answers[-1]).query).items()}
        return AuthorizationCodeResult(
            code=answer["code"], state=answer.get("state"), iss=answer.get("iss")
        )


def connect(
    app: App, person: Person, storage: Memory
) -> Callable[[], Awaitable[tuple[httpx2.AsyncClient, OAuthClientProvider]]]:
    async def make() -> tuple[httpx2.AsyncClient, OAuthClientProvider]:
        provider = OAuthClientProvider(
            server_url=app.origin + "/mcp",
            client_metadata=OAuthClientMetadata(
                client_name="Ticket Desk Agent", redirect_uris=[person.callback]
            ),
            storage=storage,
            redirect_handler=person.authorize,
            callback_handler=person.callback_result,
        )
        return httpx2.AsyncClient(verify=TLS, auth=provider, timeout=30), provider

    return make


async def order_status(http: httpx2.AsyncClient, app: App) -> str:
    """Call the read tool ``orders_id_get`` for order 1 over MCP; its status."""
    async with (
        streamable_http_client(app.origin + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("orders_id_get", {"id": "1"})
        assert not result.is_error, result
        return json.loads(result.content[0].text)["order"]["status"]


def test_the_python_sdk_connects_through_the_consent_page_then_is_refused_once_revoked(
    app: App, callback: tuple[str, list[str]], shared: Chromium
):
    storage = Memory()

    async def scenario() -> None:
        person = Person(shared.browser, app, callback)
        try:
            http, provider = await connect(app, person, storage)()
            async with http:
                # discovery, registration, authorize, consent, token, then the call
                assert await order_status(http, app) == "paid"
                assert person.visits == 1
                [grant] = grants.list_grants(app.db, "1")
                assert (grant.agent, grant.client) == ("ticket-desk-agent", "Ticket Desk Agent")
                assert storage.client is not None
                assert grant.client_id == storage.client.client_id
                assert storage.client.token_endpoint_auth_method == "none"

                # refresh: the access token has run out, the client rotates its tokens
                first = storage.tokens
                assert first is not None and first.expires_in == 3600
                provider.context.token_expiry_time = time.time() - 1
                assert await order_status(http, app) == "paid"
                second = storage.tokens
                assert second is not None
                assert second.access_token != first.access_token
                assert second.refresh_token != first.refresh_token
                assert person.visits == 1  # refreshed, not asked again

                # revocation (RFC 7009), then the old token is refused on /mcp
                async with httpx.AsyncClient(verify=TLS, base_url=app.origin) as plain:
                    done = await plain.post(
                        OAUTH_REVOKE_PATH,
                        data={"token": second.access_token, "client_id": grant.client_id},
                    )
                    assert done.status_code == 200
                    refused = await plain.post(
                        "/mcp",
                        headers={"Authorization": f"Bearer {second.access_token}"},
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    )
                assert refused.status_code == 401
                assert 'resource_metadata="' in refused.headers["www-authenticate"]
                assert grants.list_grants(app.db, "1") == []
        finally:
            await person.close()

    shared.run(scenario)


def test_a_page_on_another_port_can_neither_frame_nor_post_the_consent_page(
    app: App, shared: Chromium
):
    from playwright.async_api import expect

    async def scenario() -> None:
        async with chromium(shared.browser, app) as context:
            page = await context.new_page()
            consent = start_authorization(app, name="Framed")
            request_id = parse_qs(urlsplit(consent).query)["request"][0]
            await page.goto(consent)
            await sign_in_on_the_way(page)
            await expect(page.get_by_role("button", name="Allow")).to_be_visible()

            frame_and_form = f"""<!doctype html><title>Win a prize</title>
                <iframe name="victim" src="{consent}" width="800" height="600"></iframe>
                <form method="post" action="{app.origin}{CONSENT_PATH}">
                  <input type="hidden" name="request" value="{request_id}">
                  <input type="hidden" name="agent" value="prize">
                  <button name="decision" value="allow">Claim your prize</button>
                </form>"""

            framed = await context.new_page()
            with hostile_site(frame_and_form) as hostile:
                loaded = await framed.goto(hostile)
                assert loaded is not None and loaded.ok
                victim = framed.frame(name="victim")
                assert victim is not None
                # The frame did load something: the consent page's own answer, which
                # the browser refused to show inside another page.
                assert victim.url.startswith("chrome-error://"), victim.url
                await expect(victim.get_by_role("button", name="Allow")).to_have_count(0)
                await framed.screenshot(path=ARTIFACTS / "consent-framed.png")

                async with framed.expect_response(app.origin + CONSENT_PATH) as posted:
                    await framed.get_by_role("button", name="Claim your prize").click()
                assert (await posted.value).status == 403
            assert oauth.pending(app.db, request_id) is not None
            assert grants.list_grants(app.db, include_revoked=True) == []

    shared.run(scenario)


def test_the_consent_page_says_a_clients_name_is_its_own_claim_and_where_the_answer_goes(
    app: App, shared: Chromium
):
    """Anyone can register a client named "Claude Code": the name is the client's own
    choice, and a look-alike needs no trick character to take the real one's. What the
    person reads in Chromium is that the name is only the app's claim, and what identifies
    it for real: the host and port their answer goes to (a look-alike's listener on another
    port of this computer, or a site of its own)."""
    from playwright.async_api import expect

    redirects = ["http://127.0.0.1:51234/callback", "https://claude.example:8443/cb"]

    async def scenario() -> None:
        async with chromium(shared.browser, app) as context:
            page = await context.new_page()
            read: list[str] = []
            for redirect in redirects:
                await page.goto(start_authorization(app, redirect, name="Claude Code"))
                if "/signin" in page.url:
                    await sign_in_on_the_way(page)
                await expect(page.get_by_role("button", name="Allow")).to_be_visible()
                read.append(" ".join((await page.locator("main").inner_text()).split()))
            await page.locator("body").screenshot(path=ARTIFACTS / "consent-claim.png")
            loopback, web = read
            for text in read:
                assert "An app that calls itself Claude Code asks to use this site" in text
                assert (
                    "That name is its own claim: anyone can register an app under any "
                    "name, and this site has not checked it." in text
                ), text
            assert (
                "your browser goes to 127.0.0.1:51234 (a program on that computer, "
                "listening on port 51234): that, not the name, is the app you allow."
            ) in loopback, loopback
            assert (
                "your browser goes to claude.example:8443: that, not the name, is the "
                "app you allow."
            ) in web, web

    shared.run(scenario)


def test_a_long_host_or_name_is_read_whole_without_scrolling_sideways(app: App, shared: Chromium):
    """A client's redirect host may be 253 characters with no space: a look-alike's
    ``claude.ai.<200 characters>.evil.example`` ran off the side of the consent page, on a
    phone and on a desktop, so the person read ``claude.ai.xxx`` and never the host's end,
    the part that says whose it is. So did a name of 100 letters. Each now wraps, and is on
    the screen whole."""
    from playwright.async_api import expect

    host = "claude.ai." + ".".join(["x" * 60] * 3) + ".evil.example"
    name = "Claude" + "x" * 94

    async def scenario() -> None:
        async with chromium(shared.browser, app) as context:
            page = await context.new_page()
            await page.goto(start_authorization(app, f"https://{host}/cb", name=name))
            await sign_in_on_the_way(page)
            await expect(page.get_by_role("button", name="Allow")).to_be_visible()
            for viewport in (PHONE, DESKTOP):
                await page.set_viewport_size(viewport)
                shown = [page.get_by_role("heading", level=1).locator(".client")]
                shown += [page.locator(".consent-notice").get_by_text(t) for t in (name, host)]
                for element in shown:
                    box = await element.bounding_box()
                    assert box is not None
                    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], (
                        await element.inner_text(),
                        box,
                        viewport,
                    )
                wide, seen = await page.evaluate(
                    "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
                )
                assert wide <= seen, viewport
            await page.screenshot(path=ARTIFACTS / "consent-long-host.png")

    shared.run(scenario)


RESTYLED = doc_block("docs/mcp.md", "html", "{{ notice }}")
"""docs/mcp.md's restyled consent page; with ``{{ notice }}`` taken out, as apps wrote
one before the notice (showing ``redirect_host`` alone, say)."""


@pytest.mark.parametrize("kept", [True, False], ids=["shown", "left-out"])
def test_a_restyled_consent_page_cannot_drop_whose_claim_the_name_is_or_where_it_goes(
    kept: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture, shared: Chromium
):
    """An app restyles the consent page with its own ``authorize.html``. Before, one that
    showed ``redirect_host`` alone (as the framework's page did before) dropped the port
    and the sentence that the client's name is its own claim, the two things that tell a
    look-alike from the app the person meant. The notice is the framework's, rendered from
    its templates alone: a page that shows it keeps its own style around it; a page that
    leaves it out is not shown, the framework's own is (with the app's console link, as
    its other pages have it), and an error says why."""
    from playwright.async_api import expect

    app_dir = tmp_path / "tickets"
    shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("*.db*", "__pycache__"))
    (app_dir / "templates" / "_rastrillo").mkdir()
    (app_dir / "templates" / "_rastrillo" / "authorize.html").write_text(
        RESTYLED if kept else RESTYLED.replace("{{ notice }}", "")
    )
    options = load_options(app_dir)
    options = dataclasses.replace(options, db=str(tmp_path / "tickets.db"), mcp=True, console=True)

    async def scenario(app: App) -> str:
        async with chromium(shared.browser, app) as context:
            page = await context.new_page()
            await page.goto(start_authorization(app, "http://127.0.0.1:51234/cb", "Claude Code"))
            await sign_in_on_the_way(page)
            await expect(page.get_by_role("button", name="Allow")).to_be_visible()
            if not kept:
                await expect(page.get_by_role("link", name="Tool console")).to_be_visible()
            return " ".join((await page.locator("main").inner_text()).split())

    with live_server(options) as app, caplog.at_level(logging.ERROR, "rastrillo.pages.authorize"):
        text = shared.run(scenario, app)
    assert (
        "That name is its own claim: anyone can register an app under any name, and this "
        "site has not checked it." in text
    ), text
    assert (
        "your browser goes to 127.0.0.1:51234 (a program on that computer, listening on "
        "port 51234): that, not the name, is the app you allow." in text
    ), text
    assert ("Connect to Harbour Tickets?" in text) == kept, text
    refused = [r.getMessage() for r in caplog.records if r.name == "rastrillo.pages.authorize"]
    assert bool(refused) != kept, refused
    assert all("does not show {{ notice }}" in m for m in refused)


def test_the_revoke_button_refuses_the_clients_next_call(
    app: App, callback: tuple[str, list[str]], shared: Chromium
):
    from playwright.async_api import expect

    storage = Memory()

    async def scenario() -> None:
        person = Person(shared.browser, app, callback)
        try:
            http, _ = await connect(app, person, storage)()
            async with http:
                assert await order_status(http, app) == "paid"
                [first] = grants.list_grants(app.db, "1")
                assert person.page is not None
                await person.page.goto("/_rastrillo/agents")
                await person.page.get_by_role(
                    "button", name="Revoke ticket-desk-agent (Ticket Desk Agent)"
                ).click()
                await expect(person.page.get_by_text("No agent acts for you.")).to_be_visible()
                assert grants.list_grants(app.db, "1") == []

                # The next call is refused: the client has to ask the person again.
                assert await order_status(http, app) == "paid"
                assert person.visits == 2
                [second] = grants.list_grants(app.db, "1")
                assert second.id != first.id
        finally:
            await person.close()

    shared.run(scenario)
