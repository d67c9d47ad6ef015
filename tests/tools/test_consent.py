"""Consent: pending approvals, the approval page, the decision, redemption exactly once."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import event
from starlette.testclient import TestClient

import rastrillo
from rastrillo.registry.declare import ToolDef
from rastrillo.sessions import cookie_name
from rastrillo.testing import ManualClock
from rastrillo.tools import (
    ApprovalInvalid,
    BadArg,
    Call,
    ConfirmRequired,
    ToolError,
    TooManyApprovals,
    audit,
    consent,
    dispatch,
)
from rastrillo.tools import dispatch_sync as run
from tests.tools._tools_app import Fixture, build

AGENT = rastrillo.Actor.agent("concierge")
CANCEL = "orders_id_cancel_post"
ARGS = {"id": "7", "reason": "dup"}


@pytest.fixture
def f(tmp_path) -> Fixture:
    return build(tmp_path)


def cancel(f: Fixture, session: str, args=ARGS, **kw):
    kw.setdefault("actor", AGENT)
    return run(f.app, f.defs, Call(tool=CANCEL, args=args, session=session, **kw))


def propose(f: Fixture, session: str, args=ARGS, **kw) -> ConfirmRequired:
    with pytest.raises(ConfirmRequired) as info:
        cancel(f, session, args, **kw)
    return info.value


def build_with(f: Fixture, tools: list[ToolDef]) -> Fixture:
    """The fixture's app released again with ``tools``, on the same database."""
    release = rastrillo.handler(dataclasses.replace(f.options, tools=tools))
    return dataclasses.replace(f, app=release, options=release.options, defs=tools)


def browser(f: Fixture, user_id: str | None) -> TestClient:
    client = TestClient(f.app, base_url=f.app.origin, headers={"Origin": f.app.origin})
    if user_id is not None:
        client.cookies.set(cookie_name(f.app.origin), f.session(user_id))
    return client


def test_a_write_records_a_pending_approval_bound_to_the_call(f):
    pending = propose(f, f.session("3"))
    assert pending.sentence == "Cancel order 7? Its tickets go back on sale."
    assert pending.url == f"{f.app.origin}/_rastrillo/approvals/{pending.approval_id}"
    assert len(pending.approval_id) >= 32  # 24 random bytes, url-safe
    assert pending.sentence in str(pending)
    record = consent.get(f.app.db, pending.approval_id)
    assert record is not None
    assert (record.tool, record.args, record.actor, record.user_id, record.status) == (
        CANCEL,
        ARGS,
        "agent:concierge",
        "3",
        "pending",
    )
    assert record.expires_at - record.created_at == timedelta(minutes=10)
    assert record.digest == consent.digest(CANCEL, ARGS, "agent:concierge", "3", pending.sentence)
    assert f.seen == []


def test_approved_on_the_page_then_runs_once_with_who_and_when(f):
    session = f.session("3")
    pending = propose(f, session)
    human = browser(f, "3")
    page = human.get(pending.url)
    assert page.status_code == 200
    # The value in the sentence is isolated, so no right-to-left letter moves the rest.
    assert 'Cancel order <bdi dir="ltr">7</bdi>? Its tickets go back on sale.' in page.text
    assert "<code>reason</code>" in page.text and "<code>&#34;dup&#34;</code>" in page.text
    decided = human.post(pending.url, data={"decision": "approve"}, follow_redirects=False)
    assert decided.status_code == 303
    assert "You approved this" in human.get(pending.url).text

    result = cancel(f, session, approval=pending.approval_id)
    assert result.status == 303
    [seen] = f.ran("cancel")
    approval = seen["actor"].approval
    assert approval.id == pending.approval_id and approval.approved_by == "3"
    assert seen["actor"].describe().startswith("agent:concierge for user 3, approved by user 3 at ")
    with pytest.raises(ApprovalInvalid) as again:
        cancel(f, session, approval=pending.approval_id)
    assert again.value.reason == "used"
    assert len(f.ran("cancel")) == 1
    assert "run at" in human.get(pending.url).text


def test_declined_on_the_page_never_runs(f):
    session = f.session("3")
    pending = propose(f, session)
    browser(f, "3").post(pending.url, data={"decision": "decline"})
    with pytest.raises(ApprovalInvalid) as info:
        cancel(f, session, approval=pending.approval_id)
    assert info.value.reason == "declined"
    assert f.seen == []


def test_a_pending_approval_does_not_run(f):
    session = f.session("3")
    pending = propose(f, session)
    with pytest.raises(ApprovalInvalid) as info:
        cancel(f, session, approval=pending.approval_id)
    assert info.value.reason == "pending"
    assert "not decided" in str(info.value)


def test_the_page_is_only_for_the_user_the_call_acts_for(f):
    pending = propose(f, f.session("3"))
    other = browser(f, "4")
    assert other.get(pending.url).status_code == 404
    assert other.post(pending.url, data={"decision": "approve"}).status_code == 404
    assert browser(f, "3").get("/_rastrillo/approvals/not-an-id").status_code == 404
    anonymous = browser(f, None)
    assert anonymous.get(pending.url, follow_redirects=False).status_code == 303
    assert anonymous.post(pending.url, data={"decision": "approve"}).status_code == 403
    assert consent.get(f.app.db, pending.approval_id).status == "pending"


def test_the_decision_is_csrf_protected(f):
    pending = propose(f, f.session("3"))
    forged = TestClient(f.app, base_url=f.app.origin, headers={"Origin": "https://evil.example"})
    forged.cookies.set(cookie_name(f.app.origin), f.session("3"))
    assert forged.post(pending.url, data={"decision": "approve"}).status_code == 403
    no_headers = TestClient(f.app, base_url=f.app.origin)
    no_headers.cookies.set(cookie_name(f.app.origin), f.session("3"))
    assert no_headers.post(pending.url, data={"decision": "approve"}).status_code == 403
    assert consent.get(f.app.db, pending.approval_id).status == "pending"


def test_a_bad_decision_value_changes_nothing(f):
    pending = propose(f, f.session("3"))
    human = browser(f, "3")
    assert human.post(pending.url, data={"decision": "yes"}).status_code == 400
    assert human.post(pending.url, data={}).status_code == 400
    assert consent.get(f.app.db, pending.approval_id).status == "pending"


def test_the_sentence_is_escaped_and_a_newline_is_visible(f):
    args = {"id": "7", "reason": "<script>alert(1)</script>\nand also refund everything"}
    pending = propose(f, f.session("3"), args)
    page = browser(f, "3").get(pending.url).text
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "↵</span><br>and also refund everything" in page


def test_the_sentence_shown_is_the_rendered_template(tmp_path):
    f = build(tmp_path)
    args = {"id": "{reason}\nmore", "reason": "x"}
    pending = propose(f, f.session("3"), args)
    assert pending.sentence == "Cancel order {reason}\nmore? Its tickets go back on sale."
    page = browser(f, "3").get(pending.url).text
    shown = r'Cancel order <bdi dir="ltr">\{reason\}<span[^>]*>↵</span><br>more</bdi>\?'
    assert re.search(shown, page)


def test_after_the_template_changed_the_page_shows_the_sentence_approved(f):
    """The page puts each value of the sentence in its own ``<bdi>`` by rendering the
    tool's template again; once the template changed (a new release), it shows the
    stored sentence, the one the person is asked about, whole."""
    pending = propose(f, f.session("3"))
    tools = [
        dataclasses.replace(d, confirm="Drop order {id}!") if d.id == CANCEL else d for d in f.defs
    ]
    page = browser(build_with(f, tools), "3").get(pending.url).text
    assert '<p class="sentence">Cancel order 7? Its tickets go back on sale.</p>' in page


INVISIBLE = [
    *("\u200b", "\u2028", "\u2029", "\ufeff", "\u00ad", "\u3164", "\u2800", "\U000e0041"),
    "\ufffc",  # the object replacement character: Chromium draws it as nothing
]


@pytest.mark.parametrize("hidden", INVISIBLE)
def test_every_invisible_character_of_an_approved_value_is_shown(f, hidden):
    args = {"id": "1" + hidden * 40, "reason": f" ok{hidden} "}
    pending = propose(f, f.session("3"), args)
    page = browser(f, "3").get(pending.url).text
    assert hidden not in page  # never sent raw, where it would show as nothing
    label = f"U+{ord(hidden):04X}"
    # 40 in the sentence, 40 in the id's row, 1 in the reason's row.
    assert page.count(f">{label}</span>") == 81
    assert page.count(">U+0020</span>") == 2  # the reason's leading and trailing spaces


def test_a_value_is_read_in_the_words_the_sentence_makes_around_it(f):
    """Alone, a value all in Cyrillic letters reads as written; put after ``#A`` in the
    sentence, its letters pass for Latin ones in ``#AB``, and are marked there."""
    confirm = "Cancel order #A{id}? ({reason})"
    tools = [dataclasses.replace(d, confirm=confirm) if d.id == CANCEL else d for d in f.defs]
    f = build_with(f, tools)
    pending = propose(f, f.session("3"), {"id": "\u0412", "reason": "dup"})  # a Cyrillic B
    page = browser(f, "3").get(pending.url).text
    sentence = re.search(r'<p class="sentence">(.*)</p>', page)
    assert sentence is not None
    mark = '<span class="lookalike" title="not an ASCII character: U+0412">\u0412'
    assert sentence.group(1).count(mark) == 1
    assert page.count(mark) == 1  # the table shows the value alone: a Cyrillic letter


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"args": {"id": "8", "reason": "dup"}}, "args"),
        ({"args": {"id": "7", "reason": "other"}}, "args"),
        ({"actor": rastrillo.Actor.agent("intruder")}, "actor"),
        ({"session": "other-user"}, "unknown"),  # another user's approval is none of its own
        ({"tool": "notes_id_delete", "args": {"id": "7"}}, "tool"),
    ],
)
def test_any_difference_from_the_approved_call_is_refused(f, change, reason):
    session = f.session("3")
    pending = propose(f, session)
    consent.decide(f.app.db, "3", pending.approval_id, True)
    if change.get("session") == "other-user":
        change["session"] = f.session("4")
    call = Call(
        tool=change.get("tool", CANCEL),
        args=change.get("args", ARGS),
        actor=change.get("actor", AGENT),
        session=change.get("session", session),
        approval=pending.approval_id,
    )
    with pytest.raises(ApprovalInvalid) as info:
        run(f.app, f.defs, call)
    assert info.value.reason == reason
    assert f.seen == []
    # The mismatch did not use it up: the identical call still runs.
    assert cancel(f, session, approval=pending.approval_id).status == 303


def test_a_changed_confirm_template_invalidates_the_approval(tmp_path):
    import dataclasses

    f = build(tmp_path)
    session = f.session("3")
    pending = propose(f, session)
    consent.decide(f.app.db, "3", pending.approval_id, True)
    defs = [
        dataclasses.replace(d, confirm="Refund order {id}?") if d.id == CANCEL else d
        for d in f.defs
    ]
    with pytest.raises(ApprovalInvalid) as info:
        run(
            f.app,
            defs,
            Call(
                tool=CANCEL, args=ARGS, actor=AGENT, session=session, approval=pending.approval_id
            ),
        )
    assert info.value.reason == "sentence"


def test_an_unknown_approval_id(f):
    with pytest.raises(ApprovalInvalid) as info:
        cancel(f, f.session("3"), approval="made-up")
    assert info.value.reason == "unknown"


def test_an_expired_approval(tmp_path):
    clock = ManualClock()
    f = build(tmp_path, clock=clock)
    session = f.session("3")
    pending = propose(f, session)
    clock.advance(10 * 60)  # the approval's ten minutes, to the microsecond
    with pytest.raises(ApprovalInvalid) as info:
        consent.decide(f.app.db, "3", pending.approval_id, True)
    assert info.value.reason == "expired"
    assert "expired" in browser(f, "3").get(pending.url).text
    with pytest.raises(ApprovalInvalid) as info:
        cancel(f, session, approval=pending.approval_id)
    assert info.value.reason == "expired"


def test_an_approval_that_expires_after_the_decision(tmp_path):
    clock = ManualClock()
    f = build(tmp_path, clock=clock)
    session = f.session("3")
    pending = propose(f, session)
    consent.decide(f.app.db, "3", pending.approval_id, True)
    clock.advance(11 * 60)
    with pytest.raises(ApprovalInvalid) as info:
        cancel(f, session, approval=pending.approval_id)
    assert info.value.reason == "expired"
    assert f.seen == []


def test_decide_from_app_code(f):
    pending = propose(f, f.session("3"))
    with pytest.raises(ApprovalInvalid) as info:
        consent.decide(f.app.db, "4", pending.approval_id, True)
    assert info.value.reason == "unknown"  # another user's approval does not exist for them
    record = consent.decide(f.app.db, "3", pending.approval_id, False)
    assert (record.status, record.decided_by) == ("declined", "3")
    assert record.decided_at is not None
    with pytest.raises(ApprovalInvalid) as info:
        consent.decide(f.app.db, "3", pending.approval_id, True)
    assert info.value.reason == "decided"


def test_decide_takes_the_human_request(f):
    from starlette.requests import Request

    pending = propose(f, f.session("3"))
    request = Request({"type": "http", "rastrillo.user_id": "3", "headers": []})
    assert consent.decide(f.app.db, request, pending.approval_id, True).status == "approved"


def test_a_tool_call_can_never_decide(f):
    from starlette.requests import Request

    from rastrillo.tools.calls import ToolCallMarker

    pending = propose(f, f.session("3"))
    marker = ToolCallMarker(rastrillo.Actor(human=False, name="x", user_id="3"))
    request = Request(
        {"type": "http", "rastrillo.user_id": "3", "rastrillo.tool_call": marker, "headers": []}
    )
    with pytest.raises(ToolError):
        consent.decide(f.app.db, request, pending.approval_id, True)
    assert consent.get(f.app.db, pending.approval_id).status == "pending"


def test_of_50_concurrent_redemptions_exactly_one_runs(f):
    session = f.session("3")
    pending = propose(f, session)
    consent.decide(f.app.db, "3", pending.approval_id, True)
    call = Call(tool=CANCEL, args=ARGS, actor=AGENT, session=session, approval=pending.approval_id)

    async def one():
        try:
            return await dispatch(f.app, f.defs, call)
        except ApprovalInvalid as exc:
            return exc.reason

    async def many():
        return await asyncio.gather(*(one() for _ in range(50)))

    outcomes = asyncio.run(many())
    assert sum(1 for o in outcomes if not isinstance(o, str)) == 1
    assert sorted(o for o in outcomes if isinstance(o, str)) == ["used"] * 49
    assert len(f.ran("cancel")) == 1


def test_of_50_redemptions_in_threads_exactly_one_runs(f):
    from concurrent.futures import ThreadPoolExecutor

    session = f.session("3")
    pending = propose(f, session)
    consent.decide(f.app.db, "3", pending.approval_id, True)

    def one(_):
        try:
            return cancel(f, session, approval=pending.approval_id).status
        except ApprovalInvalid as exc:
            return exc.reason

    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(one, range(50)))
    assert outcomes.count(303) == 1 and outcomes.count("used") == 49
    assert len(f.ran("cancel")) == 1


def test_the_identical_call_redeems_its_approval_once(f):
    session = f.session("3")
    pending = propose(f, session)
    assert propose(f, session).approval_id == pending.approval_id  # named again, not duplicated
    consent.decide(f.app.db, "3", pending.approval_id, True)
    assert cancel(f, session).status == 303  # no approval id: the identical call's own
    [seen] = f.ran("cancel")
    assert seen["actor"].approval.id == pending.approval_id
    assert consent.get(f.app.db, pending.approval_id).used_at is not None
    again = propose(f, session)  # used: the next identical call asks anew
    assert again.approval_id != pending.approval_id
    assert len(f.ran("cancel")) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"args": {"id": "8", "reason": "dup"}},
        {"args": {"id": "7", "reason": "other"}},
        {"actor": rastrillo.Actor.agent("other")},
        {"user": "4"},
    ],
)
def test_an_approval_is_redeemed_only_by_the_identical_call(f, change):
    pending = propose(f, f.session("3"))
    consent.decide(f.app.db, "3", pending.approval_id, True)
    user = change.pop("user", "3")
    other = propose(f, f.session(user), **change)
    assert other.approval_id != pending.approval_id
    assert f.seen == []
    assert consent.get(f.app.db, pending.approval_id).used_at is None


@pytest.mark.parametrize("state", ["declined", "expired"])
def test_a_declined_or_expired_approval_is_not_reused(tmp_path, state):
    clock = ManualClock()
    f = build(tmp_path, clock=clock)
    session = f.session("3")
    pending = propose(f, session)
    consent.decide(f.app.db, "3", pending.approval_id, state != "declined")
    if state == "expired":
        clock.advance(11 * 60)
        session = f.session("3")
    assert propose(f, session).approval_id != pending.approval_id
    assert f.seen == []


def test_of_concurrent_identical_calls_exactly_one_redeems(f):
    from concurrent.futures import ThreadPoolExecutor

    session = f.session("3")
    pending = propose(f, session)
    consent.decide(f.app.db, "3", pending.approval_id, True)

    def one(_: int) -> object:
        try:
            return cancel(f, session).status
        except ConfirmRequired:
            return "asked again"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(one, range(16)))
    assert outcomes.count(303) == 1 and outcomes.count("asked again") == 15
    assert len(f.ran("cancel")) == 1


def statements(f: Fixture) -> list[str]:
    """Every SQL statement the app's SQLite connections run from now on, as the driver
    runs them (SQLAlchemy's own events do not see a driver-level statement). The audit
    rows of calls made before are written first: their batch is no statement of what
    comes next."""
    audit.flush(f.app.db)
    seen: list[str] = []

    def traced(dbapi_connection, record, proxy) -> None:
        dbapi_connection.set_trace_callback(seen.append)

    event.listen(f.app.db.engine, "checkout", traced)
    return seen


def test_an_approval_is_used_by_one_statement_in_the_session_s_transaction(f):
    """The redemption is one conditional UPDATE (no read of the approval first), in the
    one short write transaction that also looks the call's session up and writes the
    call's audit row; once ``handle`` ran, a second one writes the row's outcome."""
    session = f.session("3")
    pending = propose(f, session)
    consent.decide(f.app.db, "3", pending.approval_id, True)
    seen = statements(f)
    assert cancel(f, session, approval=pending.approval_id).status == 303
    first = seen.index("BEGIN IMMEDIATE")
    transaction = seen[first : seen.index("COMMIT", first) + 1]
    assert [s.split()[0] for s in transaction] == ["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"]
    assert "rastrillo_sessions" in transaction[1]
    assert transaction[2].startswith(f"UPDATE {consent.approvals_table.name} SET used_at")
    assert transaction[3].startswith(f"INSERT INTO {audit.audit_table.name} ")
    second = seen.index("BEGIN IMMEDIATE", first + 1)
    outcome = seen[second : seen.index("COMMIT", second) + 1]
    assert [s.split()[:2] for s in outcome] == [
        ["BEGIN", "IMMEDIATE"],
        ["UPDATE", audit.audit_table.name],
        ["COMMIT"],
    ]
    on_approvals = [s.split()[0] for s in seen if consent.approvals_table.name in s]
    assert on_approvals == ["UPDATE"]
    assert len(f.ran("cancel")) == 1


def test_a_proposal_is_one_transaction_with_its_session(f):
    """A write without an approval: the session, the identical call's approvals and the
    new pending one, all in one write transaction."""
    session = f.session("3")
    seen = statements(f)
    propose(f, session)
    first = seen.index("BEGIN IMMEDIATE")
    transaction = seen[first : seen.index("COMMIT", first) + 1]
    assert [s.split()[0] for s in transaction] == [
        "BEGIN",
        "SELECT",  # the session
        "SELECT",  # the identical call's approvals
        "SELECT",  # how many of the agent's approvals wait for the user
        "DELETE",  # approvals ended over a week ago
        "INSERT",
        "COMMIT",
    ]
    assert len(f.ran("cancel")) == 0


def test_every_approval_id_can_be_typed_after_approval_on_the_command_line(f):
    # An id starting with "-" would read as an option: `tools call --approval <id>` failed.
    ids = [
        consent.request_approval(
            f.app.db, tool="t", args={"n": n}, sentence="s", actor="agent:a", user_id="3"
        ).id
        for n in range(200)
    ]
    assert not [approval_id for approval_id in ids if not approval_id[0].isalnum()]


def waiting(f: Fixture) -> int:
    return f.app.db.query_one(
        "SELECT COUNT(*) AS n FROM rastrillo_approvals WHERE status = 'pending'"
    ).n


def test_a_flood_of_proposals_stops_at_the_cap_and_buries_no_one(f):
    """A hostile model proposing write after write, each with other args, gets at most
    MAX_WAITING of them in front of its user at once; the rest are refused before any
    approval is made, and each refusal is in the audit log."""
    session = f.session("3")
    for n in range(consent.MAX_WAITING):
        propose(f, session, {"id": str(n), "reason": "flood"})
    with pytest.raises(TooManyApprovals) as info:
        cancel(f, session, {"id": "999", "reason": "flood"})
    assert f"{consent.MAX_WAITING} approvals" in str(info.value)
    assert waiting(f) == consent.MAX_WAITING
    # The identical call of one still waiting is named again, not refused.
    again = propose(f, session, {"id": "0", "reason": "flood"})
    # Another agent of the same user, and the same agent for another user, are not held up.
    propose(f, session, actor=rastrillo.Actor.agent("other"))
    propose(f, f.session("4"), {"id": "999", "reason": "flood"})
    # Once the user decides one, the agent may ask again.
    consent.decide(f.app.db, "3", again.approval_id, False)
    propose(f, session, {"id": "999", "reason": "flood"})
    audit.flush(f.app.db)
    refused = [r for r in audit.latest(f.app.db, 50) if r.refusal_kind == "TooManyApprovals"]
    assert [r.args["id"] for r in refused] == ["999"]
    assert f.seen == []


def test_expired_approvals_no_longer_count_against_the_cap(tmp_path):
    clock = ManualClock()
    f = build(tmp_path, clock=clock)
    session = f.session("3")
    for n in range(consent.MAX_WAITING):
        propose(f, session, {"id": str(n), "reason": "flood"})
    clock.advance(11 * 60)  # past the ten minutes an approval waits
    propose(f, f.session("3"), {"id": "999", "reason": "flood"})
    audit.flush(f.app.db)


def test_ended_approvals_are_forgotten_a_week_after_they_end(tmp_path):
    clock = ManualClock()
    f = build(tmp_path, clock=clock)
    session = f.session("3")
    old = propose(f, session, {"id": "1", "reason": "old"})
    clock.advance(consent.KEEP_ENDED.total_seconds() + 10 * 60 - 1)
    recent = propose(f, f.session("3"), {"id": "2", "reason": "recent"})
    assert consent.get(f.app.db, old.approval_id) is not None  # ended under a week ago
    clock.advance(2)
    propose(f, f.session("3"), {"id": "3", "reason": "new"})
    assert consent.get(f.app.db, old.approval_id) is None
    assert consent.get(f.app.db, recent.approval_id) is not None
    audit.flush(f.app.db)


def test_of_concurrent_proposals_no_more_than_the_cap_wait(tmp_path, db_url):
    """The count and the new approval are one step: proposals racing in many threads (and,
    on PostgreSQL, many connections) never leave more than the cap waiting."""
    f = build(tmp_path, db=db_url)
    session = f.session("3")
    proposals = consent.MAX_WAITING * 2

    def one(n: int) -> str:
        try:
            cancel(f, session, {"id": str(n), "reason": "race"})
        except ToolError as exc:
            return type(exc).__name__
        raise AssertionError("a write ran without approval")

    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(one, range(proposals)))
    assert outcomes.count("ConfirmRequired") == consent.MAX_WAITING
    assert outcomes.count("TooManyApprovals") == proposals - consent.MAX_WAITING
    assert waiting(f) == consent.MAX_WAITING
    audit.flush(f.app.db)


def approval_rows(f: Fixture) -> int:
    with f.app.db.read() as conn:
        return len(conn.execute(consent.approvals_table.select()).all())


def test_a_write_too_large_to_read_is_refused_before_any_approval(f):
    """The approval page shows every character of a write's args (it must: the person
    approves what they read), so a model that sends a megabyte would make a page no one
    reads, stored and served. A write whose args hold more than the limit, in all, is
    refused as a BadArg naming the largest arg, before any approval is recorded; the
    refusal is in the audit log."""
    session = f.session("3")
    limit = consent.MAX_WRITE_ARGS
    for args in (
        {"id": "7", "reason": "x" * 1024 * 1024},
        {"id": "7", "reason": "x" * limit},  # the id's one character makes it one over
        {"id": "7" * (limit // 2), "reason": "é" * (limit // 2 - 1) + "\n\n"},
    ):
        with pytest.raises(BadArg) as refused:
            cancel(f, session, args)
        assert isinstance(refused.value, ToolError)
        largest = max(args, key=lambda name: len(args[name]))
        assert refused.value.name == largest
        assert f"at most {limit:,} characters" in str(refused.value)
        row = audit.latest(f.app.db, limit=1)[0]
        assert row.refusal_kind == "BadArg" and row.tool == CANCEL and row.status is None
    assert approval_rows(f) == 0 and f.ran("cancel") == []
    # At the limit, the person is asked.
    pending = propose(f, session, {"id": "7", "reason": "x" * (limit - 1)})
    assert approval_rows(f) == 1 and pending.approval_id


def test_an_arg_that_declares_its_max_length_is_bounded_by_that_alone(f):
    """An app that means a write to take long text says so on the arg (``max_length``):
    that arg is then bounded by its declaration, and the others by the limit."""
    limit = consent.MAX_WRITE_ARGS
    long_text = ToolDef(
        id="notes_id_erase_post",
        method="POST",
        path="/notes/{id}/erase",
        description="Erase a note, saying why.",
        access=rastrillo.ToolWrite,
        args={"id": "the note", "why": rastrillo.Arg("the reason", max_length=3 * limit)},
        confirm="Erase note {id}?",
    )
    session = f.session("3")

    def erase(args: dict[str, str]) -> None:
        call = Call(tool=long_text.id, args=args, actor=AGENT, session=session)
        run(f.app, [long_text], call)

    with pytest.raises(ConfirmRequired):
        erase({"id": "7", "why": "y" * 3 * limit})
    with pytest.raises(BadArg, match="at most"):
        erase({"id": "7", "why": "y" * (3 * limit + 1)})  # its own bound
    with pytest.raises(BadArg) as refused:
        erase({"id": "7" * (limit + 1), "why": "short"})
    assert refused.value.name == "id"
    assert approval_rows(f) == 1
