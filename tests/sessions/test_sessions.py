"""Sessions over a real server: rotation, sign-out, revocation, forgery, expiry, the guard."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

import rastrillo
from rastrillo import sessions
from rastrillo.app import App
from tests.sessions._sessions_app import Clock, make_options
from tests.support import TLS

Browser = Callable[[App], httpx.Client]


def sign_in_as(client: httpx.Client, user: str) -> str:
    response = client.post("/signin-as", data={"user": user})
    assert response.status_code == 200
    return response.text


def cookie(app: App, session_id: str) -> dict[str, str]:
    return {"Cookie": f"{sessions.cookie_name(app.origin)}={session_id}"}


def test_signed_out_browser_has_no_user(app: App, browser: Browser) -> None:
    client = browser(app)
    assert client.get("/").text == "-"
    assert "set-cookie" not in client.get("/").headers


def test_sign_in_issues_a_strong_http_only_lax_cookie(app: App, browser: Browser) -> None:
    client = browser(app)
    response = client.post("/signin-as", data={"user": "7"})
    set_cookie = response.headers["set-cookie"]
    name, _, rest = set_cookie.partition("=")
    value = rest.split(";")[0]
    assert name == "rastrillo_session"
    assert value == response.text
    assert len(value) >= 43  # 256 bits in URL-safe base64; at least 128 are required
    attributes = {a.strip().split("=")[0].lower() for a in set_cookie.split(";")[1:]}
    assert {"httponly", "path", "samesite", "max-age"} <= attributes
    assert "samesite=lax" in set_cookie.lower()
    assert "secure" not in attributes  # plain http here; see the https test
    assert client.get("/").text == "7"


def test_https_origin_gives_a_host_prefixed_secure_cookie(tmp_path: Path) -> None:
    app = rastrillo.handler(make_options(tmp_path, origin="https://tickets.example"))
    client = TestClient(app, base_url=app.origin, headers={"Origin": app.origin})
    set_cookie = client.post("/signin-as", data={"user": "7"}).headers["set-cookie"]
    assert set_cookie.startswith("__Host-rastrillo_session=")
    assert "; Secure" in set_cookie and "; Path=/" in set_cookie and "Domain" not in set_cookie
    assert sessions.cookie_name("https://tickets.example") == "__Host-rastrillo_session"
    assert sessions.cookie_name("http://127.0.0.1:8000") == "rastrillo_session"


def test_sign_in_rotates_the_id_and_kills_the_old_one(app: App, browser: Browser) -> None:
    client = browser(app)
    first = sign_in_as(client, "7")
    second = sign_in_as(client, "8")
    assert first != second
    assert client.get("/").text == "8"
    with httpx.Client(verify=TLS, base_url=app.origin, headers=cookie(app, first)) as old:
        assert old.get("/").text == "-"


def test_a_planted_session_id_is_replaced_at_sign_in(app: App, browser: Browser) -> None:
    planted = sessions.create_session(app.db, "attacker")
    victim = browser(app)
    victim.cookies.set(sessions.cookie_name(app.origin), planted)
    issued = sign_in_as(victim, "victim")
    assert issued != planted
    with httpx.Client(verify=TLS, base_url=app.origin, headers=cookie(app, planted)) as attacker:
        assert attacker.get("/").text == "-"


def test_sign_out_deletes_the_session(app: App, browser: Browser) -> None:
    client = browser(app)
    session_id = sign_in_as(client, "7")
    response = client.post("/signout")
    assert "Max-Age=0" in response.headers["set-cookie"]
    assert client.get("/").text == "-"
    with httpx.Client(verify=TLS, base_url=app.origin, headers=cookie(app, session_id)) as replay:
        assert replay.get("/").text == "-"
        assert replay.get("/private", follow_redirects=False).status_code == 303


def test_an_async_handle_signs_in_and_out_with_the_async_forms(app: App, browser: Browser):
    client = browser(app)
    planted = sign_in_as(client, "7")
    response = client.post("/signin-async", data={"user": "8"})
    assert response.status_code == 200 and response.text != planted
    assert client.get("/").text == "8"
    assert client.post("/signout").text == "signed out"  # an async handle: sign_out_async
    assert client.get("/").text == "-"


def test_an_async_handle_calling_sign_in_is_refused_before_any_write(
    app: App, browser: Browser, caplog: pytest.LogCaptureFixture
) -> None:
    """The row's write would wait on the database's lock on the event loop, stalling
    every request: the sync form refuses there, naming the async one, and writes nothing."""
    client = browser(app)
    planted = sign_in_as(client, "7")
    response = client.post("/signin-on-the-loop", data={"user": "8"})
    assert response.status_code == 500
    assert "await sessions.sign_in_async(...)" in caplog.text
    assert client.get("/").text == "7"  # the old session was not ended
    with httpx.Client(verify=TLS, base_url=app.origin, headers=cookie(app, planted)) as same:
        assert same.get("/").text == "7"


def test_sign_in_async_leaves_the_loop_free_while_the_database_is_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another thread holds the write lock until the event loop runs again: a sign-in
    waiting on the database on the loop would never let it, and this would never end."""
    app = rastrillo.handler(make_options(tmp_path))
    holding, loop_ran, writing = threading.Event(), threading.Event(), threading.Event()
    released_by_the_loop: list[bool] = []
    write = app.db.write

    def noted_write():
        writing.set()  # the sign-in is about to wait for the lock
        return write()

    def hold() -> None:
        with app.db.write():
            holding.set()
            released_by_the_loop.append(loop_ran.wait(30))

    async def main() -> str:
        transport = httpx.ASGITransport(app=app)
        origin = {"Origin": app.origin}
        async with httpx.AsyncClient(transport=transport, base_url=app.origin) as client:
            signing_in = asyncio.create_task(
                client.post("/signin-async", data={"user": "8"}, headers=origin)
            )
            while not writing.is_set():
                await asyncio.sleep(0)
            loop_ran.set()  # reached only if the sign-in waits off the loop
            return (await signing_in).text

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(30)
    monkeypatch.setattr(app.db, "write", noted_write)
    signed_in = asyncio.run(main())
    holder.join()
    assert released_by_the_loop == [True]
    found = sessions.store.find_session(app.db, signed_in, tool_call=False)
    assert found is not None and found.user_id == "8"
    app.db.dispose()


def test_revoking_a_user_ends_all_their_sessions(app: App, browser: Browser) -> None:
    laptop, phone, other = browser(app), browser(app), browser(app)
    sign_in_as(laptop, "7")
    sign_in_as(phone, "7")
    sign_in_as(other, "8")
    assert sessions.revoke_user(app.db, 7) == 2
    assert laptop.get("/").text == "-"
    assert phone.post("/private").status_code == 403
    assert other.get("/").text == "8"


@pytest.mark.parametrize("kind", ["random", "digest", "empty", "long", "tampered"])
def test_a_forged_cookie_is_refused_and_cleared(app: App, kind: str) -> None:
    real = sessions.create_session(app.db, "7")
    forged = {
        "random": "A" * 43,
        "digest": hashlib.sha256(real.encode()).hexdigest(),  # the table's form, not a cookie
        "empty": "",
        "long": real * 10,
        "tampered": real[:-1] + ("A" if real[-1] != "A" else "B"),
    }[kind]
    with httpx.Client(verify=TLS, base_url=app.origin, headers=cookie(app, forged)) as client:
        response = client.get("/")
        assert response.text == "-"
        if forged:
            assert "Max-Age=0" in response.headers["set-cookie"]
        assert client.get("/private", follow_redirects=False).status_code == 303


@pytest.mark.parametrize("lead", [b"\xa0", b"\x85"])
def test_a_cookie_named_the_session_cookie_only_after_a_unicode_trim_is_not_it(
    app: App, lead: bytes
) -> None:
    """A browser keeps the byte as part of the name (``\xa0__Host-…`` is no ``__Host-``
    cookie, so a sibling subdomain may set it): the server must not trim it away. The
    session cookie of the same request, whichever comes first, is still read."""
    name = sessions.cookie_name(app.origin).encode()
    planted, real = sessions.create_session(app.db, "666"), sessions.create_session(app.db, "1")
    with httpx.Client(verify=TLS, base_url=app.origin) as client:
        alone = lead + name + b"=" + planted.encode()
        assert client.get("/", headers={"cookie": alone}).text == "-"
        both = name + b"=" + real.encode() + b"; " + alone
        assert client.get("/", headers={"cookie": both}).text == "1"


def test_idle_expiry(serve: Callable[..., App], browser: Browser, clock: Clock) -> None:
    app = serve(session_idle=timedelta(minutes=30), session_lifetime=timedelta(hours=8))
    client = browser(app)
    sign_in_as(client, "7")
    for _ in range(5):  # activity keeps it alive past the idle time
        clock.advance(20 * 60)
        assert client.get("/").text == "7"
    clock.advance(30 * 60 + 1)
    assert client.get("/").text == "-"


def test_absolute_expiry(serve: Callable[..., App], browser: Browser, clock: Clock) -> None:
    app = serve(session_idle=timedelta(minutes=30), session_lifetime=timedelta(hours=1))
    client = browser(app)
    sign_in_as(client, "7")
    for _ in range(3):
        clock.advance(19 * 60)
        assert client.get("/").text == "7"
    clock.advance(4 * 60)  # 61 minutes after sign-in, however active
    assert client.get("/").text == "-"


def test_expired_rows_are_pruned(app: App, clock: Clock) -> None:
    sessions.create_session(app.db, "7", idle=timedelta(seconds=5))
    clock.advance(6)
    sessions.create_session(app.db, "8")
    users = [r.user_id for r in app.db.query("SELECT user_id FROM rastrillo_sessions")]
    assert users == ["8"]


def test_require_sends_a_get_to_sign_in_and_back(app: App, browser: Browser) -> None:
    client = browser(app)
    response = client.get("/private?tab=2&x=%2F", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/signin?next=%2Fprivate%3Ftab%3D2%26x%3D%252F"
    assert client.head("/private").status_code == 303
    sign_in_as(client, "7")
    assert client.get("/private").text == "private for 7"


def test_require_refuses_other_methods_with_403(app: App, browser: Browser) -> None:
    client = browser(app)
    response = client.post("/private")
    assert response.status_code == 403
    assert response.text == "Sign in first."
    sign_in_as(client, "7")
    assert client.post("/private").text == "posted by 7"


def test_require_keeps_sync_and_async_handles_as_they_are() -> None:
    import inspect

    from tests.sessions._sessions_app import private, private_post

    assert not inspect.iscoroutinefunction(private)
    assert inspect.iscoroutinefunction(private_post)
    assert private.__name__ == "private"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/orders/7?x=1", "/orders/7?x=1"),
        ("/", "/"),
        (None, "/"),
        ("", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("/\t/evil.example", "/"),
        ("https://evil.example/", "/"),
        ("javascript:alert(1)", "/"),
        ("orders", "/"),
        ("/a\\b", "/"),
        ("/a b", "/"),
    ],
)
def test_safe_next(url: str | None, expected: str) -> None:
    assert sessions.safe_next(url) == expected


def test_session_id_reaches_the_scope(tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    def peek(ctx: rastrillo.Context):
        seen.update(ctx.request.scope)
        return ctx.text("ok")

    options = make_options(tmp_path)
    options.routes = [rastrillo.routing.Route("GET", "/peek", "peek", peek)]
    app = rastrillo.handler(options)
    session_id = sessions.create_session(app.db, 42)
    TestClient(app, base_url=app.origin, cookies=cookie_jar(app, session_id)).get("/peek")
    assert seen[sessions.SESSION_SCOPE_KEY] == session_id
    assert seen["rastrillo.user_id"] == "42"


def cookie_jar(app: App, session_id: str) -> dict[str, str]:
    return {sessions.cookie_name(app.origin): session_id}
