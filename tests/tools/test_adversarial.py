"""Adversarial properties of dispatch and consent, with hypothesis and a real server.

What must never happen, whatever a model or an attacker sends: a handler that
is not the registered tool's reached; a write run without its approval; a user
acting in another's session; an approval run twice.
"""

from __future__ import annotations

import string

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

import rastrillo
from rastrillo import visible
from rastrillo.context import TOOL_CALL_SCOPE_KEY
from rastrillo.sessions import cookie_name
from rastrillo.testing import live_server
from rastrillo.tools import (
    ApprovalInvalid,
    BadActor,
    BadArg,
    Call,
    ConfirmRequired,
    MissingArg,
    ToolError,
    UnknownArg,
    UnknownTool,
    consent,
)
from rastrillo.tools import dispatch_sync as run
from tests.support import TLS
from tests.tools._tools_app import Fixture, build

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
UNSAFE = {chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]} | {
    "\u061c",
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
}
TRICKY = [
    *"/\\.%?#&=+;, \t\n\r\x00{}'\"<>",
    "%2F",
    "%2e%2e",
    "..",
    "é",
    "☕",
    "\u202e",
    "\u2066",
    "\ufeff",
    "\U0001f600",
    "\x85",
    # Invisible, but allowed in a value: the approval page must show each one.
    "\u200b",
    "\u2028",
    "\u2029",
    "\u00ad",
    "\u3164",
    "\u2800",
    "\ufe0f",
    "\U000e0041",
    "\u3000",
    # Names of literal siblings and framework endpoints a path value could reach.
    "export",
    "all",
    "healthz",
    "secret",
    "static",
]
values = st.one_of(
    st.text(),
    st.lists(st.sampled_from(TRICKY), max_size=12).map("".join),
    st.sampled_from(["", ".", "..", "...", "./", "../x", "%", "%00", "a/../b"]),
    st.builds(
        lambda s, n: s * n, st.sampled_from(["a", "/", "é", "%2F", ".."]), st.integers(500, 20_000)
    ),
)
names = st.one_of(st.text(max_size=80), st.sampled_from(["id", "reason", "q", "page", "x"]))


@pytest.fixture(scope="module")
def f(tmp_path_factory) -> Fixture:
    return build(tmp_path_factory.mktemp("adversarial"))


@pytest.fixture(scope="module")
def sessions(f) -> dict[str, str]:
    return {user: f.session(user) for user in ("3", "4")}


HANDLERS = {
    "orders_id_get": "order",
    "notes_id_get": "note",
    "name_get": "page",
    "me_get": "me",
    "search_get": "search",
    "boom_get": "boom",
}


def safe(value: str) -> bool:
    return not (set(value) & UNSAFE) and not any(0xD800 <= ord(c) <= 0xDFFF for c in value)


@FUZZ
@given(
    tool=st.one_of(
        st.text(max_size=100),
        st.sampled_from(
            ["orders_id_get", "notes_id_get", "name_get", "secret_get", "secret_post", "get", ""]
        ),
    ),
    args=st.dictionaries(names, values, max_size=3),
)
def test_only_a_registered_tool_handler_is_ever_reached(f, sessions, tool, args):
    before = len(f.seen)
    call = Call(tool=tool, args=args, actor=rastrillo.Actor.agent("fuzz"), session=sessions["3"])
    try:
        result = run(f.app, f.defs, call)
    except ToolError:
        assert len(f.seen) == before
        return
    registered = {d.id: d for d in f.defs}
    assert tool in registered
    ran = f.seen[before:]
    assert len(ran) <= 1
    assert all(s["handler"] == HANDLERS[tool] for s in ran)  # its own route, no sibling
    assert registered[tool].access is rastrillo.ToolRead  # no write without its approval
    assert result.status in (200, 303, 404, 500)


@FUZZ
@given(value=values)
def test_a_path_value_reaches_its_handler_exactly_or_is_refused(f, value):
    before = len(f.seen)
    call = Call(tool="orders_id_get", args={"id": value}, actor=rastrillo.Actor.agent("fuzz"))
    if value in ("", ".", "..") or not safe(value):
        with pytest.raises(BadArg):
            run(f.app, f.defs, call)
        assert len(f.seen) == before
        return
    result = run(f.app, f.defs, call)
    assert result.status == 200
    [seen] = f.seen[before:]
    assert (seen["handler"], seen["params"]) == ("order", {"id": value})
    assert result.text == f"order {value}"


@settings(FUZZ, max_examples=100)
@given(args=st.fixed_dictionaries({"q": values, "page": values}))
def test_query_args_arrive_exactly_or_are_refused(f, args):
    before = len(f.seen)
    call = Call(tool="search_get", args=args, actor=rastrillo.Actor.agent("fuzz"))
    if not all(safe(v) for v in args.values()):
        with pytest.raises(BadArg):
            run(f.app, f.defs, call)
        assert len(f.seen) == before
        return
    result = run(f.app, f.defs, call)
    assert result.json() == args
    assert f.seen[before]["query"] == args


@settings(FUZZ, max_examples=50)
@given(args=st.dictionaries(names, values, max_size=4).filter(lambda a: a.keys() != {"q", "page"}))
def test_query_args_by_other_names_are_refused(f, args):
    """Any name but the declared ones is unknown; a declared one left out is missing."""
    before = len(f.seen)
    call = Call(tool="search_get", args=args, actor=rastrillo.Actor.agent("fuzz"))
    with pytest.raises(UnknownArg if args.keys() - {"q", "page"} else MissingArg):
        run(f.app, f.defs, call)
    assert len(f.seen) == before


@FUZZ
@given(
    args=st.dictionaries(st.sampled_from(["id", "reason", "x"]), values, max_size=3),
    approval=st.one_of(st.none(), st.text(max_size=60)),
    agent=st.sampled_from(["concierge", "", "a b", "human"]),
)
def test_a_write_never_runs_without_an_approval(f, sessions, args, approval, agent):
    before = len(f.seen)
    actor = rastrillo.Actor.agent(agent) if agent != "human" else rastrillo.Actor()
    call = Call(
        tool="orders_id_cancel_post",
        args=args,
        actor=actor,
        session=sessions["3"],
        approval=approval,
    )
    with pytest.raises(ToolError):
        run(f.app, f.defs, call)
    assert len(f.seen) == before


@FUZZ
@given(claimed=st.sampled_from([None, "3", "4", "5", ""]), owner=st.sampled_from(["3", "4"]))
def test_a_user_never_acts_in_another_users_session(f, sessions, claimed, owner):
    before = len(f.seen)
    actor = rastrillo.Actor(human=False, name="concierge", user_id=claimed)
    call = Call(tool="me_get", args={}, actor=actor, session=sessions[owner])
    if claimed is not None and claimed != owner:
        with pytest.raises(BadActor):
            run(f.app, f.defs, call)
        assert len(f.seen) == before
        return
    assert run(f.app, f.defs, call).json() == {"user": owner, "actor": "agent:concierge"}
    [seen] = f.seen[before:]
    assert seen["user_id"] == seen["actor"].user_id == owner


ATTEMPT = st.tuples(
    st.sampled_from(["3", "4"]),  # whose session
    st.sampled_from(["concierge", "other"]),  # which agent
    st.sampled_from(
        [
            {"id": "7", "reason": "dup"},
            {"id": "7", "reason": "dup "},
            {"id": "8", "reason": "dup"},
            {"id": "7", "reason": "Dup"},
        ]
    ),
    st.sampled_from(["this", "another", "declined", "pending"]),  # which approval id
)


@FUZZ
@given(attempts=st.lists(ATTEMPT, min_size=1, max_size=8))
def test_a_stolen_or_replayed_approval_never_runs_a_call(f, sessions, attempts):
    """User 3 approved one exact call; another pending, and a declined one exist too."""
    exact = ("3", "concierge", {"id": "7", "reason": "dup"})
    # Four proposals of the one exact call (an identical call names its pending one
    # again, so they are recorded directly, as four separate proposals would be).
    ids = {
        name: consent.request_approval(
            f.app.db,
            tool="orders_id_cancel_post",
            args=exact[2],
            sentence="Cancel order 7? Its tickets go back on sale.",
            actor="agent:concierge",
            user_id="3",
        ).id
        for name in ("this", "another", "declined", "pending")
    }
    consent.decide(f.app.db, "3", ids["this"], True)
    consent.decide(f.app.db, "3", ids["another"], True)
    consent.decide(f.app.db, "3", ids["declined"], False)
    runs: dict[str, int] = {}
    before = len(f.ran("cancel"))
    for user, agent, args, which in attempts:
        call = Call(
            tool="orders_id_cancel_post",
            args=args,
            actor=rastrillo.Actor.agent(agent),
            session=sessions[user],
            approval=ids[which],
        )
        try:
            run(f.app, f.defs, call)
        except ApprovalInvalid:
            continue
        assert (user, agent, args) == exact and which in ("this", "another")
        runs[which] = runs.get(which, 0) + 1
        assert f.ran("cancel")[-1]["actor"].approval.id == ids[which]
    assert all(n == 1 for n in runs.values())  # never twice
    assert len(f.ran("cancel")) - before == len(runs)


# Over real HTTP: nothing a client sends can stand in for the in-process marker.

MARKER_NAMES = [
    TOOL_CALL_SCOPE_KEY,
    "rastrillo-tool-call",
    "x-rastrillo-tool-call",
    "tool_call",
    "rastrillo_tool_call",
    "x-tool-call",
    "x-agent",
    "rastrillo.user_id",
]
token_chars = st.text(
    alphabet=string.ascii_letters + string.digits + "-_.:", min_size=1, max_size=40
)


@pytest.fixture(scope="module")
def server(f):
    with live_server(f.options) as app:
        yield app


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(MARKER_NAMES),
    value=token_chars,
    where=st.sampled_from(["header", "cookie", "form", "query"]),
    evidence=st.sampled_from(
        [
            {},
            {"Sec-Fetch-Site": "cross-site"},
            {"Origin": "https://evil.example"},
            {"Origin": "null"},
            {"Referer": "https://evil.example/x"},
        ]
    ),
    path=st.sampled_from(["/orders/7/cancel", "/secret"]),
)
def test_a_forged_marker_over_http_is_refused_by_csrf(
    f, server, name, value, where, evidence, path
):
    owner_session = f.session("3")
    headers = dict(evidence)
    cookies = {cookie_name(server.origin): owner_session}
    data = {"reason": "dup"}
    params = {}
    if where == "header":
        headers[name.replace(".", "-")] = value
    elif where == "cookie":
        cookies[name] = value
    elif where == "form":
        data[name] = value
    else:
        params[name] = value
    before = len(f.seen)
    with httpx.Client(verify=TLS, base_url=server.origin, cookies=cookies) as client:
        response = client.post(path, headers=headers, data=data, params=params)
    assert response.status_code == 403
    assert len(f.seen) == before


def test_a_same_origin_browser_still_passes_over_http(f, server):
    """The control for the test above: with same-origin evidence the POST goes through."""
    with httpx.Client(
        verify=TLS, base_url=server.origin, cookies={cookie_name(server.origin): f.session("3")}
    ) as client:
        response = client.post("/secret", headers={"Origin": server.origin})
    assert response.status_code == 200


def test_an_approval_cannot_be_decided_cross_site_over_http(f, server, sessions):
    with pytest.raises(ConfirmRequired) as info:
        run(
            f.app,
            f.defs,
            Call(
                tool="orders_id_cancel_post",
                args={"id": "1", "reason": "r"},
                # An agent of its own: the fuzzed writes above keep concierge's approvals
                # waiting for user 3 up to the cap.
                actor=rastrillo.Actor.agent("proposer"),
                session=sessions["3"],
            ),
        )
    path = "/_rastrillo/approvals/" + info.value.approval_id
    with httpx.Client(
        verify=TLS, base_url=server.origin, cookies={cookie_name(server.origin): f.session("3")}
    ) as client:
        forged = client.post(
            path,
            data={"decision": "approve", TOOL_CALL_SCOPE_KEY: "1"},
            headers={"Sec-Fetch-Site": "cross-site", "rastrillo-tool-call": "1"},
        )
        assert forged.status_code == 403
        assert consent.get(f.app.db, info.value.approval_id).status == "pending"
        other = httpx.Client(
            verify=TLS, base_url=server.origin, cookies={cookie_name(server.origin): f.session("4")}
        )
        assert other.get(path).status_code == 404
        assert (
            other.post(
                path, data={"decision": "approve"}, headers={"Origin": server.origin}
            ).status_code
            == 404
        )
        other.close()
        assert consent.get(f.app.db, info.value.approval_id).status == "pending"
        mine = client.post(path, data={"decision": "approve"}, headers={"Origin": server.origin})
        assert mine.status_code == 303
    assert consent.get(f.app.db, info.value.approval_id).status == "approved"


def test_unregistered_routes_exist_but_no_tool_reaches_them(f):
    before = len(f.ran("secret"))
    for tool in ("secret_get", "secret_post", "a_secret", "../secret", "secret"):
        with pytest.raises(UnknownTool):
            run(f.app, f.defs, Call(tool=tool, args={}, actor=rastrillo.Actor.agent("x")))
    assert len(f.ran("secret")) == before


@FUZZ
@given(value=values, tool=st.sampled_from(["notes_id_get", "name_get"]))
def test_a_path_value_never_reaches_a_literal_sibling_or_an_endpoint(f, value, tool):
    """`/notes/{id}` beside `/notes/export`, and `/{name}` beside `/healthz`, `/secret`…"""
    before = len(f.seen)
    param = "id" if tool == "notes_id_get" else "name"
    call = Call(tool=tool, args={param: value}, actor=rastrillo.Actor.agent("fuzz"))
    try:
        result = run(f.app, f.defs, call)
    except BadArg:
        assert value in ("", ".", "..") or not safe(value)
        assert len(f.seen) == before
        return
    [seen] = f.seen[before:]
    assert (seen["handler"], seen["params"]) == (HANDLERS[tool], {param: value})
    assert result.status == 200


@FUZZ
@given(reason=values)
def test_the_approval_page_shows_every_character_approved(f, sessions, reason):
    call = Call(
        tool="orders_id_cancel_post",
        args={"id": "7", "reason": reason},
        actor=rastrillo.Actor.agent("fuzz"),
        session=sessions["3"],
    )
    try:
        run(f.app, f.defs, call)
    except ConfirmRequired as pending:
        url, approval_id = pending.url, pending.approval_id
    except BadArg:
        assert not safe(reason)
        return
    client = TestClient(f.app, base_url=f.app.origin)
    client.cookies.set(cookie_name(f.app.origin), sessions["3"])
    page = client.get(url).text
    # Seen, and declined: the agent's approvals waiting for the user are capped.
    consent.decide(f.app.db, "3", approval_id, False)
    hidden = [c for c in reason if visible.is_hidden(c)]
    # None sent raw, where it would show as nothing (a newline is the page's own, too).
    assert not (set(hidden) - {"\n"}) & set(page)
    edges = len(reason) - len(reason.strip(" "))
    marks = [f">{visible.label(c)}</span>" for c in hidden if c != "\n"]
    for mark in set(marks):  # in the table's row for reason (the sentence has no reason)
        assert page.count(mark) >= marks.count(mark)
    if edges and reason.strip(" "):
        assert ">U+0020</span>" in page


@FUZZ
@given(text=st.text())
def test_terminal_text_is_one_line_with_nothing_hidden(text):
    shown = visible.for_terminal(text)
    assert not any(visible.is_hidden(c) for c in shown)
    assert "\n" not in shown and "\r" not in shown
