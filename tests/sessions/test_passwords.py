"""Passwords and rate-limited sign-in, over a real server."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select

from rastrillo import sessions
from rastrillo.app import App
from rastrillo.sessions import passwords, throttle
from tests.sessions._sessions_app import PASSWORD, Clock
from tests.support import LIGHT, TLS

Browser = Callable[[App], httpx.Client]
LIMIT = sessions.RateLimit(per_account=3, per_address=6, window=timedelta(minutes=10))


@pytest.fixture
def serve(serve: Callable[..., App], monkeypatch: pytest.MonkeyPatch) -> Callable[..., App]:
    """The served app checks an unknown account against a dummy hash as light as its
    stored one: the two cost the same here too, as the framework has them cost the same.
    (The two tests of the functions themselves serve nothing: theirs is the framework's.)"""
    dummy = LIGHT.hash("not a password anyone has")
    monkeypatch.setattr(passwords, "_dummy_hash", lambda: dummy)
    return serve


def attempt(client: httpx.Client, email: str, password: str) -> httpx.Response:
    return client.post("/signin", data={"email": email, "password": password})


def test_hash_and_verify() -> None:
    hashed = sessions.hash_password("s3cret")
    assert hashed.startswith("$argon2id$")
    assert hashed != sessions.hash_password("s3cret")  # salted
    assert sessions.verify_password(hashed, "s3cret")
    assert not sessions.verify_password(hashed, "s3cret ")
    assert not sessions.verify_password("not a hash", "s3cret")
    assert not sessions.needs_rehash(hashed)


def test_an_unknown_account_costs_a_hash_check_too(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    real = passwords._argon2()  # made on first use: None before any hash in this process

    class Spy:
        def verify(self, password_hash: str, password: str) -> bool:
            checked.append(password_hash)
            return real.verify(password_hash, password)

        def hash(self, password: str) -> str:
            return real.hash(password)

    monkeypatch.setattr(passwords, "_hasher", Spy())
    assert not sessions.verify_password(None, "anything")
    assert len(checked) == 1 and checked[0].startswith("$argon2id$")


def test_password_sign_in(app: App, browser: Browser) -> None:
    client = browser(app)
    assert attempt(client, "ada@example.com", "wrong").status_code == 400
    assert attempt(client, "nobody@example.com", PASSWORD).status_code == 400
    response = attempt(client, "ada@example.com", PASSWORD)
    assert response.text == "welcome"
    assert client.get("/").text == "1"


def test_failures_are_limited_per_account(
    serve: Callable[..., App], browser: Browser, clock: Clock
) -> None:
    app = serve(sign_in_rate_limit=LIMIT)
    client = browser(app)
    for _ in range(3):
        assert attempt(client, "ada@example.com", "guess").status_code == 400
    refused = attempt(client, "ADA@example.com ", PASSWORD)  # the right one, too late
    assert refused.status_code == 429
    assert 0 < int(refused.headers["retry-after"]) <= 600
    assert client.get("/").text == "-"
    assert attempt(client, "bob@example.com", PASSWORD).text == "welcome"  # others unaffected
    clock.advance(10 * 60)
    assert attempt(client, "ada@example.com", PASSWORD).text == "welcome"


def test_failures_are_limited_per_address(
    serve: Callable[..., App], browser: Browser, clock: Clock
) -> None:
    app = serve(sign_in_rate_limit=LIMIT)
    client = browser(app)
    for n in range(6):  # spread over accounts, so no account limit is reached
        assert attempt(client, f"user{n}@example.com", "guess").status_code == 400
    assert attempt(client, "bob@example.com", PASSWORD).status_code == 429
    clock.advance(10 * 60)
    assert attempt(client, "bob@example.com", PASSWORD).text == "welcome"


def attempt_from(client: httpx.Client, address: str, email: str, password: str) -> httpx.Response:
    """An attempt from ``address``, as a reverse proxy on this host reports it (uvicorn
    believes X-Forwarded-For from 127.0.0.1)."""
    return client.post(
        "/signin",
        data={"email": email, "password": password},
        headers={"X-Forwarded-For": address},
    )


def test_an_ipv6_client_cannot_dodge_the_address_limit_within_its_64(
    serve: Callable[..., App], browser: Browser
) -> None:
    """A host is given a whole /64 and picks any address in it at will: counting each
    address alone would give one client 2**64 times the limit, across every account."""
    app = serve(sign_in_rate_limit=LIMIT)
    client = browser(app)
    for n in range(6):  # six addresses of one /64, spread over accounts
        address = f"2001:db8:1:2:{n:x}::{n + 1:x}"
        assert attempt_from(client, address, f"user{n}@example.com", "guess").status_code == 400
    refused = attempt_from(client, "2001:db8:1:2:ffff:ffff:ffff:fffe", "bob@example.com", PASSWORD)
    assert refused.status_code == 429
    assert attempt_from(client, "2001:db8:1:3::1", "bob@example.com", PASSWORD).text == "welcome"


def test_an_ipv4_address_counts_the_same_written_as_ipv6(
    serve: Callable[..., App], browser: Browser
) -> None:
    """A dual-stack server reports an IPv4 client as ``::ffff:a.b.c.d``: one client, one
    count, however it is written."""
    app = serve(sign_in_rate_limit=LIMIT)
    client = browser(app)
    for n in range(6):
        address = "203.0.113.7" if n % 2 else "::ffff:203.0.113.7"
        assert attempt_from(client, address, f"user{n}@example.com", "guess").status_code == 400
    assert attempt_from(client, "203.0.113.7", "bob@example.com", PASSWORD).status_code == 429
    assert attempt_from(client, "::ffff:203.0.113.8", "bob@example.com", PASSWORD).text == "welcome"


def counted(app: App) -> list[str]:
    """The keys the attempts table holds a count for (a kind's own row, saying when its
    passed counts were last deleted, is no count: its key has no ``:``)."""
    with app.db.read() as conn:
        keys = conn.execute(select(throttle.attempts_table.c.key)).scalars()
        return [key for key in keys if ":" in key]


def test_counts_whose_window_passed_are_deleted_not_kept_for_ever(
    serve: Callable[..., App], browser: Browser, clock: Clock
) -> None:
    """Every account name tried leaves a row counting it. Kept after its window they
    would let an unauthenticated client grow the database by a row for every name it
    tries, for ever; once the window has passed they count nothing and are deleted."""
    app = serve(sign_in_rate_limit=LIMIT)
    client = browser(app)
    for n in range(5):
        assert attempt(client, f"user{n}@example.com", "guess").status_code == 400
    assert len(counted(app)) == 6  # five accounts and one address
    clock.advance(10 * 60)
    assert attempt(client, "ada@example.com", "guess").status_code == 400
    assert sorted(counted(app)) == sorted(
        [throttle.account_key("ada@example.com"), throttle.address_key("127.0.0.1")]
    )


def test_a_success_does_not_count_as_a_failure(serve: Callable[..., App], browser: Browser) -> None:
    app = serve(sign_in_rate_limit=LIMIT)
    client = browser(app)
    for _ in range(10):
        assert attempt(client, "ada@example.com", PASSWORD).text == "welcome"


def test_parallel_guesses_cannot_pass_the_limit(
    serve: Callable[..., App], browser: Browser
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    app = serve(sign_in_rate_limit=LIMIT)
    with ThreadPoolExecutor(8) as pool:
        statuses = list(
            pool.map(
                lambda _: (
                    httpx.post(
                        app.origin + "/signin",
                        data={"email": "ada@example.com", "password": "guess"},
                        headers={"Origin": app.origin},
                        verify=TLS,
                    ).status_code
                ),
                range(8),
            )
        )
    assert statuses.count(400) == 3
    assert statuses.count(429) == 5
