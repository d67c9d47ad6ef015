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


def test_a_note_with_no_text_is_refused_with_a_message(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    said = {
        "": "body: is required",
        "x" * 2001: "body: must be a string of 1 to 2000 characters",
        "   ": "A note needs some text.",
    }
    for body, message in said.items():
        form = {"body": body} if body else {}
        response = app.client.post("/notes", data=form, follow_redirects=False)
        assert response.status_code == 400 and response.text.startswith(message)
    assert app.db.query("SELECT count(*) AS n FROM notes")[0].n == 0


def test_an_agent_adds_a_note_once_the_user_approves(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    agent = app.agent("assistant", user_id=1)
    pending = agent.needs_confirmation(
        "notes_post", {"body": "buy milk"}, sentence="Add the note buy milk?"
    )
    assert "buy milk" not in app.client.get("/").text
    agent.approve(pending)
    result = agent.call("notes_post", {"body": "buy milk"}, approval=pending)
    assert result.status == 201
    assert result.json() == {"added": "buy milk"}
    assert agent.call("get").json()[0]["body"] == "buy milk"
