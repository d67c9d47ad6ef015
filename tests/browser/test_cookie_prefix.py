"""The ``__Host-`` session cookie against a sibling subdomain, in Chromium over real TLS.

The app is ``https://app.site.test``; a hostile ``http://evil.site.test`` (another
name under the same parent domain: a user-content or a forgotten subdomain) tries to
plant a session of its own choosing. ``__Host-`` makes Chromium refuse any cookie of
that name set for the parent domain, but a name that only *looks* like it to the
server (led by a byte such as NBSP, which Chromium keeps and a Unicode-aware trim on the
server drops) is no ``__Host-`` cookie to the browser: the server must match the
cookie's name whole, as the browser does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rastrillo.app import App
from rastrillo.sessions import cookie_name, create_session
from rastrillo.testing import live_server
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.browser.hostile import hostile_site
from tests.sessions._sessions_app import make_options
from tests.support import self_signed

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

pytestmark = pytest.mark.browser

APP_HOST = "app.site.test"
EVIL_HOST = "evil.site.test"


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """Chromium that resolves every name under ``site.test`` to loopback."""
    rules = "--host-resolver-rules=MAP *.site.test 127.0.0.1"
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, rules])
    yield browser
    browser.close()


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    """The session test app served by uvicorn over TLS as ``https://app.site.test:PORT``."""
    key_file, cert_file = self_signed(tmp_path, APP_HOST)
    tls = {"ssl_keyfile": str(key_file), "ssl_certfile": str(cert_file)}
    with live_server(make_options(tmp_path), host=APP_HOST, **tls) as app:
        yield app


@pytest.mark.parametrize("lead", ["\xa0", "\x85"])
@pytest.mark.parametrize("signed_in", [False, True], ids=["signed-out", "signed-in"])
def test_a_sibling_subdomain_cannot_plant_a_session(
    browser: Browser, app: App, lead: str, signed_in: bool
) -> None:
    name = cookie_name(app.origin)
    assert name.startswith("__Host-")
    planted = create_session(app.db, "666")  # the attacker's own account
    context = browser.new_context(ignore_https_errors=True, java_script_enabled=False)
    try:
        if signed_in:
            context.add_cookies(
                [
                    {
                        "name": name,
                        "value": create_session(app.db, "1"),
                        "url": app.origin,
                        "secure": True,
                        "httpOnly": True,
                        "sameSite": "Lax",
                    }
                ]
            )
        page = context.new_page()
        toss = ("Set-Cookie", f"{lead}{name}={planted}; Domain=site.test; Path=/")
        with hostile_site("<!doctype html><title>Hi</title>", [toss]) as evil:
            page.goto(evil.replace("127.0.0.1", EVIL_HOST))
        # Chromium kept it, for the whole parent domain and plain http: no __Host- cookie.
        kept = [c for c in context.cookies() if c["value"] == planted]
        assert [(c["domain"], c["secure"]) for c in kept] == [(".site.test", False)]
        page.goto(f"{app.origin}/")
        assert page.locator("body").inner_text() == ("1" if signed_in else "-")
    finally:
        context.close()
