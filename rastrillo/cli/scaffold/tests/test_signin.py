"""Signing in and out with an email and password."""

from pathlib import Path

from rastrillo.sessions import hash_password
from rastrillo.testing import TestApp

APP_DIR = Path(__file__).resolve().parent.parent


def add_user(app: TestApp, email: str, password: str) -> None:
    app.db.execute(
        "INSERT INTO users (email, name, password_hash) VALUES (:email, 'Ada', :hash)",
        email=email,
        hash=hash_password(password),
    )


def test_sign_in_and_out(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    add_user(app, "ada@example.com", "a long passphrase")
    form = {"email": "ada@example.com", "password": "wrong", "next": "/"}
    assert app.client.post("/signin", data=form).status_code == 400
    form["password"] = "a long passphrase"
    response = app.client.post("/signin", data=form, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/"
    assert "Sign out" in app.client.get("/").text
    app.client.post("/signout")
    assert "Sign in" in app.client.get("/").text


def test_next_goes_back_only_to_this_site(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    add_user(app, "ada@example.com", "a long passphrase")
    form = {"email": "ada@example.com", "password": "a long passphrase", "next": "//evil.example"}
    response = app.client.post("/signin", data=form, follow_redirects=False)
    assert response.headers["location"] == "/"
