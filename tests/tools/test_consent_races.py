"""Consent under races: a write proposed or redeemed while its grant is revoked, one
approval redeemed by two processes at once, and an approval's expiry to the microsecond.

The PostgreSQL races are made deterministic: one side's transaction is held open after
its statements ran, and the other side is seen waiting for a lock in
``pg_stat_activity`` before the first one commits.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from rastrillo.agents import grants
from rastrillo.storage import Database
from rastrillo.testing import ManualClock
from rastrillo.tools import Call, ConfirmRequired, ToolError, audit, consent
from rastrillo.tools import dispatch_sync as run
from tests.support import wait_until
from tests.tools._tools_app import Fixture, build

WRITE = {"tool": "orders_id_cancel_post", "args": {"id": "1", "reason": "r"}}


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
        wait_until(lambda: waiting() or proposing.done())
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
        wait_until(lambda: waiting() or revoking.done())
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
        wait_until(lambda: waiting() or redeeming.done())
        waited = waiting()
        revocation.release.set()
        assert revoking.result(timeout=30) is True
    assert redeeming.result(timeout=30) == "BadActor"
    assert f.ran("cancel") == []
    [session_read] = waited
    assert "FROM rastrillo_sessions" in session_read and "FOR UPDATE" in session_read
    audit.flush(f.app.db)
    f.app.db.dispose()
