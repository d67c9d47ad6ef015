"""/mcp served by `python app.py` (uvicorn, lifespan on), used by the official Python MCP client.

Each supported protocol revision: initialize, list, a read, a write that waits
for the user's approval in their own browser session and then runs once, and
revocation refusing the next call.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import mcp.client.session
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel.server import Server as SdkServer
from mcp.shared.exceptions import MCPError

from rastrillo.agents import grants
from rastrillo.agents.mcp import APPROVAL_META, _is_sdk_tracing, state_key
from rastrillo.loader import load_options
from rastrillo.registry.schemas import schemas
from rastrillo.storage import Database
from rastrillo.testing import TestApp
from rastrillo.tools import audit
from tests.agents.mcp_app import Person, make_app
from tests.support import TLS, Server, free_port, write_app

HANDSHAKE = ["2025-06-18", "2025-11-25"]
MODERN = "2026-07-28"
USER_OF = {"2025-06-18": "3", "2025-11-25": "4", MODERN: "5"}
"""The user each revision's session acts for, on the module's one server."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """One server for the module: each test acts for users of its own, so none sees
    another's notes, grants or audit rows."""
    app_dir = make_app(tmp_path_factory.mktemp("mcp") / "app")
    port = free_port()
    server = Server(app_dir, ["--addr", f"127.0.0.1:{port}"], f"http://127.0.0.1:{port}")
    db = Database(str(app_dir / "app.db"))
    try:
        yield server, db, app_dir
    finally:
        db.dispose()
        assert server.stop() == 0, server.log.read_text()


@asynccontextmanager
async def connect(url: str, token: str, revision: str, elicit: Any = None) -> AsyncIterator[Client]:
    """The official client at one revision: the handshake ones offer it at initialize."""
    http = httpx2.AsyncClient(verify=TLS, timeout=30, headers={"Authorization": f"Bearer {token}"})
    mode = MODERN if revision == MODERN else "legacy"
    async with http:
        client = Client(
            streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=elicit
        )
        async with client:
            yield client


@pytest.fixture
def offer(monkeypatch):
    """Make the official client offer a given handshake revision at initialize."""

    def set_revision(revision: str) -> None:
        if revision != MODERN:
            monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", revision)

    return set_revision


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("revision", [*HANDSHAKE, MODERN])
def test_list_read_write_approve_revoke(served, offer, revision):
    server, db, app_dir = served
    offer(revision)
    want = schemas(load_options(app_dir).tools, "mcp")
    user = USER_OF[revision]
    alice = Person(server.base_url, db, user)
    token = alice.token("claude")
    url = server.base_url + "/mcp"
    asked: list[types.ElicitRequestURLParams] = []

    async def elicit(context, params):
        assert isinstance(params, types.ElicitRequestURLParams)
        asked.append(params)
        await anyio.to_thread.run_sync(alice.decide, params.url)
        return types.ElicitResult(action="accept")

    [grant] = grants.list_grants(db, user)
    who = f"agent:claude (grant {grant.id})"

    async def session() -> None:
        async with connect(url, token, revision, elicit) as client:
            assert client.protocol_version == revision
            listed = await client.list_tools()
            got = [
                t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools
            ]
            assert [{k: t[k] for k in w} for t, w in zip(got, want, strict=True)] == want

            read = await client.call_tool("notes_get", {})
            assert not read.is_error
            assert read.structured_content == {"notes": [], "user": user, "actor": who}

            write = await client.call_tool("notes_post", {"body": "buy milk"})
            if revision == MODERN:
                # The client opened the approval page (our callback approved it) and retried.
                assert [a.message for a in asked] == ["Add the note buy milk?"]
            else:
                assert write.is_error
                meta = write.meta[APPROVAL_META]
                assert meta["url"].startswith(server.base_url + "/_rastrillo/approvals/")
                assert "Add the note buy milk?" in text(write)
                assert meta["url"] in text(write) and "same arguments" in text(write)
                assert (await client.call_tool("notes_get", {})).structured_content["notes"] == []
                await anyio.to_thread.run_sync(alice.decide, meta["url"])
                write = await client.call_tool("notes_post", {"body": "buy milk"})
            assert not write.is_error, text(write)
            assert write.structured_content["added"] == "buy milk"
            assert write.structured_content["by"].startswith(
                f"{who} for user {user}, approved by user {user} at "
            )
            notes = (await client.call_tool("notes_get", {})).structured_content["notes"]
            assert [n["body"] for n in notes] == ["buy milk"]

            assert grants.revoke(db, grant.id, user_id=user)
            with pytest.raises(MCPError):
                await client.call_tool("notes_get", {})
            log = server.log.read_text()
            posts = [line for line in log.splitlines() if "POST /mcp" in line]
            assert posts[-1].endswith('"POST /mcp HTTP/1.1" 401')
            # One access line a request; the SDK's stateless transport (handshake revisions)
            # would add one saying that a session that never was has ended.
            assert "Terminating session" not in log

    anyio.run(session)
    rows = [
        r
        for r in audit.latest(db, limit=200)
        if r.tool == "notes_post" and r.status == 201 and r.user_id == user
    ]
    assert len(rows) == 1 and rows[0].actor == who
    assert rows[0].client == "personal token"


def test_a_missing_or_bad_token_is_401_with_the_resource_metadata(served):
    server, db, _ = served
    alice = Person(server.base_url, db, "6")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    want = f'resource_metadata="{server.base_url}/.well-known/oauth-protected-resource"'
    with alice.browser() as browser:  # a signed-in browser: its cookie counts for nothing
        for auth in (
            {},
            {"Authorization": "Bearer nope"},
            {"Authorization": "Basic x"},
            {"Authorization": "Bearer " + alice.token("spoilt") + "x"},
        ):
            answer = browser.post("/mcp", json=body, headers={**headers, **auth})
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"].startswith("Bearer ")
            assert want in answer.headers["www-authenticate"]
        token = {"Authorization": "Bearer " + alice.token()}
        ok = browser.post("/mcp", json=body, headers={**headers, **token})
        assert ok.status_code == 200 and "notes_get" in ok.text


def test_a_foreign_origin_is_refused_and_no_origin_is_fine(served):
    server, db, _ = served
    token = Person(server.base_url, db, "7").token()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        "Authorization": f"Bearer {token}",
    }
    port = server.base_url.rsplit(":", 1)[1]
    with httpx.Client(verify=TLS, base_url=server.base_url) as http:
        for foreign in (
            f"http://127.0.0.1:{int(port) + 1}",
            f"http://localhost:{port}",
            "https://evil.example",
            "null",
        ):
            answer = http.post("/mcp", json=body, headers={**headers, "Origin": foreign})
            assert answer.status_code == 403, foreign
        assert http.post("/mcp", json=body, headers=headers).status_code == 200
        same = http.post("/mcp", json=body, headers={**headers, "Origin": server.base_url})
        assert same.status_code == 200


def test_the_request_state_key_is_made_once_and_kept_by_every_process(db_url):
    """Processes starting at once on one database all seal request state with one key."""
    databases = [Database(db_url) for _ in range(6)]
    databases[0].open()
    keys: list[bytes] = []

    def start(db: Database) -> None:
        keys.append(state_key(db))

    try:
        threads = [threading.Thread(target=start, args=(db,)) for db in databases]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(keys) == 6 and len(set(keys)) == 1 and len(keys[0]) == 32
        assert state_key(databases[0]) == keys[0]
    finally:
        for db in databases:
            db.dispose()


def test_a_get_opens_no_stream_that_would_outlive_its_grant(served):
    """Every /mcp answer is one JSON reply to one POST: nothing is ever sent on a
    standalone server stream. A GET is 405 (the transport's answer for "no stream here"),
    not a stream held open for as long as the client likes, past the grant's revocation."""
    server, db, _ = served
    alice = Person(server.base_url, db, "8")
    token = alice.token("listener")
    headers = {"Accept": "text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    with httpx.Client(verify=TLS, base_url=server.base_url, timeout=30) as http:
        unauthorized = http.get("/mcp", headers=headers)
        assert unauthorized.status_code == 401  # discovery still starts from /mcp
        assert "resource_metadata=" in unauthorized.headers["www-authenticate"]
        with http.stream(
            "GET", "/mcp", headers={**headers, "Authorization": f"Bearer {token}"}
        ) as answer:
            assert answer.status_code == 405
            assert answer.headers["allow"] == "POST"


TRACED = """
import sys
from contextlib import contextmanager
from pathlib import Path

from opentelemetry import trace

from rastrillo.agents import grants
from rastrillo.testing import TestApp

spans = []


class Tracer(trace.NoOpTracer):
    @contextmanager
    def start_as_current_span(self, name, *args, **kwargs):
        spans.append(name)
        yield trace.INVALID_SPAN


class Provider(trace.NoOpTracerProvider):
    def get_tracer(self, *args, **kwargs):
        return Tracer()


trace.set_tracer_provider(Provider())
app_dir, tmp = Path(sys.argv[1]), Path(sys.argv[2])
with TestApp(app_dir, tmp, mcp=True) as t:
    _, token, _ = grants.personal_token(t.db, user_id="3", agent="traced")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "notes_get", "arguments": {}}}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    answer = t.client.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 200 and answer.json()["result"]["isError"] is False, answer.text
print(spans)
"""


def test_the_sdks_tracing_middleware_is_recognised_so_an_untraced_app_skips_its_span():
    """/mcp runs the SDK's OpenTelemetry middleware only when a span could be seen, telling
    it by its class's name (its module is private). An SDK release that renames it fails
    here, not by running a span at every call unnoticed."""
    assert [_is_sdk_tracing(m) for m in SdkServer("app").middleware] == [True]


def test_an_app_that_traces_gets_the_sdks_span_for_each_call(tmp_path):
    """With a tracer provider set, each /mcp message has the SDK's OpenTelemetry span (with
    none set, /mcp skips making spans that nothing would record). In a process of its own:
    a tracer provider is set once per process."""
    app_dir = make_app(tmp_path / "app")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(TRACED), str(app_dir), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['tools/call notes_get']"


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACE_ACTION = """
import rastrillo
from opentelemetry import trace

TOOL = rastrillo.Tool(description="The trace this call runs in.")


def handle(ctx):
    trace_id = trace.get_current_span().get_span_context().trace_id
    return ctx.json({"trace_id": format(trace_id, "032x")})
"""


def test_a_callers_traceparent_reaches_the_handler_though_the_app_does_not_trace(tmp_path):
    """No tracer provider is set, so /mcp makes no span of its own accord; a call whose
    ``_meta`` carries a W3C ``traceparent`` still gets the SDK's span, so the handler runs in
    the caller's trace and whatever it calls on can carry the trace on."""
    app_dir = write_app(tmp_path / "app", {"trace.GET.py": TRACE_ACTION}, extra="mcp=True,")
    traceparent = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    with TestApp(app_dir, tmp_path, mcp=True) as t:
        _, token, _ = grants.personal_token(t.db, user_id="3", agent="traced")
        headers["Authorization"] = f"Bearer {token}"
        seen = []
        for meta in ({"traceparent": traceparent}, {}):
            params = {"name": "trace_get", "arguments": {}, "_meta": meta}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
            answer = t.client.post("/mcp", json=body, headers=headers)
            assert answer.status_code == 200, answer.text
            seen.append(answer.json()["result"]["structuredContent"]["trace_id"])
    assert seen == [TRACE_ID, "0" * 32]
