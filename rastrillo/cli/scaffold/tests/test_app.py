"""The app's own tests: they run against a fresh database each time."""

from pathlib import Path

from rastrillo.testing import TestApp

APP_DIR = Path(__file__).resolve().parent.parent


def test_home_lists_notes(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    app.db.execute("INSERT INTO notes (body) VALUES ('hello')")
    response = app.client.get("/")
    assert response.status_code == 200
    assert "hello" in response.text


def test_adding_a_note(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    response = app.client.post("/notes", data={"body": "buy milk"}, follow_redirects=False)
    assert response.status_code == 303
    assert "buy milk" in app.client.get("/").text
