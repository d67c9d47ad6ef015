"""Creating an account, signing in and out with an email and password."""

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


def test_sign_up_signs_in_and_refuses_a_taken_email(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    form = {"name": "Ada", "email": "Ada@Example.com", "password": "a long passphrase"}
    response = app.client.post("/signup", data=form, follow_redirects=False)
    assert response.status_code == 303
    assert "Sign out" in app.client.get("/").text
    again = app.browser().post("/signup", data=form)
    assert again.status_code == 400
    assert "already has an account" in again.text
    short = app.browser().post("/signup", data={**form, "email": "b@x.io", "password": "short"})
    assert short.status_code == 400


def test_a_new_account_can_sign_in(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    form = {"name": "Ada", "email": "ada@example.com", "password": "a long passphrase"}
    app.client.post("/signup", data=form)
    other = app.browser()
    response = other.post("/signin", data={**form, "next": "/"}, follow_redirects=False)
    assert response.status_code == 303
