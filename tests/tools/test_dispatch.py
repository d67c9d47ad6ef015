"""Dispatch: validation in the order `dispatch` checks, the request it builds, the result."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime

import pytest

import rastrillo
from rastrillo import threads
from rastrillo.registry.declare import ToolDef
from rastrillo.tools import (
    BadActor,
    BadArg,
    Call,
    ConfirmRequired,
    MissingArg,
    ToolCallMarker,
    ToolError,
    UnknownArg,
    UnknownTool,
    dispatch,
    dispatch_sync,
)
from tests.tools._tools_app import Fixture, build

AGENT = rastrillo.Actor.agent("concierge")


@pytest.fixture
def f(tmp_path) -> Fixture:
    return build(tmp_path)


def call(f: Fixture, tool: str, args: dict | None = None, **kw) -> rastrillo.tools.Result:
    kw.setdefault("actor", AGENT)
    return dispatch_sync(f.app, f.defs, Call(tool=tool, args=args or {}, **kw))


def test_a_hand_built_write_given_as_a_string_still_needs_its_approval(tmp_path):
    f = build(tmp_path)
    delete = ToolDef(
        id="notes_id_delete",
        method="DELETE",
        path="/notes/{id}",
        description="Delete a note.",
        access="write",
        args={"id": "note"},
        confirm="Delete note {id}?",
    )
    with pytest.raises(BadActor, match="session"):
        dispatch_sync(f.app, [delete], Call(tool=delete.id, args={"id": "1"}, actor=AGENT))
    with pytest.raises(ConfirmRequired):
        dispatch_sync(
            f.app,
            [delete],
            Call(tool=delete.id, args={"id": "1"}, actor=AGENT, session=f.session("3")),
        )
    assert f.seen == []


@pytest.mark.parametrize("method", ["POST", "DELETE", "HEAD"])
def test_a_hand_built_read_tool_that_is_not_get_is_refused(tmp_path, method):
    f = build(tmp_path)
    read = ToolDef(
        id="notes_id_x", method=method, path="/notes/{id}", description="x", args={"id": "note"}
    )
    with pytest.raises(ToolError, match="a read tool must be a GET action"):
        dispatch_sync(
            f.app, [read], Call(tool=read.id, args={"id": "1"}, actor=AGENT, session=f.session("3"))
        )
    assert f.seen == []


def test_a_read_tool_reaches_its_handle_as_the_agent_for_the_user(f):
    session = f.session("3")
    result = call(f, "orders_id_get", {"id": "7"}, session=session)
    assert (result.status, result.text) == (200, "order 7")
    assert result.headers["content-type"].startswith("text/plain")
    [seen] = f.seen
    assert seen["params"] == {"id": "7"}
    assert seen["user_id"] == "3"
    assert seen["actor"] == rastrillo.Actor(human=False, name="concierge", user_id="3")
    assert str(seen["actor"]) == "agent:concierge"


def test_result_json_and_a_4xx_is_a_result(f):
    result = call(f, "search_get", {"q": "jazz", "page": "2"})
    assert result.json() == {"page": "2", "q": "jazz"}
    assert call(f, "me_get").status == 303  # behind require: no session, as a browser


@pytest.mark.parametrize(
    ("tool", "args", "error"),
    [
        ("made_up", {"id": "7"}, UnknownTool),
        ("orders_id_get", {"id": "7", "sneaky": "1", "also": "2"}, UnknownArg),
        ("orders_id_get", {}, MissingArg),
        ("orders_id_get", {"id": 7}, BadArg),
        ("orders_id_get", {"id": "a\x00b"}, BadArg),
        ("orders_id_get", {"id": "a\rb"}, BadArg),
        ("orders_id_get", {"id": "\u202eevil"}, BadArg),
        ("orders_id_get", {"id": "\u2066x"}, BadArg),
        ("orders_id_get", {"id": "\ud800"}, BadArg),
        ("orders_id_get", {"id": ""}, BadArg),
        ("orders_id_get", {"id": "."}, BadArg),
        ("orders_id_get", {"id": ".."}, BadArg),
    ],
)
def test_refusals_never_reach_a_handler(f, tool, args, error):
    with pytest.raises(error):
        call(f, tool, args, session=f.session("3"))
    assert f.seen == []


def test_unknown_args_are_all_named_sorted(f):
    with pytest.raises(UnknownArg) as info:
        call(f, "orders_id_get", {"id": "7", "zz": "1", "aa": "2"})
    assert info.value.names == ["aa", "zz"]
    assert "'aa', 'zz'" in str(info.value)


def test_a_flood_of_unknown_args_is_refused_in_a_few_words(f):
    # A model's call with 50,000 undeclared args (one of them long, one a terminal escape)
    # is refused naming the first few, escaped, and how many more: not 400 KB of names.
    flood = {f"x{i:05}": "1" for i in range(50_000)} | {"\x1b[2J": "1", "a" * 5000: "1"}
    with pytest.raises(UnknownArg) as info:
        call(f, "orders_id_get", {"id": "7"} | flood)
    assert len(info.value.names) == 50_002
    message = str(info.value)
    assert message == (
        "tool 'orders_id_get' takes no arg '\\x1b[2J', '"
        + "a" * 40
        + "'…, 'x00000', 'x00001', 'x00002' and 49997 more; its args are: id"
    )


def test_an_unknown_tool_of_any_length_is_named_in_a_few_words(f):
    with pytest.raises(UnknownTool) as info:
        call(f, "\u202e" + "t" * 100_000)
    assert str(info.value).startswith("unknown tool '\\u202e" + "t" * 39 + "'…; the tools are: ")
    assert len(str(info.value)) < 400


def test_the_order_of_checks(f):
    # An unknown arg wins over a missing one and a bad value; a bad arg over a bad actor;
    # a bad actor over the consent gate.
    with pytest.raises(UnknownArg):
        call(f, "orders_id_cancel_post", {"x": "\x00"})
    with pytest.raises(MissingArg):
        call(f, "orders_id_cancel_post", {"id": "\x00"})
    with pytest.raises(BadArg):
        call(f, "orders_id_cancel_post", {"id": "..", "reason": "x"}, actor=rastrillo.Actor())
    with pytest.raises(BadActor):
        call(f, "orders_id_cancel_post", {"id": "7", "reason": "x"}, actor=rastrillo.Actor())
    with pytest.raises(ConfirmRequired):
        call(f, "orders_id_cancel_post", {"id": "7", "reason": "x"}, session=f.session("3"))
    assert f.seen == []


@pytest.mark.parametrize(
    "actor",
    [
        rastrillo.Actor(),
        rastrillo.Actor(human=True, name="concierge"),
        rastrillo.Actor.agent(""),
        rastrillo.Actor.agent("has space"),
        rastrillo.Actor.agent("x" * 65),
        rastrillo.Actor.agent("concierge\n"),  # a name is matched whole, never up to a \n
        rastrillo.Actor.agent(7),
        "agent:concierge",
        None,
    ],
)
def test_only_a_named_agent_may_call(f, actor):
    with pytest.raises(BadActor):
        call(f, "orders_id_get", {"id": "7"}, actor=actor)
    assert f.seen == []


def test_an_actor_never_acts_in_another_users_session(f):
    session = f.session("3")
    someone_else = rastrillo.Actor(human=False, name="concierge", user_id="4")
    with pytest.raises(BadActor, match="user 4"):
        call(f, "me_get", actor=someone_else, session=session)
    same = rastrillo.Actor(human=False, name="concierge", user_id="3")
    assert call(f, "me_get", actor=same, session=session).json()["user"] == "3"


def test_a_read_naming_its_user_is_checked_with_no_thread_hop_of_its_own(f, monkeypatch):
    """The claimed user's session is read before the app runs, on SQLite on the event loop:
    the read still crosses to a worker thread once, for its sync ``handle``."""
    session = f.session("3")
    hops: list[str] = []
    real = threads.in_thread

    async def counted(func, *args):
        hops.append(getattr(func, "__name__", None) or func.func.__name__)
        return await real(func, *args)

    monkeypatch.setattr(threads, "in_thread", counted)
    same = rastrillo.Actor(human=False, name="concierge", user_id="3")
    assert call(f, "orders_id_get", {"id": "7"}, actor=same, session=session).text == "order 7"
    assert hops == ["_checked_handle"]
    someone_else = rastrillo.Actor(human=False, name="concierge", user_id="4")
    with pytest.raises(BadActor, match="user 4"):
        call(f, "orders_id_get", {"id": "7"}, actor=someone_else, session=session)
    assert hops == ["_checked_handle"]


def test_an_approval_cannot_ride_on_the_actor(f):
    forged = rastrillo.Actor(
        human=False,
        name="concierge",
        approval=rastrillo.Approval(id="x", approved_by="3", approved_at=datetime.now(UTC)),
    )
    with pytest.raises(BadActor):
        call(
            f,
            "orders_id_cancel_post",
            {"id": "7", "reason": "r"},
            actor=forged,
            session=f.session("3"),
        )
    assert f.seen == []


@pytest.mark.parametrize("session", ["", "x; rastrillo_session=abc", "a\r\nb", 7])
def test_a_malformed_session_is_refused(f, session):
    with pytest.raises(BadActor):
        call(f, "orders_id_get", {"id": "7"}, session=session)


def test_a_session_id_with_a_trailing_newline_is_refused_not_stripped(f):
    # The cookie parser would strip the newline and run the call as the user,
    # while dispatch would look up no session and audit it as nobody's.
    with pytest.raises(BadActor, match="not a session id"):
        call(f, "me_get", session=f.session("3") + "\n")
    assert f.seen == []


def test_a_write_needs_a_live_session_of_the_user(f):
    with pytest.raises(BadActor, match="session"):
        call(f, "orders_id_cancel_post", {"id": "7", "reason": "r"})
    with pytest.raises(BadActor, match="session"):
        call(f, "orders_id_cancel_post", {"id": "7", "reason": "r"}, session="dead-session-id")
    assert f.seen == []


def test_a_dead_session_reads_as_a_browser_without_one(f):
    result = call(f, "me_get", session="no-such-session")
    assert result.status == 303
    assert f.ran("me") == []


@pytest.mark.parametrize(
    ("value", "raw"),
    [
        ("a/b", b"/orders/a%2Fb"),
        ("a%2Fb", b"/orders/a%252Fb"),
        ("?x=1#y", b"/orders/%3Fx%3D1%23y"),
        ("../secret", b"/orders/..%2Fsecret"),
        ("...", b"/orders/..."),
        ("café ☕", b"/orders/caf%C3%A9%20%E2%98%95"),
        ("line\nbreak\ttab", b"/orders/line%0Abreak%09tab"),
    ],
)
def test_a_path_param_is_one_segment(f, value, raw, monkeypatch):
    scopes = []
    real = f.app._stack

    async def spy(scope, receive, send):
        scopes.append(scope)
        await real(scope, receive, send)

    monkeypatch.setattr(f.app, "_stack", spy)
    result = call(f, "orders_id_get", {"id": value})
    assert result.text == f"order {value}"
    assert scopes[0]["raw_path"] == raw
    assert [s["params"] for s in f.seen] == [{"id": value}]


def test_get_args_go_in_the_query_sorted(f, monkeypatch):
    scopes = []
    real = f.app._stack

    async def spy(scope, receive, send):
        scopes.append(scope)
        await real(scope, receive, send)

    monkeypatch.setattr(f.app, "_stack", spy)
    call(f, "search_get", {"q": "a&b=c d", "page": "1"})
    assert scopes[0]["query_string"] == b"page=1&q=a%26b%3Dc+d"
    assert f.ran("search")[0]["query"] == {"page": "1", "q": "a&b=c d"}


def test_write_args_go_in_a_form_body_and_the_marker_carries_the_approval(f, monkeypatch):
    from rastrillo.tools import consent

    session = f.session("3")
    args = {"id": "a/b", "reason": "dup & more=1"}
    with pytest.raises(ConfirmRequired) as info:
        call(f, "orders_id_cancel_post", args, session=session)
    consent.decide(f.app.db, "3", info.value.approval_id, True)
    scopes = []
    real = f.app._stack

    async def spy(scope, receive, send):
        scopes.append(scope)
        await real(scope, receive, send)

    monkeypatch.setattr(f.app, "_stack", spy)
    result = call(
        f,
        "orders_id_cancel_post",
        args,
        session=session,
        approval=info.value.approval_id,
        call_id="toolu_01",
    )
    assert result.status == 303 and result.headers["location"] == "/orders/a/b"
    headers = dict(scopes[0]["headers"])
    assert headers[b"content-type"] == b"application/x-www-form-urlencoded"
    marker = scopes[0]["rastrillo.tool_call"]
    assert isinstance(marker, ToolCallMarker)
    # The session travels in the marker alone: no handler can return it to the model.
    assert b"cookie" not in headers and marker.session_id == session
    assert marker.actor.approval is not None and marker.actor.approval.approved_by == "3"
    [seen] = f.ran("cancel")
    assert seen["form"] == {"reason": "dup & more=1"}
    assert seen["actor"].approval == marker.actor.approval


def test_a_delete_tool_sends_its_args_as_a_form_too(f):
    from rastrillo.tools import consent

    session = f.session("3")
    with pytest.raises(ConfirmRequired) as info:
        call(f, "notes_id_delete", {"id": "9"}, session=session)
    consent.decide(f.app.db, "3", info.value.approval_id, True)
    result = call(
        f, "notes_id_delete", {"id": "9"}, session=session, approval=info.value.approval_id
    )
    assert result.status == 204
    assert f.ran("delete_note")[0]["method"] == "DELETE"


def test_a_handler_exception_is_a_logged_500(f, caplog):
    with caplog.at_level(logging.ERROR):
        result = call(f, "boom_get")
    assert result.status == 500
    assert "boom" in caplog.text


def test_an_exception_in_middleware_is_a_logged_500(tmp_path, caplog):
    def wrap(app):
        async def broken(scope, receive, send):
            raise RuntimeError("middleware broke")

        return broken

    f = build(tmp_path, wrap=wrap)
    with caplog.at_level(logging.ERROR):
        result = call(f, "search_get", {"q": "x", "page": "1"})
    assert result.status == 500
    assert "middleware broke" in caplog.text


def test_middleware_that_sends_no_response_is_a_logged_500(tmp_path, caplog):
    def wrap(app):
        async def silent(scope, receive, send):
            return None  # neither calls the app nor answers

        return silent

    f = build(tmp_path, wrap=wrap)
    with caplog.at_level(logging.ERROR):
        result = call(f, "search_get", {"q": "x", "page": "1"})
    assert (result.status, result.text) == (500, "Internal Server Error")
    assert "search_get (GET /search): the app sent no response" in caplog.text


def test_dispatch_from_async_code(f):
    async def main():
        return await dispatch(
            f.app, f.defs, Call(tool="orders_id_get", args={"id": "1"}, actor=AGENT)
        )

    assert asyncio.run(main()).text == "order 1"


def test_dispatch_sync_hands_back_its_result_without_writing_it_out(f, monkeypatch):
    """A result's text form is its whole body: a script's call of a megabyte answer must not
    pay for one it never asked for (Python 3.11's asyncio.run formats its finished task)."""
    written: list[object] = []

    def text(result: object) -> str:
        written.append(result)
        return "Result"

    monkeypatch.setattr(rastrillo.tools.Result, "__repr__", text)
    result = call(f, "orders_id_get", {"id": "1"})
    assert (result.text, written) == ("order 1", [])


def test_dispatch_sync_refuses_inside_a_running_loop(f):
    async def main():
        dispatch_sync(f.app, f.defs, Call(tool="orders_id_get", args={"id": "1"}, actor=AGENT))

    with pytest.raises(RuntimeError, match="await dispatch"):
        asyncio.run(main())
    assert f.seen == []


def test_a_browser_request_has_a_human_actor(f):
    from starlette.testclient import TestClient

    client = TestClient(f.app, base_url=f.app.origin)
    client.cookies.set("rastrillo_session", f.session("5"))
    assert client.get("/me").json() == {"user": "5", "actor": "human"}
    assert f.seen[-1]["actor"] == rastrillo.Actor(human=True, user_id="5")


@pytest.mark.parametrize(
    ("tool", "args", "handler"),
    [
        ("notes_id_get", {"id": "export"}, "note"),
        ("name_get", {"name": "healthz"}, "page"),
        ("name_get", {"name": "api"}, "page"),
        ("name_get", {"name": "me"}, "page"),
        ("name_get", {"name": "static"}, "page"),
    ],
)
def test_a_read_reaches_exactly_its_tools_route_never_a_literal_sibling(f, tool, args, handler):
    result = call(f, tool, args, session=f.session("3"))
    assert result.status == 200
    [seen] = f.seen
    assert (seen["handler"], seen["params"]) == (handler, args)


def test_an_approved_write_runs_exactly_what_the_sentence_names(f):
    session = f.session("3")
    with pytest.raises(ConfirmRequired) as pending:
        call(f, "notes_id_erase_post", {"id": "all"}, session=session)
    assert pending.value.sentence == "Erase note all?"
    rastrillo.tools.consent.decide(f.app.db, "3", pending.value.approval_id, True)
    result = call(
        f, "notes_id_erase_post", {"id": "all"}, session=session, approval=pending.value.approval_id
    )
    assert result.text == "erased all"
    assert [s["handler"] for s in f.seen] == ["erase"]


def test_dispatch_never_blocks_the_event_loop_on_the_database(f):
    """Another thread holds the write lock until the event loop runs again: dispatch
    waiting on the database must leave the loop free, or this never ends."""
    session = f.session("3")
    holding, loop_ran = threading.Event(), threading.Event()
    released_by_the_loop: list[bool] = []

    def hold() -> None:
        with f.app.db.write():
            holding.set()
            released_by_the_loop.append(loop_ran.wait(30))

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(30)

    async def main() -> None:
        write = Call(
            tool="orders_id_cancel_post",
            args={"id": "1", "reason": "r"},
            actor=AGENT,
            session=session,
        )
        proposing = asyncio.create_task(dispatch(f.app, f.defs, write))
        await asyncio.sleep(0)  # dispatch runs up to its first wait
        loop_ran.set()
        with pytest.raises(ConfirmRequired):
            await proposing

    asyncio.run(main())
    holder.join()
    assert released_by_the_loop == [True]


def test_dispatch_takes_the_registry_from_the_app_or_as_given(tmp_path):
    f = build(tmp_path)
    assert f.app.tools == tuple(f.app.options.tools)
    order = Call(tool="orders_id_get", args={"id": "7"}, actor=AGENT)
    assert dispatch_sync(f.app, order).text == "order 7"
    assert dispatch_sync(f.app, f.defs, order).text == "order 7"
    assert dispatch_sync(f.app, call=order).text == "order 7"
    assert asyncio.run(dispatch(f.app, order)).text == "order 7"
    # The registry given is the one checked, not the app's.
    with pytest.raises(UnknownTool):
        dispatch_sync(f.app, [], order)
    with pytest.raises(TypeError, match="dispatch\\(app, call\\)"):
        dispatch_sync(f.app, f.defs)  # type: ignore[call-overload]
    assert len(f.ran("order")) == 3 + 1


def test_a_list_registry_is_read_as_it_is_at_each_call(tmp_path):
    """``Options.tools`` is kept as a tuple, whose plans are worked out once; a list
    given to ``dispatch`` may change between calls, and each call sees it as it is."""
    f = build(tmp_path)
    assert f.app.options.tools == tuple(f.defs)
    registry = [defn for defn in f.defs if defn.id != "orders_id_get"]
    order = Call(tool="orders_id_get", args={"id": "7"}, actor=AGENT)
    with pytest.raises(UnknownTool):
        dispatch_sync(f.app, registry, order)
    registry.append(next(defn for defn in f.defs if defn.id == "orders_id_get"))
    assert dispatch_sync(f.app, registry, order).text == "order 7"
    registry.clear()
    with pytest.raises(UnknownTool, match="the tools are: none"):
        dispatch_sync(f.app, registry, order)
