"""Security headers: the framework's pages can never be framed or cached; an app's pages
get the same with one switch, and the scaffold and the demo turn it on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest
from httpx import Headers
from starlette.testclient import TestClient

import rastrillo
from rastrillo.cli.new import scaffold
from rastrillo.loader import load_options
from rastrillo.pages.console import CONSOLE_PATH
from rastrillo.pages.headers import FRAMEWORK_PREFIX, HEADERS
from rastrillo.storage import DatabaseUnavailable
from rastrillo.testing import TestApp, live_server
from tests.support import TLS, write_app
from tests.tools._tools_app import app_options

ROOT = Path(__file__).resolve().parents[2]
TICKETS = ROOT / "examples" / "tickets"

ACTIONS = {
    "index.GET.py": """
        def handle(ctx):
            return ctx.text("home")
    """,
    "cached.GET.py": """
        from starlette.responses import PlainTextResponse

        def handle(ctx):
            return PlainTextResponse("cached", headers={"Cache-Control": "max-age=60"})
    """,
}
STATIC = {"static/style.css": "body { color: black }"}
LOOSEN_PRELUDE = """
from starlette.datastructures import MutableHeaders


def loosen(app):
    async def middleware(scope, receive, send):
        async def loosened(message):
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["X-Frame-Options"] = "ALLOWALL"
                headers["Content-Security-Policy"] = "default-src *"
            await send(message)

        await app(scope, receive, loosened)

    return middleware
"""


def expect_secured(headers: Headers) -> None:
    for name, value in HEADERS:
        assert headers[name] == value, name


def expect_plain(headers: Headers) -> None:
    for name, _ in HEADERS:
        assert name not in headers, name


@pytest.fixture
def tickets(tmp_path: Path) -> TestApp:
    return TestApp(TICKETS, tmp_path, console=True)


def test_the_approval_page_and_the_console_are_never_framed_or_cached(tickets: TestApp) -> None:
    agent = tickets.agent("concierge", 1)
    pending = agent.needs_confirmation("orders_id_cancel_post", {"id": "1"})
    tickets.sign_in(tickets.client, 1)
    for path in (pending.url, CONSOLE_PATH):
        page = tickets.client.get(path)
        assert page.status_code == 200
        expect_secured(page.headers)
    stranger = tickets.browser()
    expect_secured(stranger.get(pending.url, follow_redirects=False).headers)  # its redirect too


def test_framework_pages_keep_them_whatever_the_app_middleware_does(tmp_path: Path) -> None:
    app_dir = write_app(tmp_path / "app", ACTIONS, extra="wrap=loosen,", prelude=LOOSEN_PRELUDE)
    app = TestApp(app_dir, tmp_path)
    expect_secured(app.client.get("/_rastrillo/approvals/nope", follow_redirects=False).headers)
    assert app.client.get("/").headers["X-Frame-Options"] == "ALLOWALL"


def test_app_pages_get_them_with_the_switch_and_keep_their_own_values(tmp_path: Path) -> None:
    app_dir = write_app(tmp_path / "app", ACTIONS, extra="security_headers=True,", files=STATIC)
    client = TestApp(app_dir, tmp_path).client
    expect_secured(client.get("/").headers)
    expect_secured(client.get("/missing").headers)
    cached = client.get("/cached").headers
    assert cached["Cache-Control"] == "max-age=60"
    assert cached["X-Frame-Options"] == "DENY"
    style = client.get("/static/style.css")
    assert style.status_code == 200
    expect_plain(style.headers)  # a stylesheet is cached and may be used anywhere


def test_app_pages_are_left_alone_without_the_switch(tmp_path: Path) -> None:
    app_dir = write_app(tmp_path / "app", ACTIONS)
    expect_plain(TestApp(app_dir, tmp_path).client.get("/").headers)


def test_the_demo_and_the_scaffold_turn_it_on(tmp_path: Path) -> None:
    new_app = scaffold(tmp_path / "shop")
    for app_dir in (TICKETS, new_app):
        client = TestApp(app_dir, tmp_path / app_dir.name).client
        expect_secured(client.get("/", follow_redirects=False).headers)


def test_every_response_under_the_framework_prefix_has_them_oauth_endpoints_too(
    tmp_path: Path,
) -> None:
    """The OAuth endpoints sit under /_rastrillo/ but are answered before the middleware:
    they too are framework pages, and the promise is every response under the prefix."""
    options = dataclasses.replace(app_options(tmp_path), mcp=True)
    with live_server(options) as app, httpx.Client(verify=TLS, base_url=app.origin) as client:
        answers = [
            client.get("/_rastrillo/oauth/authorize?client_id=x&response_type=code"),
            client.post("/_rastrillo/oauth/token", data={"grant_type": "authorization_code"}),
            client.post(
                "/_rastrillo/oauth/register",
                json={"redirect_uris": ["http://127.0.0.1:9/cb"], "client_name": "<b>x</b>"},
            ),
            client.post("/_rastrillo/oauth/revoke", data={"token": "x"}),
            client.get("/_rastrillo/oauth/token"),
            client.get("/_rastrillo/agents", follow_redirects=False),
        ]
    for answer in answers:
        assert answer.request.url.path.startswith(FRAMEWORK_PREFIX)
        expect_secured(answer.headers)


def test_a_503_while_the_oauth_endpoints_are_built_has_them_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoints are built at the first request to one; a database that cannot serve
    then is answered 503 there, before the endpoint, and that answer is a framework page's."""
    from rastrillo.agents import oauth

    def unavailable(*args: object) -> None:
        raise DatabaseUnavailable("the database does not answer")

    monkeypatch.setattr(oauth, "Authority", unavailable)
    app = rastrillo.handler(dataclasses.replace(app_options(tmp_path), mcp=True))
    with TestClient(app, base_url=app.origin) as client:
        answer = client.post("/_rastrillo/oauth/token", data={"grant_type": "authorization_code"})
    assert answer.status_code == 503 and answer.headers["retry-after"]
    expect_secured(answer.headers)


PAGE = {
    "[lang]/[page].GET.py": """
        def handle(ctx):
            return ctx.text(f"{ctx.params['page']} in {ctx.params['lang']}")
    """
}


@pytest.mark.parametrize("static", [False, True], ids=["no-static-folder", "static-folder"])
def test_an_app_page_reached_under_the_static_prefix_is_still_secured(
    tmp_path: Path, static: bool
) -> None:
    """Static files are exempt (a stylesheet may be cached); an app page is not, whatever
    its path says. ``/static/settings`` reaches ``[lang]/[page]`` when the app has no static
    folder, and ``/%73tatic/settings`` does beside one (the router reads the raw path): a
    page on another port framed either, under its own button."""
    files = STATIC if static else {}
    app_dir = write_app(tmp_path / "app", PAGE, extra="security_headers=True,", files=files)
    options = load_options(app_dir)
    with live_server(options) as app, httpx.Client(verify=TLS, base_url=app.origin) as client:
        # Beside a static folder, /static/settings is a missing file (404, exempt).
        paths = ["/%73tatic/settings"] if static else ["/static/settings", "/%73tatic/settings"]
        for path in paths:
            page = client.get(path)
            assert page.text == "settings in static"
            expect_secured(page.headers)
        if static:
            style = client.get("/static/style.css")
            assert style.status_code == 200 and "no-store" not in style.headers.get(
                "cache-control", ""
            )
