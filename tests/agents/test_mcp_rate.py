"""A hostile model holding a grant floods /mcp with tool calls, and a holder of a refresh
token floods the token endpoint: each is refused past its grant's limit, runs nothing and
stores nothing more, while the user's other grants and other users go on.

The app is served by uvicorn on loopback on a clock that moves only when told to; the
calls come from the official Python MCP client.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from sqlalchemy import func, select

from rastrillo.agents import grants, oauth
from rastrillo.agents.mcp import RATE_LIMIT_META
from rastrillo.app import App
from rastrillo.limits import CallLimit
from rastrillo.loader import load_options
from rastrillo.testing import ManualClock, live_server
from rastrillo.tools import audit
from tests.agents.mcp_app import ACTIONS, FILES, Person
from tests.agents.test_mcp import MODERN, connect, offer, text
from tests.agents.test_oauth import Server as OAuthServer
from tests.support import write_app

__all__ = ["offer"]  # the fixture, used here by name

LIMIT = CallLimit(calls=5, window=timedelta(minutes=1))  # a call every 12 s once the 5 are used
HITS = {
    "hits.GET.py": """
        import rastrillo

        TOOL = rastrillo.Tool(description="Count a visit: a handler that leaves a trace.")


        def handle(ctx):
            ctx.db.execute("INSERT INTO hits (user_id) VALUES (:u)", u=ctx.user_id)
            return ctx.json({"ok": True})
    """,
}
HITS_TABLE = {"migrations/0002_hits.sql": "CREATE TABLE hits (user_id TEXT NOT NULL);\n"}


@dataclasses.dataclass
class Served:
    app: App
    clock: ManualClock

    @property
    def url(self) -> str:
        return self.app.origin + "/mcp"

    def person(self, user_id: str) -> Person:
        return Person(self.app.origin, self.app.db, user_id)

    def hits(self, user_id: str) -> int:
        with self.app.db.read() as conn:
            query = "SELECT count(*) FROM hits WHERE user_id = :u"
            return conn.exec_driver_sql(query.replace(":u", "?"), (user_id,)).scalar_one()

    def audit_rows(self, agent: str) -> int:
        return sum(r.agent == agent for r in audit.latest(self.app.db, limit=10_000))


def serve(tmp_path: Path, limit: CallLimit | None) -> Iterator[Served]:
    app_dir = write_app(
        tmp_path / "app", {**ACTIONS, **HITS}, extra="mcp=True,", files={**FILES, **HITS_TABLE}
    )
    clock = ManualClock()
    options = dataclasses.replace(load_options(app_dir), clock=clock, mcp_call_limit=limit)
    with live_server(options) as app:
        yield Served(app, clock)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path, LIMIT)


@pytest.fixture
def unlimited(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path, None)


async def calls(
    served: Served, token: str, n: int, revision: str = MODERN, at_once: bool = False
) -> list[types.CallToolResult]:
    """``n`` calls of the hits tool on one connection: one after another, or all at once."""
    results: list[types.CallToolResult] = []
    async with connect(served.url, token, revision) as client:
        if not at_once:
            for _ in range(n):
                results.append(await client.call_tool("hits_get", {}))
            return results

        async def one() -> None:
            results.append(await client.call_tool("hits_get", {}))

        async with anyio.create_task_group() as group:
            for _ in range(n):
                group.start_soon(one)
    return results


def run(served: Served, token: str, n: int, **kw: object) -> list[types.CallToolResult]:
    return anyio.run(lambda: calls(served, token, n, **kw))


def refused(result: types.CallToolResult) -> int:
    """The seconds a refusal for the grant's rate says to wait; fails on any other result."""
    assert result.is_error, text(result)
    retry = result.meta[RATE_LIMIT_META]["retry_after"]
    assert text(result) == (
        "Not run: this connection is over its limit of 5 tool calls in a minute. "
        f"Call again in {retry} s."
    )
    return retry


@pytest.mark.parametrize("revision", ["2025-11-25", MODERN])
def test_a_flood_from_one_grant_runs_nothing_past_the_limit(served, offer, revision, caplog):
    offer(revision)
    alice, bob = served.person("3"), served.person("4")
    flooder, other_agent, bobs = alice.token("flooder"), alice.token("helper"), bob.token()
    with caplog.at_level(logging.WARNING, "rastrillo.mcp"):
        flood = run(served, flooder, 60, revision=revision)
    assert [r.is_error for r in flood[:5]] == [False] * 5
    assert {refused(r) for r in flood[5:]} == {12}
    assert served.hits("3") == 5  # no handler ran past the limit
    assert served.audit_rows("flooder") == 5  # and no row was written for a refusal
    # One log line for the whole flood, naming the grant's agent and user.
    [line] = [r.getMessage() for r in caplog.records if r.name == "rastrillo.mcp"]
    assert "agent flooder for user '3'" in line and "over 5 in a minute" in line
    # The user's other agent, and another user, have limits of their own.
    assert not any(r.is_error for r in run(served, other_agent, 5, revision=revision))
    assert not any(r.is_error for r in run(served, bobs, 5, revision=revision))
    assert (served.hits("3"), served.hits("4")) == (10, 5)


def test_calls_at_once_are_counted_one_by_one(served):
    token = served.person("3").token()
    flood = run(served, token, 40, at_once=True)
    assert sum(not r.is_error for r in flood) == 5
    assert served.hits("3") == 5


def test_the_limit_recovers_as_time_passes(served, caplog):
    token = served.person("3").token()
    run(served, token, 8)
    served.clock.advance(11)
    assert refused(run(served, token, 1)[0]) == 1
    served.clock.advance(1)  # 12 s: room for one call
    again = run(served, token, 2)
    assert not again[0].is_error and refused(again[1]) == 12
    served.clock.advance(60)  # a whole window: the bucket is full again
    caplog.clear()
    with caplog.at_level(logging.WARNING, "rastrillo.mcp"):
        after = run(served, token, 6)
    assert [r.is_error for r in after] == [False] * 5 + [True]
    assert served.hits("3") == 11
    # Its refusals are logged again, once, in the new window.
    assert len([r for r in caplog.records if r.name == "rastrillo.mcp"]) == 1


def test_a_grant_revoked_while_over_its_limit_gets_401(served):
    alice = served.person("3")
    token = alice.token()

    async def flood_then_revoke() -> None:
        async with connect(served.url, token, MODERN) as client:
            for _ in range(6):
                last = await client.call_tool("hits_get", {})
            refused(last)
            [grant] = grants.list_grants(served.app.db, "3")
            grants.revoke(served.app.db, grant.id)
            with pytest.raises(MCPError):
                await client.call_tool("hits_get", {})

    anyio.run(flood_then_revoke)


def test_without_a_limit_every_call_runs(unlimited):
    token = unlimited.person("3").token()
    assert not any(r.is_error for r in run(unlimited, token, 150))
    assert unlimited.hits("3") == 150


@pytest.fixture
def oauth_served(tmp_path: Path) -> Iterator[tuple[OAuthServer, ManualClock]]:
    from tests.tools._tools_app import app_options

    clock = ManualClock()
    options = dataclasses.replace(app_options(tmp_path), mcp=True, clock=clock)
    with live_server(options) as app:
        yield OAuthServer(app), clock


def token_rows(server: OAuthServer) -> int:
    with server.app.db.read() as conn:
        return conn.execute(select(func.count()).select_from(grants.tokens_table)).scalar_one()


def test_refreshing_a_grant_in_a_loop_stores_no_more_than_the_limit(oauth_served):
    """Each refresh stores a new token pair, and keeps the used refresh token for its 30
    days (a replay of it revokes the grant): a holder refreshing in a loop would grow the
    tokens table without bound."""
    server, clock = oauth_served
    client_id, tokens = server.tokens()
    before = token_rows(server)
    for _ in range(oauth.REFRESHES_PER_GRANT):
        response = server.refresh(client_id, tokens["refresh_token"])
        assert response.status_code == 200, response.text
        tokens = response.json()
    stored = token_rows(server)
    for _ in range(30):
        response = server.refresh(client_id, tokens["refresh_token"])
        assert response.status_code == 429, response.text
        assert response.json()["error"] == "too_many_requests"
        assert 0 < int(response.headers["retry-after"]) <= oauth.RATE_WINDOW.total_seconds()
    assert token_rows(server) == stored
    assert stored - before <= 2 * oauth.REFRESHES_PER_GRANT
    # The refused refreshes used nothing up: the last token still refreshes, next window.
    clock.advance(oauth.RATE_WINDOW.total_seconds())
    assert server.refresh(client_id, tokens["refresh_token"]).status_code == 200
    # The access tokens that expired in that hour were deleted as it refreshed.
    assert token_rows(server) < stored
