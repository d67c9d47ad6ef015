"""/mcp and the OAuth endpoints are built at the first request to one, not at start.

An app with ``Options(mcp=True)`` starts, makes its tables and serves its pages without
importing the MCP SDK (over a second of every start); the first agent request builds
the endpoints, once, however many come at the same moment.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading

import anyio
import httpx
import pytest

from rastrillo import threads
from rastrillo.agents.endpoints import AgentEndpoints, Built
from rastrillo.routing import (
    AUTHORIZATION_SERVER_PATH,
    MCP_PATH,
    OAUTH_PATHS,
    RESOURCE_METADATA_PATH,
)
from rastrillo.threads import MAX_THREADS
from tests.agents.mcp_app import make_app, tools_call
from tests.support import TLS, Server, free_port

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}

FIRST_AGENT = """
import json
import sys
from pathlib import Path

from rastrillo.agents import grants
from rastrillo.testing import TestApp

app_dir, tmp, headers = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
sdk = lambda: sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types")))
seen = {}
with TestApp(app_dir, tmp, mcp=True) as t:
    tables = t.db.query("SELECT name FROM sqlite_master WHERE type = 'table'")
    seen["tables"] = sorted(row.name for row in tables)
    seen["page"] = t.client.get("/_rastrillo/agents", follow_redirects=False).status_code
    seen["sdk at start"] = sdk()
    _, token, _ = grants.personal_token(t.db, user_id="3", agent="first")
    headers["Authorization"] = f"Bearer {token}"
    call = json.loads(sys.argv[4])
    answer = t.client.post("/mcp", json=call, headers=headers)
    seen["call"] = answer.json()["result"]["structuredContent"]
    seen["sdk after"] = bool(sdk())
print(json.dumps(seen))
"""


def test_an_app_starts_and_serves_pages_without_the_sdk_until_an_agent_comes(tmp_path):
    """In a process of its own: the test's worker has the SDK imported already."""
    app_dir = make_app(tmp_path / "app")
    call = tools_call("notes_get", {})
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(FIRST_AGENT),
            str(app_dir),
            str(tmp_path),
            json.dumps(HEADERS),
            json.dumps(call),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert {"rastrillo_oauth_clients", "rastrillo_oauth_authorizations", "rastrillo_keys"} <= set(
        seen["tables"]
    )
    assert seen["page"] == 303  # the agents page, to sign-in: served, no SDK needed
    assert seen["sdk at start"] == []
    assert seen["call"]["user"] == "3" and seen["sdk after"] is True


def test_agents_arriving_together_at_a_fresh_server_are_all_answered(tmp_path):
    """The first requests race to build the endpoints and start /mcp's session manager:
    one build, one start, and every request answered as if it had come alone."""
    app_dir = make_app(tmp_path / "app")
    port = free_port()
    server = Server(app_dir, ["--addr", f"127.0.0.1:{port}"], f"http://127.0.0.1:{port}")
    try:
        from rastrillo.agents import grants
        from rastrillo.storage import Database

        db = Database(str(app_dir / "app.db"))
        tokens = [grants.personal_token(db, user_id="3", agent=f"a{n}")[1] for n in range(6)]
        db.dispose()

        async def all_at_once() -> list[httpx.Response]:
            async with httpx.AsyncClient(
                base_url=server.base_url, verify=TLS, timeout=60
            ) as client:
                calls = [
                    client.post(
                        MCP_PATH,
                        json=tools_call("notes_get", {}, request_id=n),
                        headers={**HEADERS, "Authorization": f"Bearer {token}"},
                    )
                    for n, token in enumerate(tokens)
                ]
                metadata = [
                    client.get(RESOURCE_METADATA_PATH + MCP_PATH),
                    client.get(AUTHORIZATION_SERVER_PATH),
                ]
                return list(await asyncio.gather(*calls, *metadata))

        answers = asyncio.run(all_at_once())
        calls, metadata = answers[: len(tokens)], answers[len(tokens) :]
        for n, answer in enumerate(calls):
            assert answer.status_code == 200, answer.text
            assert answer.json()["id"] == n
            assert answer.json()["result"]["structuredContent"]["user"] == "3"
        assert [m.status_code for m in metadata] == [200, 200]
        assert metadata[1].json()["issuer"].rstrip("/") == server.base_url
    finally:
        assert server.stop() == 0, server.log.read_text()
    assert server.log.read_text().count("StreamableHTTP session manager started") == 1


def _blocked_build(release: threading.Event, builds: list[int], failures: int = 0):
    """A build that waits for ``release`` (the SDK's second of imports, held open), and
    fails its first ``failures`` times."""

    def build() -> Built:
        builds.append(1)
        release.wait(30)
        if len(builds) <= failures:
            raise RuntimeError("the build failed")
        return Built(mcp=object(), oauth={path: object() for path in OAUTH_PATHS})  # type: ignore[arg-type]

    return build


def test_pages_are_served_while_agents_wait_for_the_build():
    """More agents than worker threads arrive during the build: they wait on the event
    loop, so the workers stay free for pages (a sync handle's hop), and all of them get
    the one build."""

    async def run() -> None:
        release, builds = threading.Event(), []
        endpoints = AgentEndpoints(_blocked_build(release, builds))
        path = AUTHORIZATION_SERVER_PATH
        agents = [asyncio.create_task(endpoints.app_for(path)) for _ in range(MAX_THREADS + 2)]
        await asyncio.sleep(0)  # every agent is waiting for the build
        with anyio.fail_after(10):  # a page queued behind held workers would wait for ever
            assert await threads.in_thread(lambda: "page") == "page"
        assert not any(agent.done() for agent in agents)
        release.set()
        answers = await asyncio.gather(*agents)
        assert len({id(answer) for answer in answers}) == 1 and builds == [1]

    asyncio.run(run())


def test_a_failed_build_fails_its_waiters_and_the_next_agent_builds_again():
    async def run() -> None:
        release, builds = threading.Event(), []
        endpoints = AgentEndpoints(_blocked_build(release, builds, failures=1))
        path = AUTHORIZATION_SERVER_PATH
        first, cancelled = (asyncio.create_task(endpoints.app_for(path)) for _ in range(2))
        await asyncio.sleep(0)
        cancelled.cancel()  # an agent that gives up does not cancel the others' build
        release.set()
        with pytest.raises(RuntimeError, match="the build failed"):
            await first
        assert cancelled.cancelled()
        assert await endpoints.app_for(path) is not None
        assert builds == [1, 1]

    asyncio.run(run())
