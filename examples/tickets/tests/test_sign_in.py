"""Signing in to the tickets demo, and orders that belong to their user — over a real server."""

import dataclasses
import importlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rastrillo.app import App
from rastrillo.loader import load_options
from rastrillo.testing import TestApp, live_server

APP_DIR = Path(__file__).resolve().parent.parent
OPTIONS = load_options(APP_DIR)
ticketing = importlib.import_module("ticketing")  # imported by app.py above
ALICE, BOB = (email for email, _ in ticketing.DEMO_USERS)
BOBS_ORDER = 3  # seeded: alice has orders 1 and 2, bob has 3


@pytest.fixture
def app(tmp_path) -> Iterator[App]:
    options = dataclasses.replace(OPTIONS, db=str(tmp_path / "tickets.db"))
    with live_server(options) as served:
        yield served


@pytest.fixture
def alice(app: App) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=app.origin, headers={"Origin": app.origin}) as client:
        response = client.post(
            "/signin", data={"email": ALICE, "password": ticketing.DEMO_PASSWORD, "next": "/orders"}
        )
        assert response.status_code == 303
        assert response.headers["location"] == "/orders"
        yield client


def test_order_pages_send_a_signed_out_browser_to_sign_in(app: App) -> None:
    with httpx.Client(base_url=app.origin, headers={"Origin": app.origin}) as client:
        response = client.get("/orders/1")
        assert response.status_code == 303
        assert response.headers["location"] == "/signin?next=%2Forders%2F1"
        assert client.post("/orders/1/cancel").status_code == 403
        assert client.post("/events/1/buy", data={"quantity": "1"}).status_code == 403
        assert client.get("/").status_code == 200  # events stay public


def test_a_user_sees_and_cancels_only_their_own_orders(app: App, alice: httpx.Client) -> None:
    orders = alice.get("/orders")
    assert "Jazz at the Harbour" in orders.text and "Chess Open" not in orders.text
    assert alice.get("/orders/1").status_code == 200
    assert alice.get(f"/orders/{BOBS_ORDER}").status_code == 404
    assert alice.get(f"/orders/{BOBS_ORDER}/cancel").status_code == 404
    assert alice.post(f"/orders/{BOBS_ORDER}/cancel").status_code == 404
    assert alice.post(f"/orders/{BOBS_ORDER}/pay").status_code == 404
    assert app.db.query_one("SELECT status FROM orders WHERE id = 3").status == "paid"
    assert alice.post("/orders/1/cancel").status_code == 303
    assert app.db.query_one("SELECT status FROM orders WHERE id = 1").status == "cancelled"


def test_sign_out_ends_the_session(app: App, alice: httpx.Client) -> None:
    cookie = dict(alice.cookies)
    assert alice.post("/signout").status_code == 303
    with httpx.Client(base_url=app.origin, cookies=cookie) as replay:
        assert replay.get("/orders").status_code == 303


def test_a_cross_site_cancel_is_refused(app: App, alice: httpx.Client) -> None:
    response = alice.post("/orders/1/cancel", headers={"Origin": "https://evil.example"})
    assert response.status_code == 403
    assert app.db.query_one("SELECT status FROM orders WHERE id = 1").status == "paid"


def test_wrong_password_and_unknown_account_look_the_same(app: App) -> None:
    with httpx.Client(base_url=app.origin, headers={"Origin": app.origin}) as client:
        wrong = client.post("/signin", data={"email": ALICE, "password": "nope"})
        unknown = client.post("/signin", data={"email": "eve@example.com", "password": "nope"})
    assert wrong.status_code == unknown.status_code == 400
    assert "Wrong email or password." in wrong.text and "Wrong email or password." in unknown.text


def test_demo_accounts_are_listed_in_demo_mode_only(tmp_path) -> None:
    demo = TestApp(APP_DIR, tmp_path / "demo")
    assert ALICE in demo.client.get("/signin").text
    assert ticketing.DEMO_PASSWORD in demo.client.get("/signin").text
    live = TestApp(APP_DIR, tmp_path / "live", demo=False)
    page = live.client.get("/signin").text
    assert ALICE not in page and ticketing.DEMO_PASSWORD not in page


def test_sign_in_is_rate_limited(tmp_path) -> None:
    app = TestApp(APP_DIR, tmp_path)
    for _ in range(5):
        app.client.post("/signin", data={"email": BOB, "password": "guess"})
    response = app.client.post("/signin", data={"email": BOB, "password": ticketing.DEMO_PASSWORD})
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) > 0
