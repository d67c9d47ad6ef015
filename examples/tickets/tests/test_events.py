"""The tickets demo's public pages, on a fresh database with the demo data."""

import html
from pathlib import Path

import pytest

from rastrillo.testing import TestApp
from rastrillo.tools import BadArg

APP_DIR = Path(__file__).resolve().parent.parent


def test_events_are_listed_with_tickets_left(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    page = app.client.get("/")
    assert page.status_code == 200
    assert "Jazz at the Harbour" in page.text
    assert "118 of 120 tickets left" in page.text


def test_one_event_and_an_unknown_one(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    assert "City Library" in app.client.get("/events/2").text
    assert app.client.get("/events/999").status_code == 404
    assert app.client.get("/events/not-a-number").status_code == 404


def test_demo_data_is_seeded_once(tmp_path):
    TestApp(APP_DIR, tmp_path)
    again = TestApp(APP_DIR, tmp_path)
    assert again.db.query_one("SELECT COUNT(*) AS n FROM events").n == 3


def test_ids_are_read_strictly(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    for text in ("%202", "2%20", "2_0", "%D9%A2", "+2"):  # int() would take each
        assert app.client.get(f"/events/{text}").status_code == 404, text


def test_buying_takes_a_whole_number_from_1_to_10_from_a_person_and_an_agent(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    app.sign_in(app.client, 1)
    for text, problem in (("11", "not the integer 11"), ("2 ", "not the string '2 '")):
        page = app.client.post("/events/2/buy", data={"quantity": text})
        assert page.status_code == 400
        assert f"must be an integer from 1 to 10, {problem}" in html.unescape(page.text)
    bought = app.client.post("/events/2/buy", data={"quantity": "3"}, follow_redirects=False)
    assert bought.status_code == 303
    agent = app.agent("concierge", user_id=1)
    with pytest.raises(BadArg, match="'quantity': must be an integer from 1 to 10, not the string"):
        agent.call("events_id_buy_post", {"id": "2", "quantity": "3"})
    pending = agent.needs_confirmation(
        "events_id_buy_post", {"id": "2", "quantity": 3}, sentence="Buy 3 ticket(s) for event 2?"
    )
    agent.approve(pending)
    result = agent.call("events_id_buy_post", {"id": "2", "quantity": 3}, approval=pending)
    assert result.status == 201 and result.json()["order"]["quantity"] == 3


def test_orders_filter_by_status(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    app.sign_in(app.client, 1)
    agent = app.agent("concierge", user_id=1)
    assert {o["status"] for o in agent.call("orders_get", {}).json()["orders"]} == {"paid"}
    assert agent.call("orders_get", {"status": "held"}).json()["orders"] == []
    with pytest.raises(BadArg, match='must be one of "held", "paid", "cancelled"'):
        agent.call("orders_get", {"status": "lost"})
    page = app.client.get("/orders", params={"status": "lost"})
    assert page.status_code == 400
    assert page.text == (
        'status: must be one of "held", "paid", "cancelled", not the string \'lost\''
    )
