"""The tickets demo's public pages, on a fresh database with the demo data."""

from pathlib import Path

from rastrillo.testing import TestApp

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
