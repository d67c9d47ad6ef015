"""docs/deploy.md's promise on forwarded headers: believed from the trusted proxy only.

The client address is what the sign-in limits count per client. From the
addresses in FORWARDED_ALLOW_IPS (default 127.0.0.1) ``X-Forwarded-For``
names the client; from anyone else it is ignored, so a client cannot choose
a fresh address for every guess.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import LIGHT, Server, free_port, write_app

# Every guess is checked against a light hash (tests.support.LIGHT), 0.5 ms, where the
# framework's dummy for an unknown account costs 0.2 s of CPU to make and to check.
ACTIONS = {
    "signin.POST.py": f"""
        from rastrillo import sessions

        def handle(ctx):
            try:
                sessions.check_password(ctx, ctx.form["email"], "wrong", {LIGHT.hash("right")!r})
            except sessions.TooManyAttempts:
                return ctx.text("slow down", status=429)
            return ctx.text("no", status=400)
    """,
}
LIMITS = "sign_in_rate_limit=rastrillo.sessions.RateLimit(per_account=100, per_address=2),"


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    return write_app(tmp_path / "app", ACTIONS, extra=LIMITS)


def start(app_dir: Path, env: dict[str, str]) -> Server:
    port = free_port()
    return Server(app_dir, ["--addr", f"127.0.0.1:{port}"], f"http://127.0.0.1:{port}", env=env)


def guess(server: Server, n: int, forwarded_for: str) -> int:
    with server.client(headers={"Origin": server.base_url}) as c:
        return c.post(
            "/signin",
            data={"email": f"user{n}@example.com"},
            headers={"X-Forwarded-For": forwarded_for},
        ).status_code


def test_behind_a_proxy_on_the_same_host_the_forwarded_client_is_counted(app_dir):
    server = start(app_dir, {})  # the test's client stands for a proxy on 127.0.0.1
    try:
        assert [guess(server, n, "203.0.113.7") for n in range(3)] == [400, 400, 429]
        assert guess(server, 3, "203.0.113.8") == 400  # another client: its own count
    finally:
        assert server.stop() == 0


def test_forwarded_headers_from_an_untrusted_address_are_ignored(app_dir):
    server = start(app_dir, {"FORWARDED_ALLOW_IPS": "10.0.0.5"})
    try:
        # A fresh claimed address on every guess: all still count against 127.0.0.1.
        statuses = [guess(server, n, f"203.0.113.{n}") for n in range(3)]
        assert statuses == [400, 400, 429]
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("allow", [None, "*"])
def test_behind_a_proxy_on_a_unix_socket_the_client_is_the_address_the_proxy_added(
    app_dir: Path, tmp_path: Path, allow: str | None
) -> None:
    """Only the proxy can reach the socket, and nginx's ``$proxy_add_x_forwarded_for``
    appends the address it saw to whatever X-Forwarded-For the client sent. Counted by
    the first entry (uvicorn's FORWARDED_ALLOW_IPS='*', as this page once advised), a
    client escapes every per-address limit by writing a fresh one each time; counted as
    nobody's address (uvicorn's default on a socket), one client locks out everyone."""
    origin = "http://tickets.example"
    sock = str(tmp_path / "app.sock")
    env = {"RASTRILLO_ORIGIN": origin, **({"FORWARDED_ALLOW_IPS": allow} if allow else {})}
    server = Server(app_dir, ["--socket", sock], origin, uds=sock, env=env)
    try:
        statuses = [guess(server, n, f"198.51.100.{n}, 203.0.113.7") for n in range(3)]
        assert statuses == [400, 400, 429]
        assert guess(server, 3, "203.0.113.8") == 400  # another client: its own count
    finally:
        assert server.stop() == 0
