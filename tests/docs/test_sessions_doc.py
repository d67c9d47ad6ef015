"""docs/sessions.md's examples, in one real app (conventions: tests/doc_examples.py):
its sign-in action, its guarded route, its owner-only query, its rate limit and its action
that asks for a recent sign-in."""

from __future__ import annotations

from pathlib import Path

import pytest

from rastrillo import sessions
from rastrillo.testing import ManualClock, TestApp
from tests.doc_examples import app_py, doc_actions, doc_block, handle_py
from tests.support import LIGHT, write_app

PAGE = "docs/sessions.md"
USERS = """\
CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, password_hash TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id TEXT NOT NULL, event TEXT NOT NULL);
"""


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's actions and its app.py, generated once for the module."""
    actions = doc_actions(PAGE)
    assert sorted(actions) == [
        "account.GET.py",
        "email.POST.py",
        "signin.POST.py",
        "signout.POST.py",
    ]
    owner_query = doc_block(PAGE, "python", "AND user_id = :user")
    actions["orders/[id].GET.py"] = handle_py(owner_query, "ctx.json(dict(row._mapping))")
    options = doc_block(PAGE, "python", "sign_in_rate_limit=")
    return write_app(
        tmp_path_factory.mktemp("sessions") / "app",
        actions,
        files={"app.py": app_py(options), "migrations/0001_users.sql": USERS},
    )


@pytest.fixture
def app(app_dir: Path, tmp_path: Path) -> TestApp:
    """The app on a fresh database, its clock in the test's hands, with one user (id 1)."""
    test_app = TestApp(app_dir, tmp_path, clock=ManualClock())
    test_app.db.execute(
        "INSERT INTO users (id, email, password_hash) VALUES (1, 'ana@example.com', :h)",
        h=LIGHT.hash("correct horse"),  # a light hash: sign-ins cost 0.5 ms, not 0.2 s
    )
    return test_app


def sign_in(app: TestApp, password: str, email: str = " Ana@Example.com ", **extra: str):
    return app.client.post(
        "/signin", data={"email": email, "password": password, **extra}, follow_redirects=False
    )


def test_signing_in_starts_a_session_under_a_new_id_and_goes_to_a_safe_next(app):
    planter = app.browser()
    planted = app.sign_in(planter, 1)
    app.client.cookies.set("rastrillo_session", planted)  # a session fixed in the browser before
    answer = sign_in(app, "correct horse", next="/account?tab=1")
    assert (answer.status_code, answer.headers["location"]) == (303, "/account?tab=1")
    assert planter.get("/account", follow_redirects=False).status_code == 303  # it is worthless
    assert sign_in(app, "correct horse", next="//evil.example").headers["location"] == "/"
    assert app.client.get("/account").text == "Signed in as user 1"


def test_an_async_handle_signs_out_with_the_async_form(app):
    browser = app.browser()
    session_id = app.sign_in(browser, 1)
    answer = browser.post("/signout", follow_redirects=False)
    assert (answer.status_code, answer.headers["location"]) == (303, "/")
    assert "Max-Age=0" in answer.headers["set-cookie"]
    assert sessions.store.find_session(app.db, session_id, tool_call=False) is None


def test_an_unknown_account_and_a_wrong_password_are_answered_alike(app):
    wrong = sign_in(app, "wrong")
    unknown = sign_in(app, "correct horse", email="nobody@example.com")
    assert (wrong.status_code, wrong.text) == (unknown.status_code, unknown.text)
    assert wrong.text == "Wrong email or password."


def test_the_rate_limit_example_is_the_default_and_holds_even_the_right_password(app):
    assert app.app.options.sign_in_rate_limit == sessions.RateLimit()
    for _ in range(5):
        assert sign_in(app, "wrong").status_code == 400
    refused = sign_in(app, "correct horse")
    assert refused.status_code == 429
    app.app.options.clock.advance(15 * 60)
    assert sign_in(app, "correct horse").status_code == 303


def test_a_guarded_get_without_a_session_goes_to_sign_in_with_next(app):
    answer = app.client.get("/account?tab=1", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/signin?next=%2Faccount%3Ftab%3D1"


def test_the_owner_query_shows_an_order_to_its_owner_only(app):
    app.db.execute("INSERT INTO orders (id, user_id, event) VALUES (7, '1', 'Jazz')")
    app.sign_in(app.client, 1)
    assert app.client.get("/orders/7").json() == {"id": 7, "user_id": "1", "event": "Jazz"}
    stranger = app.browser()
    app.sign_in(stranger, 2)
    assert stranger.get("/orders/7").status_code == 404
    assert app.client.get("/orders/8").status_code == 404


def test_an_old_session_is_sent_to_sign_in_again_and_a_recent_one_changes_the_email(app):
    app.sign_in(app.client, 1)
    app.app.options.clock.advance(app.app.options.recent_sign_in.total_seconds() + 1)
    old = app.client.post("/email", data={"email": "thief@example.com"}, follow_redirects=False)
    assert (old.status_code, old.headers["location"]) == (303, "/signin?next=%2Faccount")
    assert app.db.query_one("SELECT email FROM users WHERE id = 1").email == "ana@example.com"
    assert sign_in(app, "correct horse", next="/account").headers["location"] == "/account"
    done = app.client.post("/email", data={"email": "ana@example.org"}, follow_redirects=False)
    assert (done.status_code, done.headers["location"]) == (303, "/account")
    assert app.db.query_one("SELECT email FROM users WHERE id = 1").email == "ana@example.org"
