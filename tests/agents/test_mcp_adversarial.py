"""Hostile MCP clients against a real server: other users, other agents, forged state, fuzz.

The server is `python app.py` on loopback; the attacks go over real HTTP, some
through the official Python client, some as raw JSON-RPC (what any client can send).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from rastrillo.agents import grants
from rastrillo.registry.errors import ApprovalInvalid
from rastrillo.storage import Database
from rastrillo.testing import TestApp
from rastrillo.tools import ConfirmRequired
from tests.agents.mcp_app import Person, make_app, tools_call
from tests.support import TLS, Server, free_port

TOOLS = ["notes_get", "notes_post", "notes_id_get"]
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


class Served:
    def __init__(self, server: Server, db: Database, app_dir: Path) -> None:
        self.server, self.db, self.app_dir = server, db, app_dir
        self.url = server.base_url + "/mcp"
        self.alice = Person(server.base_url, db, "3")
        self.bob = Person(server.base_url, db, "4")

    def notes(self) -> list[tuple[str, str]]:
        return [(r.owner, r.body) for r in self.db.query("SELECT owner, body FROM notes")]

    def call(self, token: str, name: object, arguments: object) -> dict:
        """A raw ``tools/call``: the JSON-RPC answer as a dict."""
        body = tools_call(name, arguments, request_id=7)
        with httpx.Client(verify=TLS, timeout=30) as http:
            answer = http.post(
                self.url, json=body, headers={**HEADERS, "Authorization": f"Bearer {token}"}
            )
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    app_dir = make_app(tmp_path_factory.mktemp("adversarial") / "app")
    port = free_port()
    server = Server(app_dir, ["--addr", f"127.0.0.1:{port}"], f"http://127.0.0.1:{port}")
    db = Database(str(app_dir / "app.db"))
    db.execute("INSERT INTO notes (owner, body) VALUES ('3', 'alice private')")
    try:
        yield Served(server, db, app_dir)
    finally:
        server.stop()
        db.dispose()


def text(result: dict) -> str:
    return "".join(c.get("text", "") for c in result["content"])


def propose_and_approve(s: Served, token: str, person: Person, body: str) -> None:
    """A write proposed with ``token``, approved by ``person`` in their browser session."""
    first = s.call(token, "notes_post", {"body": body})["result"]
    assert first["isError"] is True
    person.decide(first["_meta"]["rastrillo/approval"]["url"])


def test_another_users_token_never_acts_for_this_user(served):
    s = served
    bob = s.bob.token("claude")
    seen = s.call(bob, "notes_get", {})["result"]["structuredContent"]
    assert seen["user"] == "4" and seen["notes"] == []
    row = s.db.query_one("SELECT id FROM notes WHERE body = 'alice private'")
    refused = s.call(bob, "notes_id_get", {"id": str(row.id)})["result"]
    assert refused["isError"] is True and "alice private" not in json.dumps(refused)
    # Alice approved her agent's write; the identical call with Bob's token is Bob's own.
    alice = s.alice.token("claude")
    propose_and_approve(s, alice, s.alice, "from alice")
    answer = s.call(bob, "notes_post", {"body": "from alice"})["result"]
    assert answer["isError"] is True and "approval" in text(answer)
    assert ("4", "from alice") not in s.notes() and ("3", "from alice") not in s.notes()
    assert s.call(alice, "notes_post", {"body": "from alice"})["result"]["isError"] is False
    assert s.notes().count(("3", "from alice")) == 1


def test_no_mcp_session_is_issued_so_another_users_cannot_be_borrowed(served):
    """A stateful Streamable HTTP server names a session (``Mcp-Session-Id``) that a second
    user who learns it might send with their own requests. ``/mcp`` is stateless: it
    issues none, a session id sent is no one's, and whom a request acts for is its
    bearer token alone (docs/mcp.md, "One request per call")."""
    s = served
    alice, bob = s.alice.token("session-a"), s.bob.token("session-b")
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "alice's", "version": "1"},
        },
    }
    with httpx.Client(verify=TLS, timeout=30) as http:
        opened = http.post(
            s.url, json=init, headers={**HEADERS, "Authorization": f"Bearer {alice}"}
        )
        assert opened.status_code == 200, opened.text
        assert "mcp-session-id" not in opened.headers
        for session in ("alice", "0" * 32, "a" * 32):
            answer = http.post(
                s.url,
                json=tools_call("notes_get", {}, request_id=2),
                headers={**HEADERS, "Authorization": f"Bearer {bob}", "Mcp-Session-Id": session},
            )
            assert answer.status_code == 200, answer.text
            assert "mcp-session-id" not in answer.headers
            seen = answer.json()["result"]["structuredContent"]
            assert seen["user"] == "4" and seen["notes"] == []


def test_a_token_for_one_agent_cannot_act_as_another(served):
    s = served
    claude, other = s.alice.token("claude-code"), s.alice.token("other")
    actor = s.call(other, "notes_get", {})["result"]["structuredContent"]["actor"]
    assert re.fullmatch(r"agent:other \(grant [0-9a-f]{32}\)", actor)
    propose_and_approve(s, claude, s.alice, "claude's note")
    answer = s.call(other, "notes_post", {"body": "claude's note"})["result"]
    assert answer["isError"] is True  # a new proposal by "other", not claude's approval
    assert ("3", "claude's note") not in s.notes()
    for smuggled in (
        {"body": "x", "actor": "claude"},
        {"body": "x", "approval": "a" * 32},
        {"body": "x", "confirmed": True},
    ):
        refused = s.call(claude, "notes_post", smuggled)["result"]
        assert refused["isError"] is True and "takes no arg" in text(refused)
    assert s.call(claude, "notes_post", {"body": "claude's note"})["result"]["isError"] is False


def test_a_grant_and_an_in_process_agent_of_one_name_share_no_approval(served, tmp_path):
    """The app dispatches in-process as ``Actor.agent("assistant")``; a grant is named
    "assistant" too. Each is its own agent: an approval one was given is never redeemed,
    nor named again, by the other, and the approval page and the audit log tell them
    apart by the grant."""
    s = served
    token = s.alice.token("assistant")
    [grant] = [g for g in grants.list_grants(s.db, "3") if g.agent == "assistant"]
    who = f"agent:assistant (grant {grant.id})"
    in_process = TestApp(s.app_dir, tmp_path, db=str(s.app_dir / "app.db"))
    assistant = in_process.agent("assistant", "3")
    # The in-process agent's approved write: the grant's identical call is asked anew.
    pending = assistant.needs_confirmation("notes_post", {"body": "in-process note"})
    assistant.approve(pending)
    asked = s.call(token, "notes_post", {"body": "in-process note"})["result"]
    assert asked["isError"] is True
    theirs = asked["_meta"]["rastrillo/approval"]["url"].rsplit("/", 1)[1]
    assert theirs != pending.approval_id
    assert ("3", "in-process note") not in s.notes()
    # Each redeems its own, once; then the in-process agent's identical call is asked
    # anew, and naming the grant's approved approval is refused.
    s.alice.decide(asked["_meta"]["rastrillo/approval"]["url"])
    assert assistant.call("notes_post", {"body": "in-process note"}, approval=pending).status == 201
    with pytest.raises(ConfirmRequired) as again:
        assistant.call("notes_post", {"body": "in-process note"})
    assert again.value.approval_id not in (pending.approval_id, theirs)
    with pytest.raises(ApprovalInvalid, match="actor"):
        assistant.call("notes_post", {"body": "in-process note"}, approval=theirs)
    assert s.call(token, "notes_post", {"body": "in-process note"})["result"]["isError"] is False
    assert s.notes().count(("3", "in-process note")) == 2
    with s.alice.browser() as browser:
        page = browser.get(f"/_rastrillo/approvals/{theirs}").text
    assert f"grant {grant.id}" in page
    actors = {
        r.actor
        for r in s.db.query(
            "SELECT actor FROM rastrillo_audit WHERE tool = 'notes_post' AND args LIKE :a",
            a="%in-process note%",
        )
    }
    assert actors == {"agent:assistant", who}


@contextlib.asynccontextmanager
async def answering(s: Served, token: str, mode: str) -> AsyncIterator[tuple[Client, list[int]]]:
    """The official client on ``token``, and the HTTP status of each answer it gets."""
    statuses: list[int] = []

    async def note(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    http = httpx2.AsyncClient(
        verify=TLS,
        timeout=30,
        headers={"Authorization": f"Bearer {token}"},
        event_hooks={"response": [note]},
    )
    async with (
        http,
        Client(
            streamable_http_client(s.url, http_client=http), mode=mode, elicitation_callback=_never
        ) as client,
    ):
        yield client, statuses


def revoke(s: Served, agent: str) -> None:
    """Alice revokes her grant to ``agent``."""
    [grant] = [g for g in grants.list_grants(s.db, "3") if g.agent == agent]
    assert grants.revoke(s.db, grant.id, user_id="3")


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_revoked_grant_whose_token_was_just_checked_runs_nothing_more(served, mode):
    """The server checked the token a moment ago; revoked from another process, the next
    tool call, read or write, is a 401 and runs nothing; the user's own sessions live on."""
    s = served
    token = s.alice.token(f"revoked-{mode}")

    async def session() -> None:
        async with answering(s, token, mode) as (client, statuses):
            assert not (await client.call_tool("notes_get", {})).is_error
            revoke(s, f"revoked-{mode}")
            for name, arguments in (
                ("notes_post", {"body": "after revoke"}),
                ("notes_get", {}),
                ("notes_get", {}),
            ):
                with pytest.raises(MCPError):
                    await client.call_tool(name, arguments)
                assert statuses[-1] == 401

    with s.alice.browser() as browser:
        proposed = s.db.query_one("SELECT COUNT(*) AS n FROM rastrillo_approvals").n
        anyio.run(session)
        assert s.db.query_one("SELECT COUNT(*) AS n FROM rastrillo_approvals").n == proposed
        assert ("3", "after revoke") not in s.notes()  # and no approval was asked
        assert browser.get("/notes").json()["user"] == "3"
    # Any other request is checked in the store: a 401 with the resource metadata.
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    with httpx.Client(verify=TLS, timeout=30) as http:
        answer = http.post(s.url, json=body, headers=headers)
    assert answer.status_code == 401
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    assert "resource_metadata=" in answer.headers["www-authenticate"]


@pytest.mark.parametrize(
    "params",
    [
        {"name": "no_such_tool", "arguments": {}},
        {"name": "notes_get", "arguments": {"undeclared": 1}},
        {"name": "notes_post", "arguments": {}},
        {"name": "notes_post", "arguments": {"body": "x"}, "requestState": "v1.AAAA"},
        {"name": 5, "arguments": {}},
    ],
    ids=["unknown-tool", "undeclared-arg", "missing-arg", "forged-state", "bad-params"],
)
def test_a_revoked_grant_whose_token_was_just_checked_is_401_for_a_refused_call_too(served, params):
    """A tool call refused before it reaches the app never reaches the session check that
    tells of a revocation: it is a 401 all the same, not a refusal made for a revoked
    grant (which would tell a leaked token's holder the token still gets answers)."""
    s = served
    token = s.alice.token("refused-after-revoke")
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    first = s.call(token, "notes_get", {})["result"]
    assert first["isError"] is False  # the token is now known to this process
    [grant] = [g for g in grants.list_grants(s.db, "3") if g.agent == "refused-after-revoke"]
    assert grants.revoke(s.db, grant.id, user_id="3")
    body = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": params}
    with httpx.Client(verify=TLS, timeout=30) as http:
        answer = http.post(s.url, json=body, headers=headers)
        again = http.post(s.url, json=body, headers=headers)
    for response in (answer, again):
        assert response.status_code == 401, response.text
        assert 'error="invalid_token"' in response.headers["www-authenticate"]
        assert "resource_metadata=" in response.headers["www-authenticate"]
        assert "notes_get" not in response.text and "requestState" not in response.text


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 9, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ],
    ids=["tools-list", "ping", "notification"],
)
def test_a_revoked_grant_whose_token_was_just_checked_is_401_for_any_other_request(served, message):
    """Not a tool call, so no session check tells of the revocation: the token the process
    remembers is looked up before the answer goes, which is a 401, not the tool list."""
    s = served
    agent = "other-after-revoke-" + message["method"].replace("/", "-")
    token = s.alice.token(agent)
    assert s.call(token, "notes_get", {})["result"]["isError"] is False  # remembered now
    [grant] = [g for g in grants.list_grants(s.db, "3") if g.agent == agent]
    assert grants.revoke(s.db, grant.id, user_id="3")
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=30) as http:
        answer = http.post(s.url, json=message, headers=headers)
    assert answer.status_code == 401, answer.text
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    assert "notes_get" not in answer.text


def _write(body: str, **params: object) -> dict:
    return {"name": "notes_post", "arguments": {"body": body}, **params}


@pytest.mark.parametrize(
    ("message", "status"),
    [
        # JSON-RPC batches are gone from MCP: refused whole, no member runs.
        ([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": _write("batch")}], 400),
        ([], 400),
        # A call without a usable id is a notification: answered 202, run never.
        *(
            ({"jsonrpc": "2.0", "id": odd, "method": "tools/call", "params": _write("odd id")}, 202)
            for odd in (None, True, 1.5, [1], {"a": 1})
        ),
        ({"jsonrpc": "2.0", "method": "tools/call", "params": _write("no id")}, 202),
        ({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}, 200),
        ({"jsonrpc": "2.0", "id": 1, "method": "admin/wipe"}, 200),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": _write("meta", _meta={"rastrillo/approval": {"id": "a" * 48}}),
            },
            200,
        ),
        (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"admin_wipe_post",'
            '"arguments":{"x":' + "[" * 50_000 + "]" * 50_000 + "}}}",
            400,
        ),
        (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes_post",'
            '"arguments":{"body":"' + "b" * 5_000_000 + '"}}}',
            413,
        ),
    ],
    ids=[
        "batch",
        "empty-batch",
        "id-null",
        "id-bool",
        "id-float",
        "id-list",
        "id-object",
        "no-id",
        "unknown-method",
        "made-up-method",
        "meta-approval",
        "deep",
        "huge",
    ],
)
def test_odd_json_rpc_runs_nothing_and_asks_no_approval(served, message, status):
    """Whatever shape a hostile client gives a message, what is not a well-formed
    ``tools/call`` of a registered tool runs nothing, and proposes no write either."""
    s = served
    token = getattr(served, "_odd_token", None) or s.alice.token("odd")
    served._odd_token = token
    headers = {**HEADERS, "Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    content = message if isinstance(message, str) else json.dumps(message)
    before = s.notes(), s.db.query_one("SELECT COUNT(*) AS n FROM rastrillo_approvals").n
    with httpx.Client(verify=TLS, timeout=60) as http:
        answer = http.post(s.url, content=content, headers=headers)
    assert answer.status_code == status, answer.text
    if status == 200:  # a JSON-RPC answer; a write proposed would be a result with _meta
        assert "result" not in answer.json() or answer.json()["result"]["isError"] is True
    assert "TOPSECRET" not in answer.text and "wiped" not in answer.text
    after = s.notes(), s.db.query_one("SELECT COUNT(*) AS n FROM rastrillo_approvals").n
    if "_meta" in content:
        # A _meta approval is no approval: the call is proposed as any first call is.
        assert after[0] == before[0] and after[1] == before[1] + 1
        assert "Not run yet" in text(answer.json()["result"])
    else:
        assert after == before


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_write_approved_then_revoked_does_not_run(served, mode):
    """The user approved the call, then revoked the agent: the identical call, or the
    retry with its request state, on a token the server checked a moment ago, is a 401 and
    runs nothing."""
    s = served
    agent = f"approved-{mode}"
    token = s.alice.token(agent)
    args = {"body": f"approved then revoked {mode}"}

    async def session() -> None:
        async with answering(s, token, mode) as (client, statuses):
            first = await client.session.call_tool("notes_post", args, allow_input_required=True)
            if isinstance(first, types.InputRequiredResult):
                [elicit] = first.input_requests.values()
                url, state = elicit.params.url, first.request_state
            else:
                url, state = first.meta["rastrillo/approval"]["url"], None
            await anyio.to_thread.run_sync(s.alice.decide, url)
            revoke(s, agent)
            with pytest.raises(MCPError):
                await client.session.call_tool(
                    "notes_post", args, request_state=state, allow_input_required=True
                )
            assert statuses[-1] == 401

    anyio.run(session)
    assert ("3", args["body"]) not in s.notes()


def test_a_body_read_ahead_for_the_size_check_reaches_the_sdk_whole(served):
    """/mcp reads a POST's body ahead to hold it to max_body; the SDK still gets every
    byte, however the body is cut or however large it is."""
    s = served
    token = s.alice.token("big")
    body = tools_call("notes_id_get", {"id": "9" * 100_000}, request_id=7)
    raw = json.dumps(body).encode()

    def chunks():
        for start in range(0, len(raw), 1000):
            yield raw[start : start + 1000]

    headers = {**HEADERS, "Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(verify=TLS, timeout=30) as http:
        for content in (raw, chunks()):
            answer = http.post(s.url, content=content, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["id"] == 7 and "result" in answer.json()


def modern(s: Served, token: str):
    http = httpx2.AsyncClient(verify=TLS, timeout=30, headers={"Authorization": f"Bearer {token}"})
    return http, Client(
        streamable_http_client(s.url, http_client=http),
        mode="2026-07-28",
        elicitation_callback=_never,
    )


async def _never(context, params):  # pragma: no cover - the tests drive rounds by hand
    raise AssertionError("no elicitation expected")


def test_forged_or_replayed_request_state_is_refused(served):
    s = served
    alice, bob = s.alice.token("stateful"), s.bob.token("stateful")
    args = {"body": "stateful"}

    async def attack() -> None:
        http, client = modern(s, alice)
        async with http, client:
            first = await client.session.call_tool("notes_post", args, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            state = first.request_state
            [elicit] = first.input_requests.values()
            assert elicit.params.message == "Add the note stateful?"
            for forged in ("v1.AAAA", state[:-2] + "AA", state + "A", "not-a-state"):
                with pytest.raises(MCPError, match="requestState"):
                    await client.session.call_tool(
                        "notes_post", args, request_state=forged, allow_input_required=True
                    )
            # Bound to its call: the same state for other args is refused.
            with pytest.raises(MCPError, match="requestState"):
                await client.session.call_tool(
                    "notes_post", {"body": "other"}, request_state=state, allow_input_required=True
                )
            still = await client.session.call_tool(
                "notes_post", args, request_state=state, allow_input_required=True
            )
            assert isinstance(still, types.InputRequiredResult)  # pending: asked again
            await anyio.to_thread.run_sync(s.alice.decide, elicit.params.url)
            done = await client.session.call_tool(
                "notes_post", args, request_state=state, allow_input_required=True
            )
            assert isinstance(done, types.CallToolResult) and not done.is_error
            replay = await client.session.call_tool(
                "notes_post", args, request_state=state, allow_input_required=True
            )
            assert replay.is_error and "used" in replay.content[0].text
        # Bound to its grant: Bob cannot use Alice's state.
        http, client = modern(s, bob)
        async with http, client:
            with pytest.raises(MCPError, match="requestState"):
                await client.session.call_tool(
                    "notes_post", args, request_state=state, allow_input_required=True
                )

    anyio.run(attack)
    assert s.notes().count(("3", "stateful")) == 1
    assert ("4", "stateful") not in s.notes()


NAMES = st.one_of(
    st.sampled_from(
        [
            *TOOLS,
            "admin_wipe_post",
            "secret_get",
            "notes_post ",
            "NOTES_GET",
            "notes_get\n",
            "../secret",
            "notes_post\x00",
        ]
    ),
    st.text(max_size=30),
)
VALUES = st.one_of(
    st.text(max_size=20),
    st.integers(),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)
ARGS = st.dictionaries(
    st.sampled_from(["body", "id", "actor", "approval", "x", ""]) | st.text(max_size=10),
    VALUES,
    max_size=4,
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES, arguments=ARGS)
def test_fuzzed_calls_reach_no_unregistered_handler_and_run_no_unapproved_write(
    served, name, arguments
):
    s = served
    token = getattr(served, "_fuzz_token", None) or s.alice.token("fuzzer")
    served._fuzz_token = token
    before = s.notes()
    answer = s.call(token, name, arguments)
    # What a handler would have answered; the refusal may quote the name it was given.
    shown = json.dumps(answer).replace(json.dumps(name)[1:-1], "")
    assert "TOPSECRET" not in shown and "wiped" not in shown
    if "error" in answer:  # only the SDK's own shape checks may answer with a protocol error
        assert answer["error"]["code"] == -32602, answer
    else:
        result = answer["result"]
        if name not in TOOLS:
            assert result["isError"] is True
    assert s.notes() == before  # no write ran (none was approved), nothing was wiped


def test_a_write_too_long_to_read_is_refused_before_any_approval(served):
    """A model's half megabyte of args would be an approval page no one reads: refused, with
    a message the model can act on, and no approval asked (a body over max_body is 413)."""
    s = served
    token = s.alice.token("verbose")
    answer = s.call(token, "notes_post", {"body": "x" * 512 * 1024})["result"]
    assert answer["isError"] is True
    assert "at most 65,536 characters in all" in text(answer)
    asked = s.db.query_one("SELECT count(*) AS n FROM rastrillo_approvals WHERE agent = 'verbose'")
    assert asked.n == 0
    assert s.call(token, "notes_post", {"body": "x" * 1000})["result"]["isError"] is True
    assert (
        s.db.query_one("SELECT count(*) AS n FROM rastrillo_approvals WHERE agent = 'verbose'").n
        == 1
    )
