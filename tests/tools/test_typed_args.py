"""Typed args end to end: dispatch's checks and wire texts, consent, and ctx.args.

Built in code around real apps (a fresh SQLite database each), so the same
declaration is checked by dispatch, sent on the wire and read back by
``ctx.args`` in the handler, as a browser's request is.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

import rastrillo
from rastrillo.registry.declare import Arg, ToolDef, tool_id
from rastrillo.registry.validate import Invalid, accept, wire
from rastrillo.routing import Route
from rastrillo.sessions import cookie_name, create_session
from rastrillo.tools import (
    BadArg,
    Call,
    ConfirmRequired,
    MissingArg,
    ToolError,
    audit,
    consent,
    dispatch_sync,
)
from tests.registry.strategies import (
    JSON_VALUES,
    PATH_ARGS,
    PLAIN_CHARACTERS,
    args,
    values_for,
)

AGENT = rastrillo.Actor.agent("concierge")
QUANTITY = Arg("how many tickets", type=int, minimum=1, maximum=10)
READ_ARGS: dict[str, Arg | str] = {
    "id": Arg("the event id", type=int, minimum=1),
    "price": Arg("at most this price", type=float, minimum=0, required=False),
    "seat": Arg("where to sit", choices=["aisle", "window"], required=False),
    "gift": Arg("wrapped", type=bool, required=False),
    "note": Arg("a note", required=False, max_length=5),
    "q": "search text",
}
BUY_ARGS: dict[str, Arg | str] = {
    "id": "the event id",
    "quantity": QUANTITY,
    "gift": Arg("wrapped", type=bool, required=False),
}
BUY = "Buy {quantity} ticket(s) for event {id}?"


class TypedApp:
    """An app whose handlers record ``ctx.args`` and the raw request they got."""

    def __init__(self, root: Path, read_args: dict[str, Any], buy_args: dict[str, Any]) -> None:
        self.seen: list[dict[str, Any]] = []

        def record(ctx: rastrillo.Context) -> rastrillo.App:
            try:
                typed = dict(ctx.args)
            except rastrillo.ArgError as exc:
                self.seen.append({"errors": exc.errors})
                raise
            self.seen.append(
                {
                    "args": typed,
                    "query": ctx.request.url.query,
                    "target": ctx.request.scope["raw_path"]
                    + b"?"
                    + ctx.request.scope["query_string"],
                    "form": dict(ctx.form),
                    "params": dict(ctx.params),
                    "actor": ctx.actor,
                }
            )
            return ctx.json({name: value for name, value in typed.items()})

        def tool(method: str, path: str, arg_map: dict[str, Any], **kw: Any) -> ToolDef:
            return ToolDef(
                id=tool_id(method, path),
                method=method,
                path=path,
                description=f"{method} {path}",
                args=arg_map,
                **kw,
            )

        self.defs = [
            tool("GET", "/events/{id}", read_args),
            tool("POST", "/events/{id}/buy", buy_args, access=rastrillo.ToolWrite, confirm=BUY),
        ]
        options = rastrillo.Options(
            app_dir=root,
            routes=[
                Route("GET", "/events/{id}", "read", record),
                Route("POST", "/events/{id}/buy", "buy", record),
            ],
            tools=self.defs,
            origin="http://testserver.local",
            db=str(root / "app.db"),
        )
        self.app = rastrillo.handler(options)
        self.session = create_session(self.app.db, "1")

    def call(self, tool: str, args: dict[str, Any], **kw: Any) -> rastrillo.tools.Result:
        kw.setdefault("session", self.session)
        return dispatch_sync(self.app, self.defs, Call(tool=tool, args=args, actor=AGENT, **kw))

    def close(self) -> None:
        """Write the audit rows still queued, then let the database go."""
        audit.flush(self.app.db)
        self.app.db.dispose()

    def browser(self) -> TestClient:
        client = TestClient(self.app, base_url=self.app.origin, headers={"Origin": self.app.origin})
        client.cookies.set(cookie_name(self.app.origin), self.session)
        return client


@pytest.fixture
def t(tmp_path: Path) -> TypedApp:
    return TypedApp(tmp_path, READ_ARGS, BUY_ARGS)


def test_typed_values_reach_ctx_args_typed(t: TypedApp) -> None:
    result = t.call(
        "events_id_get",
        {"id": 7, "price": 2, "seat": "aisle", "gift": False, "note": "hi", "q": "2"},
    )
    assert result.status == 200
    [seen] = t.seen
    assert seen["args"] == {
        "id": 7,
        "price": 2.0,
        "seat": "aisle",
        "gift": False,
        "note": "hi",
        "q": "2",
    }
    assert [type(seen["args"][k]) for k in ("id", "price", "gift", "q")] == [int, float, bool, str]
    assert seen["query"] == "gift=false&note=hi&price=2.0&q=2&seat=aisle"  # canonical, sorted
    assert seen["params"] == {"id": "7"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"id": "7", "q": "x"}, "arg 'id': must be an integer of at least 1, not the string '7'"),
        ({"id": True, "q": "x"}, "arg 'id': must be an integer of at least 1, not true"),
        ({"id": 7.0, "q": "x"}, "not the number 7.0"),
        ({"id": 0, "q": "x"}, "not the integer 0"),
        ({"id": 7, "q": 2}, "arg 'q': must be a string, not the integer 2"),
        ({"id": 7, "q": "x", "price": "1.5"}, "arg 'price': must be a number of at least 0"),
        ({"id": 7, "q": "x", "price": -0.5}, "not the number -0.5"),
        ({"id": 7, "q": "x", "price": float("nan")}, "not the number nan"),
        ({"id": 7, "q": "x", "seat": "roof"}, 'must be one of "aisle", "window"'),
        ({"id": 7, "q": "x", "gift": "true"}, "arg 'gift': must be true or false"),
        ({"id": 7, "q": "x", "gift": 1}, "not the integer 1"),
        ({"id": 7, "q": "x", "note": "toolong"}, "a string of at most 5 characters"),
        ({"id": 7, "q": None}, "arg 'q': must be a string, not null"),
    ],
)
def test_no_silent_coercion(t: TypedApp, args: dict[str, Any], message: str) -> None:
    with pytest.raises(BadArg) as raised:
        t.call("events_id_get", args)
    assert message in str(raised.value)
    assert t.seen == []


def test_an_optional_arg_absent_none_or_empty_is_not_sent(t: TypedApp) -> None:
    t.call("events_id_get", {"id": 7, "q": "", "seat": None, "note": ""})
    [seen] = t.seen
    assert seen["query"] == "q="
    assert seen["args"] == {
        "id": 7,
        "price": None,
        "seat": None,
        "gift": None,
        "note": None,
        "q": "",
    }


def test_a_required_arg_left_out_is_missing(t: TypedApp) -> None:
    with pytest.raises(MissingArg, match="needs the arg 'q'; it is required"):
        t.call("events_id_get", {"id": 7, "price": 1.5})


def test_the_sentence_and_the_approval_use_the_wire_texts(t: TypedApp) -> None:
    with pytest.raises(ConfirmRequired) as raised:
        t.call("events_id_buy_post", {"id": "3", "quantity": 2, "gift": True})
    pending = raised.value
    assert pending.sentence == "Buy 2 ticket(s) for event 3?"
    record = consent.get(t.app.db, pending.approval_id)
    assert record is not None and record.args == {"id": "3", "quantity": 2, "gift": True}
    consent.decide(t.app.db, "1", pending.approval_id, True)
    with pytest.raises(BadArg):  # "2" is not the 2 the human approved, nor any integer
        t.call("events_id_buy_post", {"id": "3", "quantity": "2"}, approval=pending.approval_id)
    result = t.call(
        "events_id_buy_post", {"id": "3", "quantity": 2, "gift": True}, approval=pending.approval_id
    )
    assert result.status == 200 and result.json() == {"id": "3", "quantity": 2, "gift": True}
    [seen] = t.seen
    assert seen["form"] == {"gift": "true", "quantity": "2"}
    assert seen["actor"].approval is not None


def test_a_float_approved_as_an_integer_runs_as_the_same_number(tmp_path: Path) -> None:
    t = TypedApp(tmp_path, READ_ARGS, {"id": "event", "price": Arg("p", type=float)})
    with pytest.raises(ConfirmRequired) as raised:
        t.call("events_id_buy_post", {"id": "3", "price": 2})
    consent.decide(t.app.db, "1", raised.value.approval_id, True)
    t.call("events_id_buy_post", {"id": "3", "price": 2.0}, approval=raised.value.approval_id)
    assert t.seen[0]["args"]["price"] == 2.0 and t.seen[0]["form"] == {"price": "2.0"}


@pytest.mark.parametrize("code", ["12\n", "\u0661\u0662", "\uff11\uff12"])
def test_a_pattern_means_what_it_means_to_the_model_for_a_call_and_a_browser(
    tmp_path: Path, code: str
) -> None:
    """`^[0-9]+$` and `^\\d+$` say ASCII digits to the model (ECMA-262, as its schema
    does); Python's `re` alone would take a final newline, or digits of other scripts
    and widths. Neither a tool call nor a browser gets such a value to the handler."""
    declared = {
        **READ_ARGS,
        "note": Arg("a code", required=False, pattern="^[0-9]+$"),
        "q": Arg("another", pattern=r"^\d+$"),
    }
    t = TypedApp(tmp_path, declared, BUY_ARGS)
    try:
        for name in ("note", "q"):
            args = {"id": 7, "q": "12", name: code}
            with pytest.raises(BadArg, match=f"arg '{name}'"):
                t.call("events_id_get", args)
            refused = t.browser().get("/events/7", params={k: str(v) for k, v in args.items()})
            assert refused.status_code == 400 and refused.text.startswith(f"{name}: ")
        assert t.call("events_id_get", {"id": 7, "q": "12", "note": "34"}).json()["note"] == "34"
        assert [seen["args"]["q"] for seen in t.seen if "args" in seen] == ["12"]
    finally:
        t.close()


def test_a_browser_form_and_a_tool_call_get_the_same_validation(t: TypedApp) -> None:
    browser = t.browser()
    ok = browser.get("/events/7", params={"q": "x", "price": "2.5", "gift": "on"})
    assert ok.status_code == 200 and ok.json()["price"] == 2.5 and ok.json()["gift"] is True
    bad = browser.get("/events/7", params={"q": "x", "price": "1_0", "seat": "roof"})
    assert bad.status_code == 400
    assert bad.headers["content-type"].startswith("text/plain")
    assert bad.text.splitlines() == [
        "price: must be a number of at least 0, not the string '1_0'",
        'seat: must be one of "aisle", "window", not the string \'roof\'',
    ]
    assert t.seen[-1] == {
        "errors": {
            "price": "must be a number of at least 0, not the string '1_0'",
            "seat": 'must be one of "aisle", "window", not the string \'roof\'',
        }
    }
    for text in (" 7", "7_0", "\u0667", "+7", "0x7"):  # int() would take some of these
        assert browser.get(f"/events/{text}", params={"q": "x"}).status_code == 400
    empty = browser.get("/events/7", params={"q": "x", "price": "", "seat": ""})
    assert empty.json() == {
        "id": 7,
        "price": None,
        "seat": None,
        "gift": None,
        "note": None,
        "q": "x",
    }


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\x1b", "\x00", "\x85", "\r"])
def test_a_browser_sends_no_character_a_tool_call_may_not(t: TypedApp, char: str) -> None:
    """A second user's browser is held to a tool call's rule for text: no control character
    or bidirectional control reaches ``ctx.args`` (a hostile user would plant an override
    in shared data that way)."""
    value = f"a{char}b"
    with pytest.raises(BadArg, match=f"holds the character U\\+{ord(char):04X}"):
        t.call("events_id_get", {"id": 7, "q": value})
    refused = t.browser().get("/events/7", params={"q": value})
    assert refused.status_code == 400
    assert refused.text == f"q: holds the character U+{ord(char):04X}; remove it"


@pytest.mark.parametrize("segment", ["%2e", "%2E%2e"])
def test_a_browser_path_value_is_never_a_dot_segment(t: TypedApp, segment: str) -> None:
    refused = t.browser().post(f"/events/{segment}/buy", data={"quantity": "1"})
    assert refused.status_code == 400
    value = segment.replace("%2e", ".").replace("%2E", ".")
    assert refused.text == f"id: is part of the path and cannot be {value!r}"
    with pytest.raises(BadArg, match="is part of the path"):
        t.call("events_id_buy_post", {"id": value, "quantity": 1})


def test_a_forms_line_breaks_read_as_a_tool_calls(t: TypedApp) -> None:
    """Browsers send a textarea's line breaks as CR LF; ``ctx.args`` reads them as the
    ``\\n`` a tool call sends for the same text, so both get the same value."""
    t.call("events_id_get", {"id": 7, "q": "one\ntwo"})
    assert t.browser().get("/events/7", params={"q": "one\r\ntwo"}).json()["q"] == "one\ntwo"
    assert t.seen[-1]["args"] == t.seen[-2]["args"]


def test_ctx_args_on_an_action_without_a_tool_is_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def handle(ctx: rastrillo.Context) -> Any:
        return ctx.json(dict(ctx.args))

    options = rastrillo.Options(
        app_dir=tmp_path,
        routes=[Route("GET", "/x", "x", handle)],
        origin="http://testserver.local",
        db=str(tmp_path / "app.db"),
    )
    client = TestClient(rastrillo.handler(options))
    assert client.get("/x").status_code == 500
    assert "this action declares none" in caplog.text


# --- adversarial: any JSON value against any declaration -----------------------------


def _declarations() -> st.SearchStrategy[dict[str, Arg]]:
    return st.fixed_dictionaries(
        {"id": PATH_ARGS}, optional={"a": args(), "b": args(), "c": args()}
    )


@st.composite
def calls(draw: st.DrawFn) -> tuple[dict[str, Arg], dict[str, Any]]:
    declared = draw(_declarations())
    values = {}
    for name, arg in declared.items():
        if draw(st.integers(0, 9)):  # mostly present
            values[name] = draw(values_for(arg) | JSON_VALUES)
    return declared, values


def _taken(arg: Arg, path: bool) -> st.SearchStrategy[Any]:
    """Values `arg` takes, built inside its constraints so that nearly every draw is one
    (`values_for` aims at the edges, and most of what it draws is refused); a `float` arg
    also gets integers, which it takes as the same number. Nothing when no value is taken
    (say, every choice out of bounds)."""

    def taken(value: Any) -> bool:
        try:
            accepted = accept(arg, value)
        except Invalid:
            return False
        return not path or wire(accepted) not in ("", ".", "..")

    if arg.choices is not None:
        choices = [c for c in arg.choices if taken(c)]
        return st.sampled_from(choices) if choices else st.nothing()
    if arg.type is bool:
        return st.booleans()
    if arg.type is int:
        values: st.SearchStrategy[Any] = st.integers(arg.minimum, arg.maximum)  # type: ignore[arg-type]
    elif arg.type is float:
        low = None if arg.minimum is None else math.ceil(arg.minimum)
        high = None if arg.maximum is None else math.floor(arg.maximum)
        values = st.floats(arg.minimum, arg.maximum, allow_nan=False, allow_infinity=False)
        if low is None or high is None or low <= high:
            values |= st.integers(low, high)
    elif arg.pattern is not None:
        values = st.from_regex(arg.pattern, alphabet=PLAIN_CHARACTERS)
    else:
        values = st.text(PLAIN_CHARACTERS, min_size=arg.min_length or 0, max_size=arg.max_length)
    return values.filter(taken)


@st.composite
def valid_calls(draw: st.DrawFn) -> tuple[dict[str, Arg], dict[str, Any]]:
    """A call its declaration takes: every required arg present, each value one it takes,
    an optional arg left out, null, empty or given."""
    declared = draw(_declarations())
    values = {}
    for name, arg in declared.items():
        if arg.required or draw(st.booleans()):
            values[name] = draw(_taken(arg, name == "id"))
        elif draw(st.booleans()):
            values[name] = draw(st.sampled_from([None, ""]))
    return declared, values


UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""Characters dispatch refuses in any text (control, surrogate, bidirectional)."""


def _canonical(declared: dict[str, Arg], values: dict[str, Any]) -> dict[str, Any] | None:
    """What must reach the handler, by the declared args; None when the call must be refused."""
    out: dict[str, Any] = {}
    for name, arg in declared.items():
        value = values.get(name)
        if not arg.required and value in (None, ""):
            out[name] = None
            continue
        if name not in values:
            return None
        try:
            out[name] = accept(arg, value)
        except Invalid:
            return None
        if name == "id" and wire(out[name]) in ("", ".", ".."):
            return None
        if isinstance(value, str) and UNSAFE.search(value):
            return None
    return out


SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(calls())
def test_no_ill_typed_or_out_of_range_value_reaches_a_handler(
    case: tuple[dict[str, Arg], dict[str, Any]],
) -> None:
    declared, values = case
    expected = _canonical(declared, values)
    with tempfile.TemporaryDirectory() as tmp:
        t = TypedApp(Path(tmp), declared, BUY_ARGS)
        try:
            result = t.call("events_id_get", values)
        except ToolError:
            assert expected is None, f"refused a valid call: {values!r}"
            assert t.seen == []
            return
        finally:
            t.close()
    assert expected is not None, f"ran an invalid call: {values!r}"
    assert result.status == 200, result.text
    [seen] = t.seen
    assert seen["args"] == expected
    assert all(type(seen["args"][k]) is type(v) for k, v in expected.items())


@SLOW
@given(valid_calls())
def test_an_approved_call_runs_with_exactly_the_values_the_human_saw(
    case: tuple[dict[str, Arg], dict[str, Any]],
) -> None:
    declared, values = case
    with tempfile.TemporaryDirectory() as tmp:
        t = TypedApp(Path(tmp), READ_ARGS, declared)
        try:
            with pytest.raises(ConfirmRequired) as raised:
                t.call("events_id_buy_post", values)
            shown = consent.get(t.app.db, raised.value.approval_id)
            assert shown is not None
            consent.decide(t.app.db, "1", shown.id, True)
            result = t.call("events_id_buy_post", values, approval=shown.id)
        finally:
            t.close()
    assert result.status == 200, result.text
    [seen] = t.seen
    ran = {k: v for k, v in seen["args"].items() if v is not None}
    assert ran == shown.args
    assert all(type(ran[k]) is type(v) for k, v in shown.args.items())


@SLOW
@given(valid_calls())
def test_a_tool_call_and_the_same_request_from_a_browser_give_identical_ctx_args(
    case: tuple[dict[str, Arg], dict[str, Any]],
) -> None:
    """Dispatch hands ``ctx.args`` the values it checked instead of parsing its own request
    again: they must be exactly what that request, sent by a browser, parses to."""
    declared, values = case
    with tempfile.TemporaryDirectory() as tmp:
        t = TypedApp(Path(tmp), declared, BUY_ARGS)
        try:
            assert t.call("events_id_get", values).status == 200
            called = t.seen[-1]
            replayed = t.browser().get(t.app.origin + called["target"].decode("ascii"))
        finally:
            t.close()
    assert replayed.status_code == 200, replayed.text
    browsed = t.seen[-1]
    assert browsed["actor"].human and not called["actor"].human
    assert browsed["args"] == called["args"]
    assert [type(v) for v in browsed["args"].values()] == [type(v) for v in called["args"].values()]


@given(st.dictionaries(st.text(), st.text()))
def test_the_form_body_is_urlencoded_byte_for_byte(fields: dict[str, str]) -> None:
    from urllib.parse import urlencode

    from rastrillo.tools.transport import form_quote

    items = sorted(fields.items())
    assert "&".join(f"{form_quote(k)}={form_quote(v)}" for k, v in items) == urlencode(items)
