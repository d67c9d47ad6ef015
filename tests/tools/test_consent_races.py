"""Consent under races: a write proposed or redeemed while its grant is revoked, one
approval redeemed by two processes at once, and an approval's expiry to the microsecond.

The PostgreSQL races are made deterministic: one side's transaction is held open after
its statements ran, and the other side is seen waiting for a lock in
``pg_stat_activity`` before the first one commits.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine

import rastrillo
from rastrillo.agents import grants
from rastrillo.sessions import create_session, revoke_user
from rastrillo.sessions.store import WHEN_USER_REVOKED
from rastrillo.storage import Database
from rastrillo.testing import ManualClock
from rastrillo.tools import ApprovalInvalid, Call, ConfirmRequired, ToolError, audit, consent
from rastrillo.tools import dispatch_sync as run
from tests.support import until
from tests.tools._tools_app import Fixture, build

WRITE = {"tool": "orders_id_cancel_post", "args": {"id": "1", "reason": "r"}}
AGENT = rastrillo.Actor.agent("concierge")
ROOT = Path(__file__).resolve().parents[2]


class _Hold:
    """A transaction held open: ``held`` is set once its statements ran; it commits (or
    rolls back) once ``release`` is set."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()


@contextlib.contextmanager
def _held_open(db: Database, method: str) -> Iterator[_Hold]:
    """The next transaction ``db.<method>()`` opens, in any thread, runs its statements and
    then waits, uncommitted, until released."""
    original = getattr(db, method)
    hold = _Hold()
    armed = [True]

    @contextlib.contextmanager
    def holding() -> Iterator[object]:
        mine, armed[0] = armed[0], False
        with original() as tx:
            yield tx
            if mine:
                hold.held.set()
                hold.release.wait()

    setattr(db, method, holding)
    try:
        yield hold
    finally:
        hold.release.set()
        delattr(db, method)


def _waiting_for_a_lock(url: str) -> Callable[[], list[str]]:
    """The statements the database's backends are waiting for a lock to run."""
    admin = Database(url)

    def waiting() -> list[str]:
        rows = admin.query(
            "SELECT query FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock'"
        )
        return [row.query for row in rows]

    return waiting


def _in_thread(work: Callable[[], object]) -> Future[object]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(work)
    pool.shutdown(wait=False)
    return future


def _outcome(f: Fixture, call: Call) -> object:
    """The call's status, or the class name of the ToolError it was refused with."""
    try:
        return run(f.app, f.defs, call).status
    except ToolError as exc:
        return type(exc).__name__


class _Granted:
    """A grant of user 3's, its session, and the write it proposes."""

    def __init__(self, f: Fixture) -> None:
        self.grant = grants.create_grant(f.app.db, user_id="3", agent="claude", client="c")
        session = grants.grant_session(f.app.db, self.grant)
        assert session is not None
        self.call = Call(**WRITE, actor=self.grant.actor, session=session)

    def approvals(self, f: Fixture) -> list[str]:
        """The state of each of the grant's approvals, now."""
        rows = f.app.db.query(
            "SELECT id FROM rastrillo_approvals WHERE actor = :actor ORDER BY created_at",
            actor=str(self.grant.actor),
        )
        now = f.app.db.clock.now()
        return [consent.get(f.app.db, row.id).state(now) for row in rows]


def test_a_write_proposed_while_its_grant_is_revoked_leaves_no_approval_waiting(pg_url, tmp_path):
    """The revocation has run its statements, not committed: the proposal waits for it
    (on the session it reads), then finds no session and asks nothing."""
    f = build(tmp_path, db=pg_url)
    granted = _Granted(f)
    waiting = _waiting_for_a_lock(pg_url)
    with _held_open(f.app.db, "write") as revocation:
        revoking = _in_thread(lambda: grants.revoke(f.app.db, granted.grant.id))
        assert revocation.held.wait(30)
        proposing = _in_thread(lambda: _outcome(f, granted.call))
        until(lambda: waiting() or proposing.done(), "the proposal to wait on a lock")
        waited = waiting()
        revocation.release.set()
        assert revoking.result(timeout=30) is True
    assert proposing.result(timeout=30) == "BadActor"
    assert granted.approvals(f) == []
    [session_read] = waited
    assert "FROM rastrillo_sessions" in session_read and "FOR UPDATE" in session_read
    audit.flush(f.app.db)
    f.app.db.dispose()


def test_a_grant_revoked_while_a_write_is_proposed_ends_the_approval_it_made(pg_url, tmp_path):
    """The proposal has asked, not committed: the revocation waits for it (deleting the
    session it holds), then ends the approval it made."""
    f = build(tmp_path, db=pg_url)
    granted = _Granted(f)
    audit.flush(f.app.db)  # the proposal's transaction is the next one opened
    waiting = _waiting_for_a_lock(pg_url)
    with _held_open(f.app.db, "driver_write") as proposal:
        proposing = _in_thread(lambda: _outcome(f, granted.call))
        assert proposal.held.wait(30)
        revoking = _in_thread(lambda: grants.revoke(f.app.db, granted.grant.id))
        until(lambda: waiting() or revoking.done(), "the revocation to wait on a lock")
        waited = waiting()
        proposal.release.set()
        assert proposing.result(timeout=30) == "ConfirmRequired"
    assert revoking.result(timeout=30) is True
    assert granted.approvals(f) == ["expired"]
    [session_delete] = waited
    assert session_delete.startswith("DELETE FROM rastrillo_sessions")
    audit.flush(f.app.db)
    f.app.db.dispose()


def test_an_approved_write_redeemed_while_its_grant_is_revoked_never_runs(pg_url, tmp_path):
    """The redeeming process read its clock a second before the revoking one did (another
    host's clock, or just before it): the approval the revocation ended at its own now is
    still unexpired at the redeemer's. The redemption waits for the revocation (on the
    session), then finds no session: the write never runs."""
    clock = ManualClock(datetime.now(UTC))
    f = build(tmp_path, db=pg_url, clock=clock)
    granted = _Granted(f)
    with pytest.raises(ConfirmRequired) as asked:
        run(f.app, f.defs, granted.call)
    consent.decide(f.app.db, "3", asked.value.approval_id, True)
    approved = Call(**{**granted.call.__dict__, "approval": asked.value.approval_id})
    waiting = _waiting_for_a_lock(pg_url)
    with _held_open(f.app.db, "write") as revocation:
        clock.advance(1)
        revoking = _in_thread(lambda: grants.revoke(f.app.db, granted.grant.id))
        assert revocation.held.wait(30)
        clock.step(-1)  # the redeemer's clock, a second behind
        redeeming = _in_thread(lambda: _outcome(f, approved))
        until(lambda: waiting() or redeeming.done(), "the redemption to wait on a lock")
        waited = waiting()
        revocation.release.set()
        assert revoking.result(timeout=30) is True
    assert redeeming.result(timeout=30) == "BadActor"
    assert f.ran("cancel") == []
    [session_read] = waited
    assert "FROM rastrillo_sessions" in session_read and "FOR UPDATE" in session_read
    audit.flush(f.app.db)
    f.app.db.dispose()


def test_a_users_access_ended_while_a_write_is_proposed_ends_the_approval_it_made(pg_url, tmp_path):
    """The app's own agent (no grant) has asked for an approval, not committed, when the
    user's access is ended (``revoke_user``, a password change): the revocation waits for
    it (deleting the session it holds) and then ends the approval it made, so none is left
    for the thief's session to have approved."""
    f = build(tmp_path, db=pg_url)
    session = create_session(f.app.db, "3", agent_only=True)
    call = Call(**WRITE, actor=AGENT, session=session)
    audit.flush(f.app.db)  # the proposal's transaction is the next one opened
    waiting = _waiting_for_a_lock(pg_url)
    with _held_open(f.app.db, "driver_write") as proposal:
        proposing = _in_thread(lambda: _outcome(f, call))
        assert proposal.held.wait(30)
        revoking = _in_thread(lambda: revoke_user(f.app.db, "3"))
        until(lambda: waiting() or revoking.done(), "the revocation to wait on a lock")
        waited = waiting()
        proposal.release.set()
        assert proposing.result(timeout=30) == "ConfirmRequired"
    assert revoking.result(timeout=30) == 1
    [row] = f.app.db.query("SELECT id FROM rastrillo_approvals WHERE actor = :a", a=str(AGENT))
    assert consent.get(f.app.db, row.id).state(f.app.db.clock.now()) == "expired"
    [session_delete] = waited
    assert session_delete.startswith("DELETE FROM rastrillo_sessions")
    audit.flush(f.app.db)
    f.app.db.dispose()


_REDEEMER = """
import json, sys
from pathlib import Path

import rastrillo
from rastrillo.tools import ApprovalInvalid, Call, audit, dispatch_sync as run
from tests.tools._tools_app import build

folder, url, session, approval = sys.argv[1:]
f = build(Path(folder), db=url)
if f.app.db.is_sqlite:  # tell the test when the redemption's write transaction begins
    from sqlalchemy import event

    def traced(connection, _record):
        def began(statement):
            if statement == "BEGIN IMMEDIATE":
                print("began", flush=True)

        connection.set_trace_callback(began)

    f.app.db.engine.pool.dispose()
    event.listen(f.app.db.engine, "connect", traced)
call = Call(**WRITE, actor=rastrillo.Actor.agent("concierge"), session=session, approval=approval)
print("ready", flush=True)
assert sys.stdin.readline() == "go\\n"
try:
    outcome = run(f.app, f.defs, call).status
except ApprovalInvalid as exc:
    outcome = exc.reason
audit.flush(f.app.db)
print(json.dumps({"outcome": outcome, "ran": len(f.ran("cancel"))}), flush=True)
""".replace("WRITE", repr(WRITE))


@contextlib.contextmanager
def _approval_locked(db: Database, approval: str) -> Iterator[Callable[[], None]]:
    """What a redemption needs, held by another connection until the yielded function
    lets go: SQLite's write lock; on PostgreSQL the approval's row."""
    if db.is_sqlite:
        holder = sqlite3.connect(db.engine.url.database, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            yield holder.rollback
        finally:
            holder.close()
        return
    engine = create_engine(db.url)
    with engine.connect() as conn:
        conn.exec_driver_sql(
            "SELECT 1 FROM rastrillo_approvals WHERE id = %(id)s FOR UPDATE", {"id": approval}
        )
        yield conn.rollback
    engine.dispose()


def test_of_two_processes_redeeming_one_approval_at_once_exactly_one_runs_it(db_url, tmp_path):
    """Two server processes (``--workers 2``, or two hosts), each with its own session of
    the user, redeem one approved approval at once: both are held at the lock they need,
    seen waiting there, then let go together. One runs the write; the other is told the
    approval was used."""
    f = build(tmp_path, db=db_url)
    sessions = [f.session("3"), f.session("3")]
    with pytest.raises(ConfirmRequired) as asked:
        run(f.app, f.defs, Call(**WRITE, actor=AGENT, session=sessions[0]))
    approval = asked.value.approval_id
    consent.decide(f.app.db, "3", approval, True)
    audit.flush(f.app.db)
    redeemers = [
        subprocess.Popen(
            [sys.executable, "-c", _REDEEMER, str(tmp_path), db_url, session, approval],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for session in sessions
    ]
    try:
        for redeemer in redeemers:
            assert redeemer.stdout is not None and redeemer.stdout.readline() == "ready\n"
        with _approval_locked(f.app.db, approval) as let_go:
            for redeemer in redeemers:
                assert redeemer.stdin is not None
                redeemer.stdin.write("go\n")
                redeemer.stdin.flush()
            if f.app.db.is_sqlite:
                for redeemer in redeemers:  # its write began, and waits for the lock
                    assert redeemer.stdout is not None
                    assert redeemer.stdout.readline() == "began\n"
            else:
                waiting = _waiting_for_a_lock(db_url)
                until(lambda: len(waiting()) == 2, "both redeemers to wait on the lock", 60)
                assert all(q.startswith("UPDATE rastrillo_approvals") for q in waiting())
            let_go()
            results = [r.communicate(timeout=60)[0] for r in redeemers]
    finally:
        for redeemer in redeemers:
            redeemer.kill()
            redeemer.wait()
    outcomes = [json.loads(result.splitlines()[-1]) for result in results]
    assert sorted(str(o["outcome"]) for o in outcomes) == ["303", "used"]
    assert sum(o["ran"] for o in outcomes) == 1
    ran = [r for r in audit.latest(f.app.db, limit=10) if r.status == 303]
    assert [r.approval_id for r in ran] == [approval]
    f.app.db.dispose()


def test_an_approval_expires_at_its_ttl_to_the_microsecond(db_url, tmp_path):
    """Usable until one microsecond before its ttl has passed, expired at the ttl itself:
    decided, redeemed by its id, or used by the identical call by itself."""
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    f = build(tmp_path, db=db_url, clock=clock)
    session = f.session("3")
    ttl = f.options.approval_ttl.total_seconds()
    last_microsecond = ttl - 1e-6

    def call(order: str, approval: str | None = None) -> Call:
        return Call(
            tool="orders_id_cancel_post",
            args={"id": order, "reason": "r"},
            actor=AGENT,
            session=session,
            approval=approval,
        )

    def asked(order: str) -> str:
        with pytest.raises(ConfirmRequired) as info:
            run(f.app, f.defs, call(order))
        return info.value.approval_id

    def outcome(order: str, approval: str | None = None) -> object:
        try:
            return run(f.app, f.defs, call(order, approval)).status
        except ApprovalInvalid as exc:
            return exc.reason
        except ConfirmRequired as exc:
            return f"asked for {exc.approval_id}"

    def decided(approval: str) -> str:
        try:
            return consent.decide(f.app.db, "3", approval, True).status
        except ApprovalInvalid as exc:
            return exc.reason

    one, two, three, four = asked("1"), asked("2"), asked("3"), asked("4")
    assert [decided(one), decided(two), decided(three)] == ["approved"] * 3
    clock.advance(last_microsecond)
    assert outcome("1", one) == 303  # by its id
    assert outcome("2") == 303  # by itself
    assert decided(four) == "approved"
    clock.advance(1e-6)
    assert outcome("3", three) == "expired"
    again = outcome("3")
    assert again.startswith("asked for ") and again != f"asked for {three}"
    assert outcome("4", four) == "expired"
    assert decided(asked("5")) == "approved"  # a new one, from now
    assert [r["params"]["id"] for r in f.ran("cancel")] == ["1", "2"]
    six = asked("6")
    clock.advance(ttl)
    assert decided(six) == "expired"
    audit.flush(f.app.db)
    f.app.db.dispose()


def test_a_users_access_ended_while_one_of_their_grants_is_revoked_both_finish(pg_url, tmp_path):
    """``revoke_user`` has ended the user's sessions and not yet reached their grants when
    the user presses Revoke on one grant: both finish, neither is failed by PostgreSQL
    as a deadlock (each takes the sessions' rows before the grant's)."""
    f = build(tmp_path, db=pg_url)
    granted = _Granted(f)
    at_grants, go_on = threading.Event(), threading.Event()
    end_grants = grants.grants_table.info[WHEN_USER_REVOKED]

    def paused(conn, now, user_id):
        at_grants.set()
        assert go_on.wait(30)
        end_grants(conn, now, user_id)

    waiting = _waiting_for_a_lock(pg_url)
    grants.grants_table.info[WHEN_USER_REVOKED] = paused
    try:
        ending = _in_thread(lambda: revoke_user(f.app.db, "3"))
        assert at_grants.wait(30)
        revoking = _in_thread(lambda: grants.revoke(f.app.db, granted.grant.id))
        until(lambda: waiting() or revoking.done(), "the revocation to wait on a lock")
        go_on.set()
        assert ending.result(timeout=30) == 1
        assert revoking.result(timeout=30) is False  # revoke_user revoked it first
    finally:
        grants.grants_table.info[WHEN_USER_REVOKED] = end_grants
    assert grants.list_grants(f.app.db, "3") == []
    f.app.db.dispose()


@pytest.mark.parametrize("given", ["token", "code"])
def test_a_users_access_ended_while_their_session_gives_an_agent_access_ends_that_too(
    pg_url, tmp_path, given
):
    """The agents page's New token, or the consent page's Allow, has checked the session
    and stored the grant (or the code) uncommitted when ``revoke_user`` starts: it waits
    for that session's row, and then ends what was given; it would otherwise see neither,
    and leave a token made from a stolen session acting after the password change."""
    from rastrillo.agents import oauth
    from rastrillo.agents.tables import authorizations_table

    f = build(tmp_path, db=pg_url, mcp=True)
    db = f.app.db
    session = create_session(db, "3")
    request_id = "r" * 43
    now = db.clock.now()
    with db.write() as conn:
        conn.execute(
            authorizations_table.insert().values(
                id=request_id,
                client_id="c",
                redirect_uri="http://127.0.0.1/cb",
                redirect_uri_explicit=True,
                code_challenge="x" * 43,
                scopes="",
                created_at=now,
                expires_at=now + oauth.REQUEST_TTL,
            )
        )

    def give() -> object:
        if given == "token":
            return grants.personal_token(db, user_id="3", agent="helper", session=session)[1]
        return oauth.allow(
            db, request_id, user_id="3", session=session, agent="helper", issuer=f.app.origin
        )

    waiting = _waiting_for_a_lock(pg_url)
    with _held_open(db, "write") as hold:
        giving = _in_thread(give)
        assert hold.held.wait(30)
        ending = _in_thread(lambda: revoke_user(db, "3"))
        until(lambda: waiting() or ending.done(), "revoke_user to wait on the session's row")
        assert not ending.done()
        hold.release.set()
        given_out = giving.result(timeout=30)
        assert ending.result(timeout=30) == 1
    if given == "token":
        assert grants.authenticate(db, given_out) is None
    else:
        assert oauth.pending(db, request_id) is None
        row = db.query_one("SELECT expires_at FROM rastrillo_oauth_authorizations")
        assert row.expires_at <= db.clock.now()  # the code is worth nothing
    assert grants.list_grants(db, "3") == []
    db.dispose()
