"""The official TypeScript MCP SDK's OAuth client (Debian's nodejs) against the app on uvicorn:
discovery, dynamic registration, the authorize redirect, and the token exchange.

``tests/agents/ts/oauth.mjs`` is the client; this test is the person who allows,
from a signed-in session, and hands the code from the redirect back to it, as
the client's loopback listener would.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from rastrillo.agents import grants
from rastrillo.app import App
from rastrillo.routing import CONSENT_PATH, OAUTH_AUTHORIZE_PATH
from rastrillo.sessions import cookie_name, create_session
from rastrillo.testing import live_server
from tests.support import TLS
from tests.tools._tools_app import app_options

TS = Path(__file__).parent / "ts"
REDIRECT = "http://127.0.0.1:33418/callback"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with live_server(dataclasses.replace(app_options(tmp_path), mcp=True)) as served:
        yield served


class Node:
    """``node oauth.mjs``, read one JSON line at a time, killed after a minute at most."""

    def __init__(self, *args: str) -> None:
        if not (TS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
            pytest.fail(
                "the TypeScript SDK is not installed: run `make test` (npm ci in tests/agents/ts)"
            )
        self.process = subprocess.Popen(
            ["node", str(TS / "oauth.mjs"), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.watchdog = threading.Timer(60, self.process.kill)
        self.watchdog.start()

    def step(self, name: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"node ended: {self.process.stderr.read() if self.process.stderr else ''}"
        value = json.loads(line)
        assert value["step"] == name, value
        return value

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self) -> int:
        self.watchdog.cancel()
        return self.process.wait(10)


def test_the_typescript_sdk_discovers_registers_and_trades_the_code(app: App):
    node = Node(app.origin + "/mcp", REDIRECT)
    try:
        registered = node.step("registered")
        assert registered["method"] == "none"
        asked = node.step("authorize")
        assert node.step("started")["result"] == "REDIRECT"
        url = asked["url"]
        assert url.startswith(app.origin + OAUTH_AUTHORIZE_PATH + "?")
        sent = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        assert sent["code_challenge_method"] == "S256"
        assert sent["resource"] == app.origin + "/mcp"
        assert sent["client_id"] == registered["client_id"]

        with httpx.Client(verify=TLS, headers={"Origin": app.origin}) as browser:
            browser.cookies.set(cookie_name(app.origin), create_session(app.db, "5"))
            consent = browser.get(url).headers["location"]
            assert browser.get(consent).status_code == 200
            request_id = parse_qs(urlsplit(consent).query)["request"][0]
            allowed = browser.post(
                app.origin + CONSENT_PATH,
                data={"request": request_id, "decision": "allow", "agent": "ts-agent"},
            )
        assert allowed.status_code == 303
        back = allowed.headers["location"]
        assert back.startswith(REDIRECT + "?")
        answer = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
        assert answer["state"] == asked["state"]
        assert grants.list_grants(app.db) == []

        node.send(answer["code"])
        assert node.step("tokens") == {"step": "tokens", "expires_in": 3600, "refresh": True}
        assert node.step("exchanged")["result"] == "AUTHORIZED"
    finally:
        assert node.close() == 0
    [grant] = grants.list_grants(app.db, "5")
    assert (grant.agent, grant.client, grant.client_id) == (
        "ts-agent",
        "TypeScript Agent",
        registered["client_id"],
    )
