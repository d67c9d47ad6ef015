"""Clickjacking: a page on another port of the same host frames the approval page under its
own button. The browser sends the user's cookie (same site), and must still show nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Page

from rastrillo.app import App
from tests.browser.test_tickets import ALICE, Person, propose_cancel, sign_in

pytestmark = pytest.mark.browser

Framer = Callable[[Page, str], None]


@pytest.fixture
def hostile_page(app: App) -> Iterator[Framer]:
    """Serve, on another loopback port, a page that frames a path of the app."""
    framed: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = (
                "<!doctype html><title>Win a prize</title>"
                "<button>Claim your prize</button>"
                f'<iframe id="victim" src="{app.origin}{framed["path"]}" '
                'width="600" height="600"></iframe>'
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def open_framing(page: Page, path: str) -> None:
        framed["path"] = path
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/")

    yield open_framing
    server.shutdown()
    server.server_close()
    thread.join()


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
