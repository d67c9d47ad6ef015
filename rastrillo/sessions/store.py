"""Session rows: one per signed-in browser (or agent) session, in the app's database.

The cookie carries a random id of 256 bits; the table keeps only its SHA-256
digest, so a leaked database does not hand out live sessions. A row is valid
until the earlier of its absolute expiry and its idle expiry; the idle expiry
moves forward as the session is used.

A session made for an agent's calls (``agent_only``: an MCP grant's, ``rastrillo tools
call``'s) is found only by a lookup for a dispatched tool call; any other request
presenting it finds no session, so its id, should it leak, signs nobody in.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import (
    Boolean,
    Column,
    ColumnElement,
    Connection,
    Float,
    Index,
    String,
    Table,
    bindparam,
    column,
    delete,
    false,
    inspect,
    or_,
    select,
    table,
    update,
)

from rastrillo import threads
from rastrillo.errors import ConfigError
from rastrillo.logs import Repeats
from rastrillo.options import DEFAULT_SESSION_IDLE, DEFAULT_SESSION_LIFETIME
from rastrillo.storage import (
    METADATA,
    WHEN_ADDED,
    Database,
    DriverTransaction,
    Instant,
    Prepared,
)

log = logging.getLogger("rastrillo.sessions")

_GRANT_SESSIONS = "rastrillo_agent_sessions"
"""The table (``agents/grants.py``, a layer above) linking each session made for an agent
grant's calls to its grant, named here for the upgrade below alone."""
_ACTING_FOR_USERS = {
    "rastrillo_agent_grants": "rastrillo.agents.grants",
    "rastrillo_oauth_authorizations": "rastrillo.agents.tables",
}
"""The tables (a layer above) of what may act for a user besides a session, each with the
module that defines it, named here for :func:`revoke_user`'s refusal alone: a process
that never loaded one must not end a user's sessions and leave their agents acting."""

WHEN_USER_REVOKED = "rastrillo_when_user_revoked"
"""A key of a framework table's ``info``: a function :func:`revoke_user` calls with the
connection, the time and the user's id, in its transaction, to end what that table lets
act for the user. The tables are a layer above this one (the agent grants), which this
layer may not import: each says here what ending a user means for it."""

UserRevoked = Callable[[Connection, datetime, str], object]
"""What :data:`WHEN_USER_REVOKED` names: (connection, now, user id)."""


def _grant_sessions_are_agents(conn: Connection) -> None:
    """When ``agent_only`` is added to a table an earlier version made: the sessions it made
    for an agent grant's calls become the agent's alone, as this version makes them. Left
    at the default, each would stay a person's session for its lifetime, and its id may
    have leaked already (an earlier version sent it in a dispatched call's ``Cookie``)."""
    if inspect(conn).has_table(_GRANT_SESSIONS):
        linked = select(column("session_digest", String)).select_from(table(_GRANT_SESSIONS))
        conn.execute(
            update(sessions_table)
            .where(sessions_table.c.id_digest.in_(linked))
            .values(agent_only=True)
        )


sessions_table = Table(
    "rastrillo_sessions",
    METADATA,
    Column("id_digest", String(64), primary_key=True),
    Column("user_id", String(255), nullable=False),
    Column("created", Instant, nullable=False),
    Column("expires", Instant, nullable=False),
    Column("idle_seconds", Float, nullable=False),
    Column("idle_expires", Instant, nullable=False),
    # Its default is what a row made before the column is: a person's session.
    Column(
        "agent_only",
        Boolean,
        nullable=False,
        server_default=false(),
        info={WHEN_ADDED: _grant_sessions_are_agents},
    ),
    Index("rastrillo_sessions_user", "user_id"),
)


# Compiled once: a session is looked up on every request, and building and compiling
# the statement costs more than running it.
_LOOKUP = select(
    sessions_table.c.user_id,
    sessions_table.c.expires,
    sessions_table.c.idle_seconds,
    sessions_table.c.idle_expires,
    sessions_table.c.agent_only,
).where(sessions_table.c.id_digest == bindparam("digest"))
_FIND = Prepared(_LOOKUP)


@dataclass(frozen=True)
class Session:
    """A valid session: its id (the cookie value) and the user it belongs to."""

    id: str
    user_id: str


SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""What a session id can look like (``secrets.token_urlsafe`` output, bounded); the one rule
the session middleware and dispatch apply before any lookup."""


def is_session_id(value: object) -> bool:
    """Whether ``value`` could be a session id: a ``str`` (never a subclass, which could
    compare or hash as another text) wholly matching `SESSION_ID`."""
    return type(value) is str and SESSION_ID.fullmatch(value) is not None


def create_session(
    db: Database,
    user_id: str | int,
    *,
    idle: timedelta = DEFAULT_SESSION_IDLE,
    lifetime: timedelta = DEFAULT_SESSION_LIFETIME,
    agent_only: bool = False,
) -> str:
    """Store a new session for ``user_id``; return its id, the exact cookie value.

    ``agent_only``: the session is for an agent's dispatched calls alone; presented by any
    other request (a program that learnt its id) it is no session (:func:`find_session`).
    """
    session_id = secrets.token_urlsafe(32)
    t = db.clock.now()
    with db.write() as conn:
        conn.execute(delete(sessions_table).where(_expired(t)))
        conn.execute(
            sessions_table.insert().values(
                id_digest=secret_digest(session_id),
                user_id=str(user_id),
                created=t,
                expires=t + lifetime,
                idle_seconds=idle.total_seconds(),
                idle_expires=t + idle,
                agent_only=agent_only,
            )
        )
    return session_id


def find_session(db: Database, session_id: str, *, tool_call: bool) -> Session | None:
    """The valid session with this id, its idle expiry moved forward; else None.

    ``tool_call``: whether the lookup is for a dispatched tool call (dispatch's are; the
    session middleware says for each request), with no default so that no caller
    serving HTTP forgets it. Only such a lookup finds an ``agent_only`` session: for
    any other it is no session, left untouched, and logged.
    """
    looked = _looked_up(db, session_id, tool_call)
    if looked is None:
        return None
    digest, user_id, alive, touch = looked
    if not alive:
        delete_session(db, session_id)
        return None
    if touch is not None:
        with db.write() as conn:
            conn.execute(
                update(sessions_table).where(_with_digest(digest)).values(idle_expires=touch)
            )
    return Session(session_id, user_id)


def peek_session(db: Database, session_id: str, *, tool_call: bool) -> tuple[bool, Session | None]:
    """What :func:`find_session` finds, when finding it writes nothing: ``(True, session)``
    (None: no session). ``(False, None)`` when it would write, a dead row deleted or the
    idle expiry moved (at most once a minute a session): then ``find_session`` does it.

    One read, no write: where ``Database.reads_without_waiting``, it may run on the event
    loop."""
    looked = _looked_up(db, session_id, tool_call)
    if looked is None:
        return True, None
    _, user_id, alive, touch = looked
    if not alive or touch is not None:
        return False, None
    return True, Session(session_id, user_id)


async def find_session_from_loop(
    db: Database, session_id: str, *, tool_call: bool
) -> Session | None:
    """:func:`find_session`, called on the event loop without a thread hop of its own where
    it need not: when a read waits on nothing (``Database.reads_without_waiting``: SQLite,
    whose WAL readers never wait on its writer, with an idle pooled connection) it is
    made there, and only a write it must make (a dead row deleted, the idle expiry moved:
    at most once a minute a session) goes to a worker thread. Otherwise (PostgreSQL,
    whose query waits on the network, or every connection in use) all of it runs in one."""
    if db.reads_without_waiting():
        settled, found = peek_session(db, session_id, tool_call=tool_call)
        if settled:
            return found
    return await threads.in_thread(
        functools.partial(find_session, tool_call=tool_call), db, session_id
    )


def _looked_up(
    db: Database, session_id: str, tool_call: bool
) -> tuple[str, str, bool, datetime | None] | None:
    """The session's digest, its user, whether it is alive now, and the idle expiry to set
    when moving it is due; None when there is no row, or it is an agent's presented
    outside a tool call (logged: its id leaked). One read, no write."""
    digest = secret_digest(session_id)
    row = db.query_one(_FIND, digest=digest)
    if row is None:
        return None
    if row.agent_only and not tool_call:
        _presented_outside(db, digest, row.user_id)
        return None
    alive, touch = _verdict(db.clock.now(), row.expires, row.idle_seconds, row.idle_expires)
    return digest, row.user_id, alive, touch


_PRESENTED = Repeats()
"""The agent sessions presented outside a tool call, per digest: whoever holds a leaked id
sends as many requests as they like, and needs no account to."""


def _presented_outside(db: Database, digest: str, user_id: str) -> None:
    """Say that an agent's session was presented outside a tool call: its id leaked. The
    first time, then at most once a minute per session, with how many were held back."""
    due = _PRESENTED.due(digest, db.clock.monotonic())
    if due is None:
        return
    # The digest, not the id: the log must be no road to a live session either.
    log.warning(
        "a session made for an agent's calls was presented outside a tool call and "
        "taken for none (user %r, session digest %s…)%s",
        user_id,
        digest[:12],
        due.since("presentations", "of it", "of it and of other sessions"),
    )


_FIND_FOR_UPDATE = Prepared(_LOOKUP.with_for_update())
"""The lookup in a write transaction: on PostgreSQL it locks the row (SQLite's write
transaction is already the only one)."""
_TOUCH_IN = Prepared(
    update(sessions_table)
    .where(sessions_table.c.id_digest == bindparam("digest"))
    .values(idle_expires=bindparam("until"))
)
_DELETE_IN = Prepared(
    delete(sessions_table).where(sessions_table.c.id_digest == bindparam("digest"))
)


def find_session_in(tx: DriverTransaction, t: datetime, session_id: str | None) -> Session | None:
    """:func:`find_session` as of ``t``, in the caller's write transaction (a tool call's
    session looked up in the transaction that uses its approval); a call with no session
    id finds none.

    The row stays locked until the transaction ends, so what the transaction does under
    the session is ordered with the session's end: a revocation deleting it first makes
    this wait and then find none; one coming after waits for this to commit, and so
    sees (and ends) the approval it asked or used.
    """
    if session_id is None:
        return None
    digest = secret_digest(session_id)
    found = tx.run(_FIND_FOR_UPDATE, digest=digest)
    if not found:
        return None
    user_id, expires, idle_seconds, idle_expires, _ = found[0]  # a tool call: agent_only or not
    alive, touch = _verdict(t, expires, idle_seconds, idle_expires)
    if not alive:
        tx.run(_DELETE_IN, digest=digest)
        return None
    if touch is not None:
        tx.run(_TOUCH_IN, digest=digest, until=touch)
    return Session(session_id, user_id)


def _alive(t: datetime, expires: datetime, idle_expires: datetime) -> bool:
    """Whether a session whose row says ``expires`` and ``idle_expires`` lives at ``t``."""
    return t < min(expires, idle_expires)


def _verdict(
    t: datetime, expires: datetime, idle_seconds: float, idle_expires: datetime
) -> tuple[bool, datetime | None]:
    """Whether a session's row is alive at ``t``, and its idle expiry moved, when due."""
    if not _alive(t, expires, idle_expires):
        return False, None
    # Touch at most every tenth of the idle time (and at most once a minute),
    # so an active session stays alive without a write on every request.
    left = (idle_expires - t).total_seconds()
    if left < idle_seconds - min(60.0, idle_seconds / 10):
        return True, t + timedelta(seconds=idle_seconds)
    return True, None


_SIGNED_IN = Prepared(
    select(sessions_table.c.created).where(
        sessions_table.c.id_digest == bindparam("digest"), sessions_table.c.agent_only == false()
    )
)


def signed_in_at(db: Database, session_id: str) -> datetime | None:
    """When the person signed in to make this session: its row's ``created``, which nothing
    moves (using a session moves its idle expiry alone; only a new session, a sign-in, is
    a new time). None for a session made for an agent's calls, which no sign-in made, and
    for no session."""
    row = db.query_one(_SIGNED_IN, digest=secret_digest(session_id))
    return None if row is None else row.created


def holds_session(conn: Connection, t: datetime, session_id: str, user_id: str) -> bool:
    """Whether ``session_id`` is a live session of ``user_id``'s own (not one made for an
    agent's calls) at ``t``, looked up in the caller's write transaction, its row locked
    until that ends.

    For what a session gives that outlives it (an agent's access): the giving is ordered
    with the session's end. :func:`revoke_user` deletes the user's sessions first, so it
    either came first, and this finds none, or waits for the caller's transaction to commit
    and then ends what it gave.
    """
    row = conn.execute(
        select(sessions_table.c.expires, sessions_table.c.idle_expires)
        .where(
            _with_digest(secret_digest(session_id)),
            sessions_table.c.user_id == user_id,
            sessions_table.c.agent_only == false(),
        )
        .with_for_update()
    ).first()
    return row is not None and _alive(t, row.expires, row.idle_expires)


def delete_session(db: Database, session_id: str) -> None:
    """End one session: its cookie is dead from now on."""
    with db.write() as conn:
        conn.execute(delete(sessions_table).where(_with_digest(secret_digest(session_id))))


def revoke_user(db: Database, user_id: str | int) -> int:
    """End a user's access everywhere (after a password change, or when the account is
    locked): every session of theirs, and all else that acts on their word: their agent
    grants with every token, the OAuth codes they allowed, their approvals still to be
    used. Return how many sessions it ended.

    Not the sessions alone (that is :func:`end_sessions`): a grant acts for the user with
    no session of a browser (``/mcp`` makes one for its calls), and an approval was given
    by one of the user's sessions, which may have been a thief's; ending the sessions
    alone would leave a token made, or a write approved, from a stolen session acting on.
    All of it is one transaction.
    """
    user_id = str(user_id)
    t = db.clock.now()
    with db.write() as conn:
        ended = _end_sessions_in(conn, user_id)
        _end_what_acts_for(conn, t, user_id)
    return ended


def end_sessions(db: Database, user_id: str | int) -> int:
    """End every session of a user, and nothing else; return how many it ended.

    What the user gave agents stays: their grants act on (a grant's calls get a new
    session at their next), the OAuth codes they allowed may still be traded, and their
    approvals still to be used wait on. For signing out everywhere where that must not
    disconnect the user's agents; after a password change that may follow a theft, call
    :func:`revoke_user`.
    """
    with db.write() as conn:
        return _end_sessions_in(conn, str(user_id))


def _end_sessions_in(conn: Connection, user_id: str) -> int:
    return conn.execute(delete(sessions_table).where(sessions_table.c.user_id == user_id)).rowcount


def _end_what_acts_for(conn: Connection, t: datetime, user_id: str) -> None:
    """Each framework table's end of a user (:data:`WHEN_USER_REVOKED`), once the user's
    sessions ended: a tool call's write holds its session's row locked while it asks for
    or uses an approval, so ending the sessions first waits for such a call to commit,
    and the approvals' end then sees (and ends) what it asked; one dispatched later
    finds no session.

    A process that never loaded the grants' module or the OAuth tables' (a script
    importing only this one) has no end of them to call, while the database may hold live
    grants or codes: it refuses, and the transaction ends nothing. A table this process
    loaded that the database does not have (a script opened it before importing the
    agents' modules; an app with MCP off has no OAuth tables) holds nothing acting for
    anyone: its end is not called (its statements would fail on the missing table)."""
    made = set(inspect(conn).get_table_names())
    for name, module in _ACTING_FOR_USERS.items():
        if name not in METADATA.tables and name in made:
            raise ConfigError(
                f"the database holds {name}, which revoke_user ends with the sessions, but "
                f"this process never loaded it: import {module} first, or call "
                "end_sessions to end the sessions alone"
            )
    for framework_table in METADATA.sorted_tables:
        end: UserRevoked | None
        if framework_table.name in made and (end := framework_table.info.get(WHEN_USER_REVOKED)):
            end(conn, t, user_id)


def _expired(t: datetime) -> ColumnElement[bool]:
    return or_(sessions_table.c.expires <= t, sessions_table.c.idle_expires <= t)


def _with_digest(digest: str) -> ColumnElement[bool]:
    return sessions_table.c.id_digest == digest


def secret_digest(secret: str) -> str:
    """What a table keeps of a secret (a session id, an agent's token, an authorization
    code): its SHA-256 digest, the key of the row naming it; the secret is never stored."""
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()
