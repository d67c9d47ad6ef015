"""The OAuth authorization server over real HTTP (uvicorn on loopback), as client and attacker.

Each attack is refused and leaves nothing granted: no consent request, no code,
no grant, or a revoked one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hashlib
import json
import logging
import re
import secrets
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import MetaData, event, select, update

from rastrillo.agents import grants, oauth
from rastrillo.agents.mcp import APPROVAL_META
from rastrillo.agents.oauth.authority import Authority
from rastrillo.agents.tables import authorizations_table, clients_table
from rastrillo.app import App
from rastrillo.routing import (
    CONSENT_PATH,
    OAUTH_AUTHORIZE_PATH,
    OAUTH_REGISTER_PATH,
    OAUTH_REVOKE_PATH,
    OAUTH_TOKEN_PATH,
)
from rastrillo.sessions import cookie_name, create_session
from rastrillo.testing import ManualClock, live_server
from tests.support import TLS, Relay
from tests.tools._tools_app import app_options

LOOPBACK_REDIRECT = "http://127.0.0.1:9999/callback"
WEB_REDIRECT = "https://app.example/oauth/cb"
USER = "7"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


class Server:
    """The tools test app with MCP on, served; ``http`` is a client program (no cookies)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.origin = app.origin
        self.resource = app.origin + "/mcp"
        self.http = httpx.Client(verify=TLS, base_url=app.origin)

    def register(self, *uris: str, name: str = "Test client", **extra: object) -> str:
        body = {"redirect_uris": list(uris or (LOOPBACK_REDIRECT,)), "client_name": name, **extra}
        response = self.http.post(OAUTH_REGISTER_PATH, json=body)
        assert response.status_code == 201, response.text
        return response.json()["client_id"]

    def stored_before_names_were_checked(self, *uris: str, name: str) -> str:
        """A client under a name registration now refuses, as one registered before it
        did is stored: the consent page still marks each character of it."""
        client_id = self.register(*uris)
        table = clients_table
        with self.app.db.write() as conn:
            where = table.c.client_id == client_id
            info = json.loads(conn.execute(select(table.c.info).where(where)).scalar_one())
            info["client_name"] = name
            conn.execute(update(table).where(where).values(info=json.dumps(info)))
        return client_id

    def authorize(self, client_id: str, **params: str | list[str] | None) -> httpx.Response:
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": LOOPBACK_REDIRECT,
            "code_challenge_method": "S256",
            "state": "state-42",
            "resource": self.resource,
            **params,
        }
        return self.http.get(
            OAUTH_AUTHORIZE_PATH, params={k: v for k, v in query.items() if v is not None}
        )

    def consent_url(self, client_id: str, challenge: str, **params: str | None) -> str:
        response = self.authorize(client_id, code_challenge=challenge, **params)
        assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(self.origin + CONSENT_PATH + "?request=")
        return location

    def browser(self, user: str = USER, origin: str | None = None) -> httpx.Client:
        """A signed-in person's browser: the session cookie, and the Origin it sends."""
        client = httpx.Client(
            verify=TLS, base_url=self.origin, headers={"Origin": origin or self.origin}
        )
        client.cookies.set(cookie_name(self.origin), create_session(self.app.db, user))
        return client

    def answer(self, consent_url: str, decision: str = "allow", agent: str = "tester", **kw):
        browser = self.browser(**kw)
        assert browser.get(consent_url).status_code == 200
        request_id = query_of(consent_url)["request"]
        return browser.post(
            CONSENT_PATH, data={"request": request_id, "decision": decision, "agent": agent}
        )

    def code(self, client_id: str, challenge: str, **params: str | None) -> str:
        done = self.answer(self.consent_url(client_id, challenge, **params))
        assert done.status_code == 303, done.text
        return query_of(done.headers["location"])["code"]

    def token(self, **data: str | list[str]) -> httpx.Response:
        return self.http.post(OAUTH_TOKEN_PATH, data=data)

    def exchange(
        self, client_id: str, code: str, verifier: str, **extra: str | list[str]
    ) -> httpx.Response:
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": LOOPBACK_REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
            **extra,
        }
        return self.token(**data)

    def tokens(self, client_id: str | None = None) -> tuple[str, dict[str, str]]:
        """A client that went through the whole flow, and its tokens."""
        client_id = client_id or self.register()
        verifier, challenge = pkce()
        response = self.exchange(client_id, self.code(client_id, challenge), verifier)
        assert response.status_code == 200, response.text
        return client_id, response.json()

    def refresh(
        self, client_id: str, refresh_token: str, **extra: str | list[str]
    ) -> httpx.Response:
        return self.token(
            grant_type="refresh_token", refresh_token=refresh_token, client_id=client_id, **extra
        )

    def live(self, access_token: str) -> bool:
        return grants.authenticate(self.app.db, access_token) is not None

    def grants(self) -> list[grants.Grant]:
        return grants.list_grants(self.app.db, include_revoked=True)

    def live_grants(self) -> list[grants.Grant]:
        return grants.list_grants(self.app.db)

    def consent_requests(self) -> int:
        with self.app.db.read() as conn:
            return len(conn.execute(select(authorizations_table)).all())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with live_server(dataclasses.replace(app_options(tmp_path), mcp=True)) as app:
        yield Server(app)


@pytest.fixture
def stored(tmp_path: Path, db_url: str) -> Iterator[Server]:
    """For what the database must hold: the test runs on SQLite, then on PostgreSQL."""
    options = dataclasses.replace(app_options(tmp_path), mcp=True, db=db_url)
    with live_server(options) as app:
        yield Server(app)


# -- discovery and the happy path ------------------------------------------------------


def test_metadata_names_this_app_as_the_resources_authorization_server(server: Server):
    challenge = server.http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert challenge.status_code == 401
    pointer = f'resource_metadata="{server.origin}/.well-known/oauth-protected-resource"'
    assert pointer in challenge.headers["www-authenticate"]
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        resource = server.http.get(path).json()
        assert resource["resource"] == server.resource
        assert resource["authorization_servers"] == [server.origin]
    meta = server.http.get("/.well-known/oauth-authorization-server").json()
    assert meta["issuer"] == server.origin
    assert meta["authorization_endpoint"] == server.origin + OAUTH_AUTHORIZE_PATH
    assert meta["token_endpoint"] == server.origin + OAUTH_TOKEN_PATH
    assert meta["registration_endpoint"] == server.origin + OAUTH_REGISTER_PATH
    assert meta["revocation_endpoint"] == server.origin + OAUTH_REVOKE_PATH
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["response_types_supported"] == ["code"]
    assert meta["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert meta["token_endpoint_auth_methods_supported"] == ["none"]
    assert server.http.post("/.well-known/oauth-authorization-server").status_code == 405


def test_allow_makes_a_grant_for_the_signed_in_user_as_the_named_agent(stored: Server):
    client_id = stored.register(name="Desk Assistant")
    verifier, challenge = pkce()
    consent = stored.consent_url(
        client_id, challenge, redirect_uri="http://127.0.0.1:5123/callback"
    )
    done = stored.answer(consent, agent="desk")
    assert done.status_code == 303
    location = done.headers["location"]
    assert location.startswith("http://127.0.0.1:5123/callback?")  # the port it asked for
    answer = query_of(location)
    assert answer["state"] == "state-42"
    assert answer["iss"] == stored.origin
    assert stored.live_grants() == []  # nothing granted until the code is traded
    response = stored.exchange(
        client_id, answer["code"], verifier, redirect_uri="http://127.0.0.1:5123/callback"
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert response.headers["cache-control"] == "no-store"
    [grant] = stored.live_grants()
    assert (grant.user_id, grant.agent, grant.client, grant.client_id) == (
        USER,
        "desk",
        "Desk Assistant",
        client_id,
    )
    used = grants.authenticate(stored.app.db, body["access_token"])
    assert used is not None and used.id == grant.id


def test_refresh_rotates_and_a_replayed_refresh_token_revokes_the_grant(stored: Server):
    client_id, first = stored.tokens()
    rotated = stored.refresh(client_id, first["refresh_token"])
    assert rotated.status_code == 200, rotated.text
    second = rotated.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert stored.live(second["access_token"])
    replay = stored.refresh(client_id, first["refresh_token"])
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    assert not stored.live(second["access_token"])
    assert stored.refresh(client_id, second["refresh_token"]).status_code == 400
    assert stored.live_grants() == []


def test_revocation_takes_effect_on_the_next_call(stored: Server):
    for kind in ("access_token", "refresh_token"):
        client_id, tokens = stored.tokens()
        assert stored.live(tokens["access_token"])
        done = stored.http.post(
            OAUTH_REVOKE_PATH, data={"token": tokens[kind], "client_id": client_id}
        )
        assert done.status_code == 200
        assert not stored.live(tokens["access_token"])
        assert stored.refresh(client_id, tokens["refresh_token"]).status_code == 400
    assert stored.live_grants() == []


def test_another_client_cannot_revoke_or_refresh_a_grant(server: Server):
    client_id, tokens = server.tokens()
    other = server.register()
    server.http.post(OAUTH_REVOKE_PATH, data={"token": tokens["access_token"], "client_id": other})
    server.http.post(OAUTH_REVOKE_PATH, data={"token": tokens["refresh_token"], "client_id": other})
    assert server.live(tokens["access_token"])
    assert server.refresh(other, tokens["refresh_token"]).status_code == 400
    assert server.refresh(client_id, tokens["refresh_token"]).status_code == 200


def test_tokens_and_codes_are_stored_only_as_digests(stored: Server):
    client_id = stored.register()
    verifier, challenge = pkce()
    code = stored.code(client_id, challenge)
    tokens = stored.exchange(client_id, code, verifier).json()
    secrets_given = [code, tokens["access_token"], tokens["refresh_token"]]
    tables = MetaData()
    tables.reflect(stored.app.db.engine)
    with stored.app.db.read() as conn:
        stored = " ".join(
            str(value)
            for table in tables.sorted_tables
            for row in conn.execute(select(table))
            for value in row
        )
    for value in secrets_given:
        assert value not in stored
        assert hashlib.sha256(value.encode()).hexdigest() in stored


# -- PKCE, grant types -------------------------------------------------------------------


def test_pkce_is_required_and_s256_only(server: Server):
    client_id = server.register()
    verifier, _ = pkce()
    missing = server.authorize(client_id)
    plain = server.authorize(client_id, code_challenge=verifier, code_challenge_method="plain")
    not_a_digest = server.authorize(client_id, code_challenge="x" * 42 + "!")
    for refused in (missing, plain, not_a_digest):
        assert refused.status_code == 400
        assert refused.json()["error"] == "invalid_request"
    assert server.consent_requests() == 0


def test_a_wrong_verifier_gets_nothing(server: Server):
    client_id = server.register()
    verifier, challenge = pkce()
    code = server.code(client_id, challenge)
    for wrong in (pkce()[0], challenge, verifier + "x"):
        refused = server.exchange(client_id, code, wrong)
        assert refused.status_code == 400
        assert refused.json()["error"] == "invalid_grant"
    missing = server.token(
        grant_type="authorization_code",
        code=code,
        client_id=client_id,
        redirect_uri=LOOPBACK_REDIRECT,
    )
    assert missing.status_code == 400
    assert server.grants() == []


def test_implicit_and_password_grants_do_not_exist(server: Server):
    client_id = server.register()
    _, challenge = pkce()
    implicit = server.authorize(client_id, response_type="token", code_challenge=challenge)
    assert implicit.json()["error"] == "unsupported_response_type"
    for grant_type in ("password", "client_credentials", "implicit"):
        refused = server.token(
            grant_type=grant_type, client_id=client_id, username="a", password="b"
        )
        assert refused.status_code == 400
    for body in (
        {"grant_types": ["authorization_code", "password"]},
        {"grant_types": ["implicit"]},
        {"response_types": ["code", "token"]},
    ):
        response = server.http.post(
            OAUTH_REGISTER_PATH, json={"redirect_uris": [LOOPBACK_REDIRECT], **body}
        )
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_client_metadata"
    assert server.consent_requests() == 0
    assert server.grants() == []


# -- codes ------------------------------------------------------------------------------


def test_a_code_used_twice_is_refused_and_revokes_what_it_gave(stored: Server):
    client_id = stored.register()
    verifier, challenge = pkce()
    code = stored.code(client_id, challenge)
    first = stored.exchange(client_id, code, verifier)
    assert first.status_code == 200
    again = stored.exchange(client_id, code, verifier)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    assert not stored.live(first.json()["access_token"])
    assert stored.live_grants() == []


def meet_before(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """Each of two requests reaches ``Authority.<method>`` with what it presented loaded
    (found live), and neither goes on until both have: "at once", forced, not left to
    how the threads happen to run."""
    both = asyncio.Barrier(2)
    original = getattr(Authority, method)

    async def met(self: Authority, *args: object) -> object:
        async with asyncio.timeout(30):  # a bound on a hang: the other never came
            await both.wait()
        return await original(self, *args)

    monkeypatch.setattr(Authority, method, met)


def test_of_two_exchanges_of_one_code_at_once_neither_keeps_a_grant(
    stored: Server, monkeypatch: pytest.MonkeyPatch
):
    client_id = stored.register()
    verifier, challenge = pkce()
    code = stored.code(client_id, challenge)
    meet_before(monkeypatch, "exchange_authorization_code")
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: stored.exchange(client_id, code, verifier), range(2)))
    # Both found the code unused; one redeems it, and whatever it got is revoked with the grant.
    assert sorted(a.status_code for a in answers) in ([200, 400], [400, 400])
    assert stored.live_grants() == []


def test_of_two_refreshes_with_one_token_at_once_neither_keeps_the_grant(
    stored: Server, monkeypatch: pytest.MonkeyPatch
):
    client_id, tokens = stored.tokens()
    meet_before(monkeypatch, "exchange_refresh_token")
    with ThreadPoolExecutor(2) as pool:
        answers = list(
            pool.map(lambda _: stored.refresh(client_id, tokens["refresh_token"]), range(2))
        )
    # Both found the token live; one rotates it, and whatever it got is revoked with the grant.
    assert sorted(a.status_code for a in answers) in ([200, 400], [400, 400])
    assert stored.live_grants() == []


def test_a_code_from_another_client_is_refused(server: Server):
    victim = server.register()
    thief = server.register()
    verifier, challenge = pkce()
    code = server.code(victim, challenge)
    stolen = server.exchange(thief, code, verifier)
    assert stolen.status_code == 400
    assert stolen.json()["error"] == "invalid_grant"
    assert server.grants() == []
    assert server.exchange(victim, code, verifier).status_code == 200


def test_an_expired_code_is_refused(stored: Server):
    client_id = stored.register()
    verifier, challenge = pkce()
    code = stored.code(client_id, challenge)
    table = authorizations_table
    with stored.app.db.write() as conn:
        conn.execute(update(table).values(expires_at=table.c.created_at))
    refused = stored.exchange(client_id, code, verifier)
    assert refused.status_code == 400
    assert stored.grants() == []


# -- redirect URIs and resource ------------------------------------------------------------


@pytest.mark.parametrize(
    "asked",
    [
        "http://127.0.0.1:9999/callback/",  # path
        "http://127.0.0.1:9999/callback2",
        "http://127.0.0.1:9999/Callback",  # case
        "http://127.0.0.1:9999/callback?next=x",
        "https://127.0.0.1:9999/callback",  # scheme
        "http://localhost:9999/callback",  # host
        "http://127.0.0.2:9999/callback",
        "http://evil.example:9999/callback",
        "http://127.0.0.1:9999@evil.example/callback",
        "https://app.example/oauth/CB",  # case
        "https://app.example/oauth/cb/../cb2",
        "http://app.example/oauth/cb",  # scheme
        "https://app.example:8443/oauth/cb",  # port, not loopback
        "https://evil.example/oauth/cb",  # host
        "https://app.example.evil.example/oauth/cb",
        "https://app.example@evil.example/oauth/cb",
    ],
)
def test_a_redirect_uri_not_registered_is_refused_without_redirecting(server: Server, asked: str):
    client_id = server.register(LOOPBACK_REDIRECT, WEB_REDIRECT)
    _, challenge = pkce()
    refused = server.authorize(client_id, redirect_uri=asked, code_challenge=challenge)
    assert refused.status_code == 400
    assert "location" not in refused.headers
    assert refused.json()["error"] == "invalid_request"
    assert server.consent_requests() == 0


def test_a_loopback_redirect_may_use_any_port_and_must_keep_it_at_the_token(server: Server):
    client_id = server.register()
    verifier, challenge = pkce()
    code = server.code(client_id, challenge, redirect_uri="http://127.0.0.1:40001/callback")
    changed = server.exchange(client_id, code, verifier)  # the registered port, not the one used
    assert changed.status_code == 400
    assert server.grants() == []
    done = server.exchange(
        client_id, code, verifier, redirect_uri="http://127.0.0.1:40001/callback"
    )
    assert done.status_code == 200


def test_a_redirect_uri_is_compared_in_the_url_standards_normal_form(server: Server):
    client_id = server.register(WEB_REDIRECT, "http://localhost:8080/cb", "http://[::1]/cb")
    _, challenge = pkce()
    for asked, goes_to in (
        ("HTTPS://APP.EXAMPLE/oauth/cb", WEB_REDIRECT),  # the same URL, spelled otherwise
        ("https://app.example:443/oauth/cb", WEB_REDIRECT),
        ("http://localhost:51234/cb", "http://localhost:51234/cb"),  # loopback, any port
        ("http://[::1]:40000/cb", "http://[::1]:40000/cb"),
    ):
        done = server.answer(server.consent_url(client_id, challenge, redirect_uri=asked))
        assert done.status_code == 303
        assert done.headers["location"].startswith(goes_to + "?code="), asked


def test_registration_takes_only_safe_redirect_uris(server: Server):
    for uri in (
        "http://app.example/cb",
        "javascript:alert(1)",
        "data:text/html,hi",
        "file:///etc/passwd",
        "https://app.example/cb#frag",
        "https://user:pw@app.example/cb",
        "myapp:/cb",
    ):
        response = server.http.post(OAUTH_REGISTER_PATH, json={"redirect_uris": [uri]})
        assert response.status_code == 400, uri
        assert response.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")
    ok = server.http.post(
        OAUTH_REGISTER_PATH,
        json={"redirect_uris": ["com.example.app:/cb", "http://[::1]/cb", WEB_REDIRECT]},
    )
    assert ok.status_code == 201
    body = ok.json()
    assert body["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in body


@pytest.fixture
def clocked(tmp_path: Path, db_url: str) -> Iterator[tuple[Server, ManualClock]]:
    """On a clock that moves when told to; on SQLite, then on PostgreSQL."""
    clock = ManualClock()
    options = dataclasses.replace(app_options(tmp_path), mcp=True, clock=clock, db=db_url)
    with live_server(options) as app:
        yield Server(app), clock


def clients(server: Server) -> set[str]:
    with server.app.db.read() as conn:
        return set(conn.execute(select(clients_table.c.client_id)).scalars())


def too_many(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.json()["error"] == "too_many_requests"
    assert 0 < int(response.headers["retry-after"]) <= oauth.RATE_WINDOW.total_seconds()


def test_registrations_are_rate_limited_per_address(clocked: tuple[Server, ManualClock]):
    server, clock = clocked
    made = {server.register() for _ in range(oauth.REGISTRATIONS_PER_ADDRESS)}
    too_many(server.http.post(OAUTH_REGISTER_PATH, json={"redirect_uris": [LOOPBACK_REDIRECT]}))
    assert clients(server) == made  # the refused one stored nothing
    # Another address has its own count (all of 127.0.0.0/8 is loopback).
    elsewhere = httpx.HTTPTransport(local_address="127.0.0.2", verify=TLS)
    with httpx.Client(base_url=server.origin, transport=elsewhere) as other:
        body = {"redirect_uris": [LOOPBACK_REDIRECT]}
        assert other.post(OAUTH_REGISTER_PATH, json=body).status_code == 201
    clock.advance(oauth.RATE_WINDOW.total_seconds())
    server.register()  # a new window


def test_a_registration_is_json_so_no_page_sends_one_without_cors(server: Server):
    """RFC 7591 3.1. A page may POST a form or a ``text/plain`` body anywhere unasked (a
    "simple" request); ``application/json`` from another origin needs a CORS preflight,
    after which the browser sends the page's own origin, which its count is kept by."""
    body = '{"redirect_uris": ["http://127.0.0.1:9999/callback"]}'
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        for _ in range(oauth.REGISTRATIONS_PER_ADDRESS + 1):
            refused = server.http.post(OAUTH_REGISTER_PATH, content=body, headers=headers)
            assert refused.status_code == 400, content_type
            assert refused.json()["error"] == "invalid_client_metadata"
    assert clients(server) == set()
    typed = {"Content-Type": "Application/JSON; charset=utf-8"}
    assert server.http.post(OAUTH_REGISTER_PATH, content=body, headers=typed).status_code == 201
    server.register()  # nothing refused was counted


def test_a_pages_registrations_spend_its_own_origins_count_only(server: Server):
    body = {"redirect_uris": [LOOPBACK_REDIRECT]}

    def from_page(origin: str) -> httpx.Response:
        return server.http.post(OAUTH_REGISTER_PATH, json=body, headers={"Origin": origin})

    hostile = "https://hostile.example"
    for _ in range(oauth.REGISTRATIONS_PER_ORIGIN):
        assert from_page(hostile).status_code == 201
    too_many(from_page(hostile))
    # The person's own client, a program at the same address, and browser-based clients
    # on other origins, each still register.
    server.register()
    assert from_page("http://localhost:6274").status_code == 201
    assert from_page("https://inspector.example").status_code == 201
    # A program that makes up an Origin for each request is held to the pages' ceiling,
    # for origins on the web and, apart, for origins on this machine.
    made_up = (f"https://made-up-{n}.example" for n in range(oauth.REGISTRATIONS_FROM_PAGES))
    answers = [from_page(origin).status_code for origin in made_up]
    assert answers.count(201) == oauth.REGISTRATIONS_FROM_PAGES - oauth.REGISTRATIONS_PER_ORIGIN - 1
    too_many(from_page("https://one-more.example"))
    ports = range(1, oauth.REGISTRATIONS_FROM_PAGES + 1)
    answers = [from_page(f"http://127.0.0.1:{port}").status_code for port in ports]
    assert answers.count(201) == oauth.REGISTRATIONS_FROM_PAGES - 1
    too_many(from_page("http://localhost:1"))
    server.register()  # and still not the programs'


def test_a_site_of_many_origins_cannot_hold_up_a_browser_based_client_on_this_machine(
    server: Server,
):
    """A site the person opens sets pages of several of its own origins at the app, each
    registering up to its origin's count, until all pages together are at the ceiling. The
    MCP Inspector, a page on the person's own machine (a loopback origin, which no page on
    the web has), still registers; so does the person's MCP client, a program."""
    body = {"redirect_uris": [LOOPBACK_REDIRECT]}

    def from_page(origin: str) -> httpx.Response:
        return server.http.post(OAUTH_REGISTER_PATH, json=body, headers={"Origin": origin})

    site = oauth.REGISTRATIONS_FROM_PAGES // oauth.REGISTRATIONS_PER_ORIGIN
    for n in range(site):
        for _ in range(oauth.REGISTRATIONS_PER_ORIGIN):
            assert from_page(f"https://{n}.hostile.example").status_code == 201
    too_many(from_page(f"https://{site}.hostile.example"))
    for inspector in ("http://localhost:6274", "http://127.0.0.1:6274", "http://[::1]:6274"):
        assert from_page(inspector).status_code == 201
    server.register()


def test_a_registration_nobody_went_on_with_is_forgotten_after_a_day(
    clocked: tuple[Server, ManualClock],
):
    server, clock = clocked
    granted, tokens = server.tokens()
    asked = server.register()
    server.consent_url(asked, pkce()[1])  # an authorization request, never answered
    unused = {server.register() for _ in range(3)}
    clock.advance(23 * 3600)
    recent = server.register()
    assert unused <= clients(server)  # not yet a day
    clock.advance(3600 + 1)
    latest = server.register()
    assert clients(server) == {granted, asked, recent, latest}
    # The granted client goes on as before: its refresh token still works.
    assert server.refresh(granted, tokens["refresh_token"]).status_code == 200


def test_authorization_requests_are_rate_limited_per_client(server: Server):
    client_id = server.register()
    _, challenge = pkce()
    for _ in range(oauth.AUTHORIZATIONS_PER_CLIENT):
        assert server.authorize(client_id, code_challenge=challenge).status_code == 302
    refused = server.authorize(client_id, code_challenge=challenge)
    too_many(refused)
    assert "location" not in refused.headers
    assert server.consent_requests() == oauth.AUTHORIZATIONS_PER_CLIENT
    # Another client at the same address has its own count.
    server.consent_url(server.register(), challenge)


def test_a_refused_authorize_request_is_counted_against_no_one(server: Server):
    """A page can load the authorize endpoint as often as it likes (``<img src>``): only a
    request that names a registered client and a redirect URI it registered, and is
    otherwise valid, is counted, and then against that client alone."""
    client_id = server.register()
    _, challenge = pkce()
    for _ in range(oauth.AUTHORIZATIONS_PER_CLIENT + 1):
        for params in (
            {"client_id": "00000000-0000-4000-8000-000000000000"},
            {"client_id": "nonsense"},
            {"client_id": client_id, "redirect_uri": "http://evil.example/cb"},
            {"client_id": client_id, "resource": "https://evil.example/mcp"},
            {"client_id": client_id, "code_challenge": "short"},
        ):
            assert server.authorize(**{"code_challenge": challenge, **params}).status_code == 400
    assert server.consent_requests() == 0
    server.consent_url(client_id, challenge)


@contextlib.contextmanager
def write_locked(server: Server) -> Iterator[None]:
    """Another process holds the app's SQLite write lock past a short busy timeout: reads
    go on, every write waits and gives up."""
    db = server.app.db
    event.listen(db.engine, "connect", lambda conn, _r: conn.execute("PRAGMA busy_timeout=50"))
    db.engine.dispose()  # new connections, with the short timeout
    holder = sqlite3.connect(db.engine.url.database or "", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.rollback()
        holder.close()


def outage_is_503(server: Server, outage: contextlib.AbstractContextManager[object], caplog):
    """During ``outage`` every OAuth endpoint answers 503 with Retry-After, logged as one
    warning with no traceback; after it the same requests go through, none spent by it."""
    client_id, tokens = server.tokens()
    verifier, challenge = pkce()
    done = server.answer(server.consent_url(client_id, challenge), agent="second")
    code = query_of(done.headers["location"])["code"]
    with outage:
        for response in (
            server.http.post(OAUTH_REGISTER_PATH, json={"redirect_uris": [LOOPBACK_REDIRECT]}),
            server.authorize(client_id, code_challenge=challenge),
            server.exchange(client_id, code, verifier),
            server.refresh(client_id, tokens["refresh_token"]),
            server.http.post(
                OAUTH_REVOKE_PATH, data={"token": tokens["access_token"], "client_id": client_id}
            ),
        ):
            assert response.status_code == 503, (response.request.url, response.text)
            assert int(response.headers["retry-after"]) > 0
            assert "location" not in response.headers
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert any(r.getMessage().startswith("database unavailable") for r in caplog.records)
    server.consent_url(client_id, challenge)
    assert server.exchange(client_id, code, verifier).status_code == 200
    assert server.refresh(client_id, tokens["refresh_token"]).status_code == 200


def test_every_oauth_endpoint_answers_a_locked_database_503_with_retry_after(
    server: Server, caplog: pytest.LogCaptureFixture
):
    """A database that cannot write for a moment is answered 503 with Retry-After, as every
    page of the app is: not the MCP SDK's catch-all (authorize said 400 ``server_error``,
    "an unexpected error", to a client that should simply try again), nor a 500 with a
    traceback (registration, token, revocation)."""
    outage_is_503(server, write_locked(server), caplog)


@pytest.mark.postgres
def test_every_oauth_endpoint_answers_postgresql_gone_503_with_retry_after(
    tmp_path: Path, relayed_url: tuple[str, Relay], caplog: pytest.LogCaptureFixture
):
    """PostgreSQL out of reach: no read answers either (the client's own row)."""
    url, relay = relayed_url
    with live_server(dataclasses.replace(app_options(tmp_path), mcp=True, db=url)) as app:
        server = Server(app)

        @contextlib.contextmanager
        def cut() -> Iterator[None]:
            relay.cut()
            try:
                yield
            finally:
                relay.mend()

        outage_is_503(server, cut(), caplog)


def test_a_registration_too_big_to_keep_is_refused(server: Server):
    many = [f"http://127.0.0.1:{9000 + n}/cb{n}" for n in range(11)]
    refused = server.http.post(OAUTH_REGISTER_PATH, json={"redirect_uris": many})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_redirect_uri"
    huge = {"redirect_uris": [LOOPBACK_REDIRECT], "client_uri": "https://app.example/" + "x" * 9000}
    refused = server.http.post(OAUTH_REGISTER_PATH, json=huge)
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_client_metadata"
    assert clients(server) == set()
    server.register(*many[:10])  # ten is fine


def test_an_authorize_request_too_big_to_keep_is_refused(server: Server):
    """A request's ``state`` is stored with it, and a URL may be 64 KiB: at 20 requests an
    hour per client, and a client registered per request, a program would store over 60
    times what a client's requests take. A state past ``oauth.STATE_MAX`` characters is
    refused to the person before anything is stored or counted."""
    client_id = server.register()
    _, challenge = pkce()
    for _ in range(oauth.AUTHORIZATIONS_PER_CLIENT):
        refused = server.authorize(client_id, code_challenge=challenge, state="s" * 60_000)
        assert refused.status_code == 400 and "location" not in refused.headers
        assert refused.json()["error"] == "invalid_request"
    assert server.consent_requests() == 0
    server.consent_url(client_id, challenge, state="s" * oauth.STATE_MAX)


def test_a_long_client_name_is_refused(server: Server):
    response = server.http.post(
        OAUTH_REGISTER_PATH, json={"redirect_uris": [LOOPBACK_REDIRECT], "client_name": "x" * 101}
    )
    assert response.status_code == 400


@pytest.mark.parametrize(
    "name",
    [
        "Claude Code\u202e",  # a bidi override (the rule no tool arg may break either)
        "\u202eedoC edualC",
        "Claude\x1b[2J Code",  # a control character
        "Claude\u200b Code",  # invisible: a zero-width space
        "Claude\u2800Code",  # drawn blank: the braille pattern blank
        "Claude Code\u3164",  # a Hangul filler, shown as nothing
        "Claude\nCode",
        " Claude Code",  # a space where nothing shows where it ends
        "Cl\u0430ude Code",  # a Cyrillic a, drawn as the ASCII one
        "Claude C\uff4fde",  # a fullwidth o
        "Claude Code" + "\u0316" * 3,  # combining marks stacked over the lines around it
    ],
)
def test_a_client_name_made_to_pass_for_another_is_refused_at_registration(
    server: Server, name: str
):
    """A client names itself, and the consent page shows the name: one holding a character
    no tool arg may hold, one that shows as nothing, or one drawn as an ASCII one, is made
    to read as another name (or to hide what follows it). It is refused at registration,
    naming the character, as a tool call's value is."""
    refused = server.http.post(
        OAUTH_REGISTER_PATH, json={"redirect_uris": [LOOPBACK_REDIRECT], "client_name": name}
    )
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["error"] == "invalid_client_metadata"
    assert re.fullmatch(r"client_name holds U\+[0-9A-F]{4,6}, .+", body["error_description"])
    assert clients(server) == set()


@pytest.mark.parametrize(
    "name", ["Claude Code", "Caf\u00e9 Desk", "\u041a\u043b\u043e\u0434", "\u6771\u4eac Agent"]
)
def test_a_client_name_as_people_write_it_is_taken(server: Server, name: str):
    """A name in one script, accented letters, a plain space between words: as written."""
    client_id = server.register(name=name)
    html = server.browser().get(server.consent_url(client_id, pkce()[1])).text
    assert f'<span class="client">{name}</span>' in html


def test_resource_must_be_this_apps_mcp_endpoint(server: Server):
    client_id = server.register()
    verifier, challenge = pkce()
    for wrong in ("https://evil.example/mcp", server.origin + "/mcp/", server.origin):
        refused = server.authorize(client_id, code_challenge=challenge, resource=wrong)
        assert refused.json()["error"] == "invalid_target"
    assert server.consent_requests() == 0
    code = server.code(client_id, challenge)
    refused = server.exchange(client_id, code, verifier, resource="https://evil.example/mcp")
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_target"
    assert server.grants() == []
    assert server.exchange(client_id, code, verifier).status_code == 200  # resource is optional


def test_a_resource_named_twice_or_a_refresh_for_another_is_refused(server: Server):
    """RFC 8707: ``resource`` names the resource a token is for, and may be sent more than
    once, asking for a token for each. This server issues tokens for its own ``/mcp``
    only, and the SDK reads one value of a repeated parameter (the last): a request naming
    another resource and then this one was taken, and its token, which the client meant
    for both, would be handed to the other resource too, which could replay it here. So
    ``resource`` sent twice is refused (``invalid_target``) at authorize, at the code's
    trade and at a refresh, as another resource alone is; a refused refresh spends
    nothing, and the client's next one, for this resource, works."""
    client_id = server.register()
    verifier, challenge = pkce()
    evil = "https://evil.example/mcp"
    for twice in ([evil, server.resource], [server.resource, server.resource]):
        refused = server.authorize(client_id, code_challenge=challenge, resource=twice)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == "invalid_target"
    assert server.consent_requests() == 0
    code = server.code(client_id, challenge)
    refused = server.exchange(client_id, code, verifier, resource=[evil, server.resource])
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_target"
    assert server.grants() == []
    traded = server.exchange(client_id, code, verifier)
    assert traded.status_code == 200, traded.text
    refresh_token = traded.json()["refresh_token"]
    for resource in (evil, server.origin, [evil, server.resource]):
        refused = server.refresh(client_id, refresh_token, resource=resource)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == "invalid_target"
    again = server.refresh(client_id, refresh_token, resource=server.resource)
    assert again.status_code == 200, again.text
    assert len(server.live_grants()) == 1


def test_a_refused_authorize_request_is_answered_to_the_person_never_sent_on(server: Server):
    """RFC 9700 4.11.2: anyone can register a client and its redirect URI, so an authorize
    request refused before any person answered it must not send the browser on to that
    URI. Else one link on this app's own address takes whoever opens it, signed in or not,
    to a site the link's author chose (an open redirector)."""
    phishing = "https://phish.example/login"
    client_id = server.register(phishing)
    verifier, challenge = pkce()
    for params, error in (
        ({"code_challenge": challenge, "resource": "https://evil.example/mcp"}, "invalid_target"),
        ({"code_challenge": challenge, "scope": "admin"}, "invalid_scope"),
        ({"code_challenge": verifier, "code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": challenge, "response_type": "token"}, "unsupported_response_type"),
        ({}, "invalid_request"),  # no challenge at all
    ):
        for redirect_uri in (phishing, None):  # named, or the one registered
            refused = server.authorize(client_id, redirect_uri=redirect_uri, **params)
            assert refused.status_code == 400, params
            assert "location" not in refused.headers
            assert refused.headers["cache-control"] == "no-store"
            assert refused.json()["error"] == error
            assert "phish.example" not in refused.text
    assert server.consent_requests() == 0
    # The person's own Deny, on the page that named where their browser goes, is sent on.
    denied = server.answer(
        server.consent_url(client_id, challenge, redirect_uri=phishing), decision="deny"
    )
    assert denied.headers["location"].startswith(phishing + "?error=access_denied&")


# -- the consent page --------------------------------------------------------------------


def test_the_consent_page_needs_a_signed_in_user(server: Server):
    client_id = server.register()
    consent = server.consent_url(client_id, pkce()[1])
    anonymous = httpx.Client(verify=TLS, base_url=server.origin, headers={"Origin": server.origin})
    shown = anonymous.get(consent)
    assert shown.status_code == 303
    sign_in = shown.headers["location"]
    assert sign_in.startswith("/signin?")
    assert query_of(sign_in)["next"] == consent.removeprefix(server.origin)
    request_id = query_of(consent)["request"]
    posted = anonymous.post(CONSENT_PATH, data={"request": request_id, "decision": "allow"})
    assert posted.status_code == 403
    assert oauth.pending(server.app.db, request_id) is not None


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://127.0.0.1:1"},  # another port of the same host
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Dest": "iframe"},  # a framed page
    ],
)
def test_a_consent_post_from_another_origin_or_a_frame_is_refused(server: Server, headers):
    client_id = server.register()
    consent = server.consent_url(client_id, pkce()[1])
    request_id = query_of(consent)["request"]
    browser = server.browser()
    response = browser.post(
        CONSENT_PATH,
        data={"request": request_id, "decision": "allow", "agent": "x"},
        headers=headers,
    )
    assert response.status_code == 403
    assert "location" not in response.headers
    assert oauth.pending(server.app.db, request_id) is not None


def test_a_client_name_with_markup_and_control_characters_is_shown_escaped(server: Server):
    name = 'Evil <script>alert(1)</script><img src=x onerror=alert(2)> "\x1b[31m\u202eoC edualC\n'
    client_id = server.stored_before_names_were_checked(name=name)
    consent = server.consent_url(client_id, pkce()[1])
    page = server.browser().get(consent)
    assert page.status_code == 200
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    html = page.text
    assert "<script>alert" not in html and "<img" not in html
    for raw in ("\x1b", "\u202e"):
        assert raw not in html
    shown = "Evil &lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"
    assert shown in html
    assert "U+001B</span>[31m<span" in html and "U+202E</span>oC edualC" in html
    assert 'title="line break"' in html
    assert 'value="evil-script-alert-1-script-img-src-x-onerror-alert-2' in html


def test_a_client_name_that_passes_for_another_is_marked_where_the_person_reads_it(
    server: Server,
):
    """``Claude`` spelled with a Cyrillic a (U+0430) is drawn as ``Claude``: each look-alike
    is shown with its code point, in the heading and the sentence, and escaped in the
    <title>."""
    client_id = server.stored_before_names_were_checked(name="Cl\u0430ude C\u043ede")
    html = server.browser().get(server.consent_url(client_id, pkce()[1])).text
    for char in "\u0430\u043e":
        mark = f'<span class="lookalike" title="not an ASCII character: U+{ord(char):04X}">'
        mark += f'{char}<span class="cp">U+{ord(char):04X}</span></span>'
        assert html.count(mark) == 2
    assert "<title>Connect Cl\\u0430ude C\\u043ede?</title>" in html


def test_a_client_name_piled_with_combining_marks_cannot_cover_where_the_browser_goes(
    server: Server,
):
    """Combining marks are drawn above and below their letter, stacked: forty of them on the
    last letter of a client's name reach down over the next line, where the page names the
    host the answer goes to, the one sign of a phishing client. Past two on one letter,
    each is shown as a labelled mark, as an invisible character is."""
    below = "".join(chr(0x0316 + i % 20) for i in range(40))  # marks drawn below the line
    client_id = server.stored_before_names_were_checked(
        "https://phish.example/cb", name="Claude Code" + below
    )
    consent = server.consent_url(client_id, pkce()[1], redirect_uri="https://phish.example/cb")
    html = server.browser().get(consent).text
    name = re.search(r'<h1>Connect <span class="client">(.*)</span> to your account\?</h1>', html)
    assert name is not None
    shown = name.group(1)
    assert shown.startswith('Claude Code\u0316\u0317<span class="hidden"')
    assert not re.search("[\u0300-\u036f]{3}", html)
    assert shown.count("U+0") == 2 * 38  # each of the other 38 as a mark: its label, its title
    assert "Claude Code\u0316\u0317\\u0318\\u0319" in html  # the <title>, as in a terminal


@pytest.mark.parametrize(
    ("redirect", "shown"),
    [
        (WEB_REDIRECT, "app.example"),
        ("http://[::1]:8123/cb", "[::1]:8123"),
        ("https://app.example:8443/cb", "app.example:8443"),
        ("com.evil.app:/cb", "com.evil.app:"),
        # An app's own scheme may carry what looks like a web host: the browser goes to the
        # app that claims the scheme, whatever follows it, so the page names the scheme.
        ("com.evil.app://app.example/oauth/cb", "com.evil.app:"),
        ("com.evil.app://app.example:443/oauth/cb", "com.evil.app:"),
        # A host with a Cyrillic a is named as the browser sends it: in ASCII, punycode.
        ("https://p\u0430ypal.com/cb", "xn--pypal-4ve.com"),
    ],
)
def test_the_consent_page_names_where_the_browser_really_goes(server: Server, redirect, shown):
    client_id = server.register(redirect, name="App Example")
    consent = server.consent_url(client_id, pkce()[1], redirect_uri=redirect)
    html = server.browser().get(consent).text
    goes = re.search(r"your browser goes to <strong>([^<]*)</strong>", html)
    assert goes is not None and goes.group(1) == shown, html
    done = server.answer(consent)
    assert done.status_code == 303
    host = urlsplit(redirect).hostname if redirect.startswith("https:") else None
    # A host as sent: in ASCII.
    sent = redirect.replace(host, shown.partition(":")[0]) if host else redirect
    assert done.headers["location"].startswith(sent + "?code=")


@pytest.mark.parametrize("redirect", ["claude.ai:/cb", "com.evil.app://claude.ai/cb"])
def test_an_apps_own_scheme_is_not_read_as_the_website_it_spells(server: Server, redirect):
    """A private-use scheme needs only a dot (RFC 8252 asks for a domain written backwards,
    but no one can check whose it is): ``claude.ai:`` is one. Named bare, "your browser
    goes to claude.ai:" read as the website; the answer goes to whichever app on the
    person's device opens such links. The page says so."""
    client_id = server.register(redirect, name="Claude")
    html = server.browser().get(server.consent_url(client_id, pkce()[1], redirect_uri=redirect))
    text = " ".join(re.sub(r"<[^>]*>", "", html.text).split())
    scheme = redirect.partition(":")[0]
    assert (
        f"your browser goes to {scheme}: (not a website: whichever app on your device "
        f"opens {scheme}: links): that, not the name, is the app you allow."
    ) in text, text


def test_a_client_named_after_another_is_not_offered_that_agents_name(server: Server):
    """Approvals and the audit log know an agent by its name. A client that calls itself
    after one the person already connected (``Claude Code``) must not be handed that
    agent's name by the page, or an approval given to one would be redeemable by the
    other's identical call, and the log could not tell them apart."""
    db = server.app.db
    grants.personal_token(db, user_id=USER, agent="claude-code")
    grants.personal_token(db, user_id=USER, agent="Claude-Code-2")  # read alike: taken too
    grants.personal_token(db, user_id="8", agent="claude-code-3")  # another user's: free
    revoked, _, _ = grants.personal_token(db, user_id=USER, agent="claude-code-4")
    grants.revoke(db, revoked.id)
    verifier, challenge = pkce()
    client_id = server.register(name="Claude Code")
    consent = server.consent_url(client_id, challenge)
    browser = server.browser()
    html = browser.get(consent).text
    offered = re.search(r'<input id="agent" name="agent" value="([^"]*)"', html)
    assert offered is not None and offered.group(1) == "claude-code-3", html
    # The person presses Allow with what the page offered.
    request_id = query_of(consent)["request"]
    done = browser.post(
        CONSENT_PATH,
        data={"request": request_id, "decision": "allow", "agent": offered.group(1)},
    )
    code = query_of(done.headers["location"])["code"]
    assert server.exchange(client_id, code, verifier).status_code == 200
    live = [g.agent for g in grants.list_grants(db, USER)]
    assert sorted(live) == ["Claude-Code-2", "claude-code", "claude-code-3"]
    # A name of 64 characters still gets a free one of at most 64.
    long_name = "x" * 64
    grants.personal_token(db, user_id=USER, agent=long_name)
    other = server.register(name=long_name)
    html = browser.get(server.consent_url(other, challenge)).text
    offered = re.search(r'<input id="agent" name="agent" value="([^"]*)"', html)
    assert offered is not None and offered.group(1) == "x" * 62 + "-2"


def test_a_client_cannot_act_as_the_tool_console(server: Server):
    """``agent:console`` is the tool console's: a client calling itself "Console" is
    offered another name, and the name is refused if typed, before any code is made."""
    verifier, challenge = pkce()
    client_id = server.register(name="Console")
    consent = server.consent_url(client_id, challenge)
    html = server.browser().get(consent).text
    offered = re.search(r'<input id="agent" name="agent" value="([^"]*)"', html)
    assert offered is not None and offered.group(1) == "console-2", html
    for typed in ("console", "Console"):
        again = server.answer(consent, agent=typed)
        assert again.status_code == 400
        assert "tool console" in again.text
    assert server.grants() == []
    done = server.answer(consent, agent="console-2")
    code = query_of(done.headers["location"])["code"]
    assert server.exchange(client_id, code, verifier).status_code == 200
    assert [g.agent for g in server.live_grants()] == ["console-2"]


def test_deny_sends_access_denied_and_the_request_cannot_be_allowed_after(server: Server):
    client_id = server.register()
    consent = server.consent_url(client_id, pkce()[1])
    denied = server.answer(consent, decision="deny")
    assert denied.status_code == 303
    answer = query_of(denied.headers["location"])
    assert answer == {
        "error": "access_denied",
        "error_description": "The user denied the request.",
        "state": "state-42",
        "iss": server.origin,
    }
    request_id = query_of(consent)["request"]
    late = server.browser().post(
        CONSENT_PATH, data={"request": request_id, "decision": "allow", "agent": "x"}
    )
    assert late.status_code == 400
    assert "This request has ended" in late.text
    assert server.grants() == []


def test_a_bad_agent_name_shows_the_page_again(server: Server):
    client_id = server.register()
    consent = server.consent_url(client_id, pkce()[1])
    for bad in ("", "has space", "-leading", "x" * 65, "new\nline", "ag<b>"):
        again = server.answer(consent, agent=bad)
        assert again.status_code == 400
        assert "An agent name is" in again.text
    assert server.answer(consent, agent="fine.agent-1").status_code == 303


def test_an_expired_consent_request_cannot_be_answered(server: Server):
    client_id = server.register()
    consent = server.consent_url(client_id, pkce()[1])
    with server.app.db.write() as conn:
        conn.execute(
            update(authorizations_table).values(expires_at=authorizations_table.c.created_at)
        )
    browser = server.browser()
    assert browser.get(consent).status_code == 400
    request_id = query_of(consent)["request"]
    late = browser.post(
        CONSENT_PATH, data={"request": request_id, "decision": "allow", "agent": "x"}
    )
    assert late.status_code == 400
    assert server.grants() == []


# -- one agent name, one live grant ----------------------------------------------------

CANCEL = "orders_id_cancel_post"
CANCEL_ARGS = {"id": "7", "reason": "dup"}


def connected(server: Server, name: str, agent: str) -> tuple[str, str]:
    """A client that went through the whole flow as ``agent``: its id and access token."""
    client_id = server.register(name=name)
    verifier, challenge = pkce()
    done = server.answer(server.consent_url(client_id, challenge), agent=agent)
    assert done.status_code == 303, done.text
    response = server.exchange(client_id, query_of(done.headers["location"])["code"], verifier)
    assert response.status_code == 200, response.text
    return client_id, response.json()["access_token"]


def call_tool(server: Server, token: str, tool: str, args: dict[str, str]) -> types.CallToolResult:
    """One ``tools/call`` over /mcp by the official Python client."""

    async def call() -> types.CallToolResult:
        http = httpx2.AsyncClient(
            verify=TLS, timeout=30, headers={"Authorization": f"Bearer {token}"}
        )
        async with (
            http,
            Client(
                streamable_http_client(server.resource, http_client=http), mode="legacy"
            ) as client,
        ):
            return await client.call_tool(tool, args)

    return anyio.run(call)


def approve(server: Server, url: str) -> str:
    """The person approves on the approval page, in their own browser; the page as shown."""
    with server.browser() as browser:
        page = browser.get(url)
        assert page.status_code == 200, page.text
        assert browser.post(url, data={"decision": "approve"}).status_code == 303
    return page.text


def test_a_second_client_cannot_take_a_live_agents_name_and_so_its_approvals(server: Server):
    """Approvals are the agent's: bound to its name and its user. A second client that the
    person names like an agent already acting for them (typed on the consent page: the
    name offered skips live names) would redeem the first one's approvals over /mcp, and
    the approval page could not tell the person which client asked. The name is refused,
    in any case, before any code is made; a name of the person's own choice works."""
    _, claude = connected(server, "Claude Code", "claude")
    asked = call_tool(server, claude, CANCEL, CANCEL_ARGS)
    assert asked.is_error and asked.meta is not None
    url = asked.meta[APPROVAL_META]["url"]

    other = server.register(name="Helpful Tool")
    verifier, challenge = pkce()
    consent = server.consent_url(other, challenge)
    for typed in ("claude", "Claude", "CLAUDE"):
        refused = server.answer(consent, agent=typed)
        assert refused.status_code == 400, refused.text
        assert "already acts for you" in refused.text
        assert f'value="{typed}"' in refused.text  # what they typed, to change
        assert "/_rastrillo/agents" in refused.text
    assert [g.agent for g in server.grants()] == ["claude"]

    page = approve(server, url)
    assert "agent:claude" in page and "Claude Code" in page  # which client asked
    done = server.answer(consent, agent="helper")
    code = query_of(done.headers["location"])["code"]
    helper = server.exchange(other, code, verifier).json()["access_token"]
    # The second client's identical call is its own: the person is asked again.
    again = call_tool(server, helper, CANCEL, CANCEL_ARGS)
    assert again.is_error and again.meta is not None
    assert again.meta[APPROVAL_META]["url"] != url
    ran = call_tool(server, claude, CANCEL, CANCEL_ARGS)
    assert not ran.is_error, ran.content
    assert call_tool(server, claude, CANCEL, CANCEL_ARGS).is_error  # once


def test_two_consents_under_one_name_at_once_make_one_grant(stored: Server):
    """Two clients allowed under one name before either traded its code (two tabs, or a
    person and an attacker racing): the codes are traded at once, and exactly one grant is
    made; the other exchange is refused, saying why, and grants nothing."""
    answers = []
    for name in ("Claude Code", "Claude Desktop"):
        client_id = stored.register(name=name)
        verifier, challenge = pkce()
        done = stored.answer(stored.consent_url(client_id, challenge), agent="claude")
        assert done.status_code == 303, done.text
        answers.append((client_id, query_of(done.headers["location"])["code"], verifier))
    with ThreadPoolExecutor(2) as pool:
        responses = list(pool.map(lambda a: stored.exchange(*a), answers))
    assert sorted(r.status_code for r in responses) == [200, 400]
    [refused] = [r.json() for r in responses if r.status_code == 400]
    assert refused["error"] == "invalid_grant"
    assert "claude" in refused["error_description"]
    assert [g.agent for g in stored.live_grants()] == ["claude"]


def test_an_approval_page_never_names_a_client_connected_after_it_was_asked(server: Server):
    """The approval page names the client an agent asks through: the live grant under that
    name. A grant made later under the same name (the first one revoked, which ends its
    approvals) did not ask for an approval made before it, and is not named on its page."""
    old, token, _ = grants.personal_token(server.app.db, user_id=USER, agent="claude")
    asked = call_tool(server, token, CANCEL, CANCEL_ARGS)
    assert asked.is_error and asked.meta is not None
    url = asked.meta[APPROVAL_META]["url"]
    assert grants.revoke(server.app.db, old.id)
    connected(server, "Later App", "claude")
    with server.browser() as browser:
        page = browser.get(url)
    assert page.status_code == 200 and "expired before it was decided" in page.text
    assert "Later App" not in page.text and "personal token" not in page.text
