"""Agent grants and their tokens: who may act for whom, as which named agent.

A grant is one user's permission for one MCP client to act for them as one
named agent: the user, the agent name, the client (its name, and its OAuth
client id when it has one), when it was created, last used and revoked. A
grant is obtained either through OAuth (access and refresh tokens) or from the
user's own agents page (a personal access token, for an agent that cannot do
OAuth); either way the tokens belong to the grant, and revoking the grant
kills every one of them on their next use. Approvals and the audit log know an
agent by its name and user, so no two live grants of one user share an agent
name, in any case (:class:`AgentNameTaken`).

Tokens are random (256 bits) and shown exactly once, when issued: the tables
keep only their SHA-256 digests, so a leaked database hands out nothing, and
nothing here logs a token. Every token expires: an access token after an hour,
a refresh token after 30 days (used once: presenting it a second time revokes
the whole grant), a personal token after 30 days unless the user asks for
another lifetime.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import (
    Column,
    ColumnElement,
    ForeignKey,
    Index,
    String,
    Table,
    bindparam,
    delete,
    event,
    func,
    select,
    update,
)
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.sql import Select

from rastrillo import visible
from rastrillo.actor import AGENT_NAME_RULE, Actor, is_grant_id
from rastrillo.registry.declare import UNSAFE_TEXT
from rastrillo.sessions.store import (
    WHEN_USER_REVOKED,
    create_session,
    delete_session,
    holds_session,
    secret_digest,
    sessions_table,
)
from rastrillo.storage import METADATA, Database, Instant, Prepared, serialize
from rastrillo.tools import consent

__all__ = [
    "ACCESS_TTL",
    "LIVE_NAME",
    "PERSONAL_TTL",
    "REFRESH_TTL",
    "RESERVED_AGENTS",
    "AgentNameTaken",
    "Grant",
    "GrantError",
    "Tokens",
    "authenticate",
    "authenticate_until",
    "check_agent_name",
    "create_grant",
    "get_grant",
    "grant_session",
    "grant_with_tokens",
    "is_grant_id",
    "issue_tokens",
    "list_grants",
    "live_grants_named",
    "personal_token",
    "refresh_grant",
    "revoke",
    "revoke_token",
    "rotate_refresh",
    "unused_name",
]

ACCESS_TTL = timedelta(hours=1)
REFRESH_TTL = timedelta(days=30)
PERSONAL_TTL = timedelta(days=30)
PERSONAL_CLIENT = "personal token"
"""The client name of a grant made on the agents page."""
RESERVED_AGENTS = frozenset({"console"})
"""Agent names no grant may take, in any case: the tool console's calls are
``agent:console`` (``rastrillo.pages.console.AGENT``) and it runs only what it proposed,
so a grant by that name would write audit rows that pass for the console's and share
its approvals both ways."""

Kind = Literal["access", "refresh", "personal"]
# A prefix per kind lets a person (and a secret scanner) tell a leaked token
# for what it is; the random part is 43 characters of base64url (256 bits).
_PREFIX: dict[Kind, str] = {"access": "rst_at_", "refresh": "rst_rt_", "personal": "rst_pt_"}
_TOKEN = re.compile(r"rst_(?:at|rt|pt)_[A-Za-z0-9_-]{43}")
_CLIENT_MAX = 100
_UNPRINTABLE = re.compile(f"{UNSAFE_TEXT}|[\t\n]")
"""What a client's name keeps none of: what no text value holds, and no tab or line break
in a name the agents page and ``agents list`` show on one line. (Unicode's line and
paragraph separators are kept: the pages show each as a labelled mark.)"""
# "Last used" is for a person reading the agents page: a write at most once a
# minute per grant keeps a busy agent from writing on every call.
_TOUCH_EVERY = timedelta(minutes=1)

grants_table = Table(
    "rastrillo_agent_grants",
    METADATA,
    Column("id", String(64), primary_key=True),
    Column("user_id", String(255), nullable=False),
    Column("agent", String(64), nullable=False),
    Column("client", String(255), nullable=False),
    Column("client_id", String(255)),
    Column("created_at", Instant, nullable=False),
    Column("last_used_at", Instant),
    Column("revoked_at", Instant),
    Index("rastrillo_agent_grants_user", "user_id"),
)
LIVE_NAME = Index(
    "rastrillo_agent_grants_live_name",
    grants_table.c.user_id,
    grants_table.c.agent,
    unique=True,
)
"""One live grant per agent name per user, held by the database too. It holds the exact
name (SQLAlchemy cannot read an index on ``lower(agent)`` back from SQLite, so the
start-up check would not see it made); "in any case" is :func:`create_grant`'s check,
made in a serialised transaction. Partial: only the live grants (:func:`_live_only`)."""


@event.listens_for(LIVE_NAME, "before_create")
def _live_only(index: Index, conn: Connection, **_: object) -> None:
    """The index's ``WHERE revoked_at IS NULL``, in the option of the database's dialect,
    set as the index is made. Named in ``Index(...)`` as ``postgresql_where``, it would
    import PostgreSQL's dialect with this module (SQLAlchemy checks a dialect's options
    against the dialect): a tenth of a second of every SQLite app's start."""
    index.dialect_options[conn.dialect.name]["where"] = grants_table.c.revoked_at.is_(None)


@event.listens_for(LIVE_NAME, "before_create")
def _rename_duplicates(index: Index, conn: Connection, **_: object) -> None:
    """A database made before :data:`LIVE_NAME` may hold live grants of one user sharing a
    name: the oldest keeps it, each other takes the first free ``name-N``, so the index is
    made and the app starts (its approvals and audit rows know a grant by its id)."""
    table = grants_table
    rows = conn.execute(
        select(table.c.id, table.c.user_id, table.c.agent)
        .where(table.c.revoked_at.is_(None))
        .order_by(table.c.created_at, table.c.id)
    ).all()
    kept: dict[str, set[str]] = {}
    duplicates = []
    for row in rows:
        names = kept.setdefault(row.user_id, set())
        if row.agent.lower() in names:
            duplicates.append(row)
        else:
            names.add(row.agent.lower())
    for row in duplicates:
        name = unused_name(row.agent, kept[row.user_id])
        kept[row.user_id].add(name.lower())
        conn.execute(update(table).where(table.c.id == row.id).values(agent=name))


def unused_name(name: str, taken: Collection[str]) -> str:
    """``name``, else ``name-2``, ``name-3``… (cut to 64 characters): the first that is
    none of ``taken``, in any case."""
    taken = {t.lower() for t in taken}
    found, number = name, 1
    while found.lower() in taken:
        number += 1
        suffix = f"-{number}"
        found = (name[: 64 - len(suffix)].rstrip("-._") or "agent") + suffix
    return found


def _grant_id() -> Column[str]:
    """The grant a row belongs to; the row goes when its grant does."""
    return Column(
        "grant_id",
        String(64),
        ForeignKey("rastrillo_agent_grants.id", ondelete="CASCADE"),
        nullable=False,
    )


tokens_table = Table(
    "rastrillo_agent_tokens",
    METADATA,
    Column("digest", String(64), primary_key=True),
    _grant_id(),
    Column("kind", String(16), nullable=False),
    Column("created_at", Instant, nullable=False),
    Column("expires_at", Instant, nullable=False),
    Column("used_at", Instant),
    Index("rastrillo_agent_tokens_grant", "grant_id"),
)

grant_sessions_table = Table(
    "rastrillo_agent_sessions",
    METADATA,
    Column("session_digest", String(64), primary_key=True),
    _grant_id(),
    Index("rastrillo_agent_sessions_grant", "grant_id"),
)
"""The sessions made for a grant's calls (:func:`grant_session`): revoking it ends them."""

# Compiled once per database and run at the driver's level: a token is looked up on
# every MCP request but a tool call on a token checked in the last minute.
_FIND_TOKEN = Prepared(
    select(
        grants_table,
        tokens_table.c.grant_id,
        tokens_table.c.kind,
        tokens_table.c.expires_at,
        tokens_table.c.used_at,
    )
    .join(grants_table, grants_table.c.id == tokens_table.c.grant_id)
    .where(tokens_table.c.digest == bindparam("digest"))
)


class GrantError(ValueError):
    """A grant cannot be made as asked (a bad agent name, say); the message says why."""


class AgentNameTaken(GrantError):
    """One of the user's live grants already acts under this agent name, in any case.

    Approvals and the audit log know an agent by its name and user, so a second live
    grant under the name would redeem the first one's approvals (and it its), and
    neither the approval page nor the log could tell the person which client asked.
    """

    def __init__(self, grant: Grant) -> None:
        self.grant = grant
        """The live grant that has the name."""
        super().__init__(
            f"an agent named {grant.agent!r} already acts for you "
            f"({visible.for_terminal(grant.client)}, connected "
            f"{grant.created_at:%Y-%m-%d %H:%M} UTC), and two agents under one name would "
            "share your approvals. Choose another name, or revoke that one on your agents "
            "page first"
        )


@dataclass(frozen=True)
class Grant:
    """One user's permission for one client to act for them as one named agent."""

    id: str
    """Public (not a secret): names the grant on the agents page and in revocation."""
    user_id: str
    agent: str
    client: str
    """The client's name as it gave it (untrusted text: escape it where shown)."""
    client_id: str | None
    """The OAuth client id; None for a personal token."""
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def actor(self) -> Actor:
        """The agent this grant acts as: its name, bound to this grant's id."""
        return Actor.agent(self.agent, grant=self.id)


@dataclass(frozen=True)
class Tokens:
    """A newly issued access token and refresh token: the only time they exist in clear."""

    grant: Grant
    access_token: str
    access_expires_at: datetime
    refresh_token: str
    refresh_expires_at: datetime

    def __repr__(self) -> str:  # never print a token by accident
        return f"Tokens(grant={self.grant.id!r}, access_token=..., refresh_token=...)"


def create_grant(
    db: Database,
    *,
    user_id: str | int,
    agent: str,
    client: str,
    client_id: str | None = None,
    session: str | None = None,
) -> Grant:
    """Record a new grant (no token yet: see :func:`issue_tokens`, :func:`personal_token`).

    ``agent`` must be a valid agent name (letters, digits, ``_``, ``.``, ``-``;
    at most 64) that none of the user's live grants has, in any case
    (:class:`AgentNameTaken`); ``client`` is the client's name, kept printable and
    short. The check and the insert are one step: of grants made at once under one
    name, in any process, one is made.

    ``session``: the user's browser session giving the grant (the agents page's). The
    grant is made only while it is live, in one transaction with its row locked
    (:func:`sessions.store.holds_session`), else :class:`GrantError`: a
    ``sessions.revoke_user`` ending the user's access as the grant is made either comes
    first, or waits and revokes the grant too.
    """
    with db.write() as conn:
        return _create_grant_in(conn, db.clock.now(), user_id, agent, client, client_id, session)


def _create_grant_in(
    conn: Connection,
    now: datetime,
    user_id: str | int,
    agent: str,
    client: str,
    client_id: str | None,
    session: str | None,
) -> Grant:
    """:func:`create_grant`'s work, in the caller's write transaction."""
    check_agent_name(agent)
    row: dict[str, Any] = {
        # Hex, so an id never starts with "-" and a terminal's `agents revoke <id>` takes it.
        "id": secrets.token_hex(16),
        "user_id": str(user_id),
        "agent": agent,
        "client": _printable(client) or "unnamed client",
        "client_id": client_id,
        "created_at": now,
        "last_used_at": None,
        "revoked_at": None,
    }
    if session is not None and not holds_session(conn, now, session, row["user_id"]):
        raise GrantError("the session giving the grant has ended: sign in again")
    # The user's grants are made one at a time (SQLite's write transaction is already
    # the only one): the name's check and the insert see the same grants.
    serialize(conn, f"{grants_table.name}:{row['user_id']}")
    taken = conn.execute(_named(row["user_id"], agent)).mappings().first()
    if taken is not None:
        raise AgentNameTaken(_grant(taken))
    conn.execute(grants_table.insert().values(**row))
    return _grant(row)


def live_grants_named(db: Database, user_id: str | int, agent: str) -> list[Grant]:
    """The user's live grants whose agent name is ``agent`` in any case, oldest first: at
    most one, but for grants made before names were checked."""
    with db.read() as conn:
        return [_grant(row) for row in conn.execute(_named(str(user_id), agent)).mappings()]


def _named(user_id: str, agent: str) -> Select[Any]:
    return (
        select(grants_table)
        .where(
            grants_table.c.user_id == user_id,
            grants_table.c.revoked_at.is_(None),
            # Agent names are ASCII, which every database lowers alike.
            func.lower(grants_table.c.agent) == agent.lower(),
        )
        .order_by(grants_table.c.created_at, grants_table.c.id)
    )


def check_agent_name(agent: str) -> None:
    """Raise :class:`GrantError`, saying why, unless a grant may act as ``agent``: a valid
    agent name, and not one of :data:`RESERVED_AGENTS`."""
    if not Actor.agent(agent).is_named_agent:
        raise GrantError(f"An agent name is {AGENT_NAME_RULE}: {agent!r} is not one.")
    if agent.lower() in RESERVED_AGENTS:
        raise GrantError(
            f"agent name {agent!r} is the tool console's, which no other agent may use: "
            "choose another"
        )


def issue_tokens(
    db: Database,
    grant_id: str,
    *,
    access_ttl: timedelta = ACCESS_TTL,
    refresh_ttl: timedelta = REFRESH_TTL,
) -> Tokens:
    """A new access token and refresh token for a live grant.

    Raises :class:`GrantError` when the grant does not exist or was revoked.
    """
    now = db.clock.now()
    with db.write() as conn:
        return _new_pair(conn, _live_grant(conn, grant_id), now, access_ttl, refresh_ttl)


def grant_with_tokens(
    db: Database, *, user_id: str | int, agent: str, client: str, client_id: str
) -> Tokens:
    """:func:`create_grant` and :func:`issue_tokens` in one transaction: an OAuth client's
    new grant with its first access and refresh token, or nothing at all. (Made apart, a
    failure between the two left the user an agent listed with no token ever issued.)"""
    now = db.clock.now()
    with db.write() as conn:
        grant = _create_grant_in(conn, now, user_id, agent, client, client_id, None)
        return _new_pair(conn, grant, now, ACCESS_TTL, REFRESH_TTL)


def _new_pair(
    conn: Connection, grant: Grant, now: datetime, access_ttl: timedelta, refresh_ttl: timedelta
) -> Tokens:
    """A new access and refresh token for the grant; and the expired tokens of every grant
    deleted, so that tokens issued again and again leave only their live ones stored."""
    access = _insert_token(conn, grant.id, "access", now, access_ttl)
    refresh = _insert_token(conn, grant.id, "refresh", now, refresh_ttl)
    conn.execute(delete(tokens_table).where(tokens_table.c.expires_at <= now))
    return Tokens(grant, access, now + access_ttl, refresh, now + refresh_ttl)


def personal_token(
    db: Database,
    *,
    user_id: str | int,
    agent: str,
    ttl: timedelta = PERSONAL_TTL,
    session: str | None = None,
) -> tuple[Grant, str, datetime]:
    """A new grant for ``agent`` with one personal access token: (grant, token, expiry);
    ``session`` as for :func:`create_grant`.

    Show the token to the user once; it cannot be read back. The grant and its token are
    made in one transaction: no grant without its token, and none a ``revoke_user``
    between the two would leave showing a token that never worked.
    """
    now = db.clock.now()
    with db.write() as conn:
        grant = _create_grant_in(conn, now, user_id, agent, PERSONAL_CLIENT, None, session)
        token = _insert_token(conn, grant.id, "personal", now, ttl)
    return grant, token, now + ttl


def authenticate(db: Database, token: str) -> Grant | None:
    """The live grant an access or personal token belongs to; None for anything else.

    Refused (None): a malformed, unknown or expired token, a refresh token, and
    any token of a revoked grant — revocation holds from the next call on.
    Notes the grant's last use (at most once a minute).
    """
    found = authenticate_until(db, token)
    return None if found is None else found[0]


def authenticate_until(db: Database, token: str) -> tuple[Grant, datetime] | None:
    """:func:`authenticate`, and when the token expires."""
    row = _find(db, token)
    now = db.clock.now()
    if row is None or row["kind"] == "refresh" or not _usable(row, now):
        return None
    last = row["last_used_at"]
    if last is None or now - last >= _TOUCH_EVERY:
        with db.write() as conn:
            conn.execute(
                update(grants_table)
                .where(grants_table.c.id == row["grant_id"])
                .values(last_used_at=now)
            )
        return _grant({**row, "last_used_at": now}), row["expires_at"]
    return _grant(row), row["expires_at"]


def grant_session(db: Database, grant: Grant) -> str | None:
    """A new session of the grant's user for the grant's calls; None if it was revoked.

    Revoking the grant ends the session, so whoever holds it learns of the
    revocation from the session check a call makes anyway. It is ``agent_only``: should
    its id leak, a request presenting it outside a dispatched call has no session.
    """
    session_id = create_session(db, grant.user_id, agent_only=True)
    link = grant_sessions_table
    with db.write() as conn:
        # Links to sessions that ended (expired, or the user's sessions were ended) go.
        conn.execute(
            delete(link).where(link.c.session_digest.not_in(select(sessions_table.c.id_digest)))
        )
        digest = secret_digest(session_id)
        conn.execute(link.insert().values(session_digest=digest, grant_id=grant.id))
        # Locked, so a revocation running now waits for this link and ends the session too.
        live = conn.execute(
            select(grants_table.c.id)
            .where(grants_table.c.id == grant.id, grants_table.c.revoked_at.is_(None))
            .with_for_update()
        ).first()
    if live is None:
        delete_session(db, session_id)
        return None
    return session_id


def refresh_grant(db: Database, refresh_token: str) -> Grant | None:
    """The live grant of an unused, unexpired refresh token, without using it; else None.

    A refresh token that was already used is a replay (the token leaked, or the
    client and an attacker both hold it): its grant is revoked, and None
    returned.
    """
    row = _find(db, refresh_token)
    if row is None or row["kind"] != "refresh":
        return None
    if row["used_at"] is not None:
        revoke(db, row["grant_id"])
        return None
    return _grant(row) if _usable(row, db.clock.now()) else None


def rotate_refresh(
    db: Database,
    refresh_token: str,
    *,
    access_ttl: timedelta = ACCESS_TTL,
    refresh_ttl: timedelta = REFRESH_TTL,
) -> Tokens | None:
    """Use a refresh token once: new tokens for its grant, or None.

    The use is one conditional UPDATE, so of two concurrent rotations exactly
    one wins; the loser, like any second use, revokes the grant. Unknown,
    expired or revoked → None.
    """
    grant = refresh_grant(db, refresh_token)
    if grant is None:
        return None
    now = db.clock.now()
    with db.write() as conn:
        won = conn.execute(
            update(tokens_table)
            .where(
                tokens_table.c.digest == secret_digest(refresh_token),
                tokens_table.c.kind == "refresh",
                tokens_table.c.used_at.is_(None),
                tokens_table.c.expires_at > now,
            )
            .values(used_at=now)
        ).rowcount
        if won:
            return _new_pair(conn, _live_grant(conn, grant.id), now, access_ttl, refresh_ttl)
    refresh_grant(db, refresh_token)  # lost the race: a second use, which revokes
    return None


def revoke(db: Database, grant_id: str, *, user_id: str | int | None = None) -> bool:
    """Revoke a grant and so every token of it; True when this call revoked it.

    With ``user_id``, only that user's grant (the agents page passes the signed-in
    user, so one user cannot revoke another's grant by its id). The grant's approvals
    that were still to be used end with it (:func:`consent.end_agent`): what the user
    approved for it must not wait on in the store for nothing.
    """
    if not is_grant_id(grant_id):
        return False
    condition = [grants_table.c.id == grant_id]
    if user_id is not None:
        condition.append(grants_table.c.user_id == str(user_id))
    with db.write() as conn:
        return _revoke_in(conn, db.clock.now(), condition) > 0


def _revoke_in(conn: Connection, now: datetime, condition: list[Any]) -> int:
    """Revoke, in the caller's write transaction, the live grants among those matching
    ``condition``, and end the sessions made for the calls of any of them (one made
    while it was being revoked too); return how many this revoked.

    The order of the locks is the one every revocation takes: the sessions' rows, then
    the grant's, then the approvals'. ``sessions.revoke_user`` ends the user's sessions
    before their grants, so ending a grant's sessions after locking its row would let
    the two wait on each other (PostgreSQL fails one as a deadlock). A write dispatched
    under a session holds its row while it asks for or uses an approval, so deleting it
    waits for the write to commit, and the approvals' end then sees what it asked.
    """
    link = grant_sessions_table
    _end_sessions(conn, link.c.grant_id.in_(select(grants_table.c.id).where(*condition)))
    found = conn.execute(
        select(
            grants_table.c.id,
            grants_table.c.user_id,
            grants_table.c.agent,
            grants_table.c.revoked_at,
        )
        .where(*condition)
        .with_for_update()
    ).all()
    live = [row for row in found if row.revoked_at is None]
    if live:
        conn.execute(
            update(grants_table)
            .where(grants_table.c.id.in_([row.id for row in live]))
            .values(revoked_at=now)
        )
    # Again: grant_session links a session and then reads the grant's row locked, so one
    # linked while this waited for that row is ended here.
    mine = link.c.grant_id.in_([row.id for row in found])
    _end_sessions(conn, mine)
    conn.execute(delete(link).where(mine))
    for row in live:
        conn.execute(delete(tokens_table).where(tokens_table.c.grant_id == row.id))
        actor = Actor.agent(row.agent, grant=row.id)
        consent.end_agent(conn, now, user_id=row.user_id, actor=str(actor))
    return len(live)


def _end_sessions(conn: Connection, links: ColumnElement[bool]) -> None:
    """Delete the sessions whose links match ``links``."""
    linked = select(grant_sessions_table.c.session_digest).where(links)
    conn.execute(delete(sessions_table).where(sessions_table.c.id_digest.in_(linked)))


def revoke_all_in(conn: Connection, now: datetime, user_id: str) -> None:
    """``sessions.revoke_user``'s end of the grants: every grant of the user revoked in the
    caller's write transaction, as if one by one on the agents page."""
    _revoke_in(conn, now, [grants_table.c.user_id == user_id])


grants_table.info[WHEN_USER_REVOKED] = revoke_all_in


def revoke_token(db: Database, token: str) -> bool:
    """Revoke the grant any token of it belongs to (OAuth token revocation)."""
    row = _find(db, token)
    return row is not None and revoke(db, row["grant_id"])


def get_grant(db: Database, grant_id: str) -> Grant | None:
    """The grant with this id, revoked or not; None when there is none."""
    if not is_grant_id(grant_id):
        return None
    with db.read() as conn:
        row = (
            conn.execute(select(grants_table).where(grants_table.c.id == grant_id))
            .mappings()
            .first()
        )
    return None if row is None else _grant(row)


def list_grants(
    db: Database, user_id: str | int | None = None, *, include_revoked: bool = False
) -> list[Grant]:
    """Grants, newest first: one user's, or everyone's (for an operator)."""
    query = select(grants_table).order_by(grants_table.c.created_at.desc(), grants_table.c.id)
    if user_id is not None:
        query = query.where(grants_table.c.user_id == str(user_id))
    if not include_revoked:
        query = query.where(grants_table.c.revoked_at.is_(None))
    with db.read() as conn:
        return [_grant(row) for row in conn.execute(query).mappings()]


def _find(db: Database, token: str) -> RowMapping | None:
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return None
    row = db.query_one(_FIND_TOKEN, digest=secret_digest(token))
    return None if row is None else row._mapping


def _usable(row: RowMapping, now: datetime) -> bool:
    return row["revoked_at"] is None and now < row["expires_at"]


def _live_grant(conn: Connection, grant_id: str) -> Grant:
    row = None
    if is_grant_id(grant_id):  # anything else is no grant, and never reaches the database
        live = grants_table.c.id == grant_id, grants_table.c.revoked_at.is_(None)
        row = conn.execute(select(grants_table).where(*live)).mappings().first()
    if row is None:
        raise GrantError("the grant does not exist or was revoked")
    return _grant(row)


def _insert_token(
    conn: Connection, grant_id: str, kind: Kind, now: datetime, ttl: timedelta
) -> str:
    token = _PREFIX[kind] + secrets.token_urlsafe(32)
    conn.execute(
        tokens_table.insert().values(
            digest=secret_digest(token),
            grant_id=grant_id,
            kind=kind,
            created_at=now,
            expires_at=now + ttl,
        )
    )
    return token


def _grant(row: Any) -> Grant:
    return Grant(
        id=row["id"],
        user_id=row["user_id"],
        agent=row["agent"],
        client=row["client"],
        client_id=row["client_id"],
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
    )


def _printable(text: str) -> str:
    return _UNPRINTABLE.sub("\ufffd", text.strip())[:_CLIENT_MAX]
