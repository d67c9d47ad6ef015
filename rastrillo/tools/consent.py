"""Consent: a write tool runs only after the human it acts for approved that exact call.

An approval is a row bound to the tool, the exact args, the sentence the human
read, the agent and the user (with a digest over all of them), created pending
when an agent proposes a write. The human decides it from their own browser
session (the page in :mod:`rastrillo.pages.approvals`, or the app's own page via
:func:`decide`); the dispatcher then redeems it once, atomically, for the
identical call. The approval id is never a flag a model can set: it is a
random id (192 bits) that only a human's decision makes usable.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Index,
    String,
    Table,
    Text,
    bindparam,
    delete,
    func,
    select,
    update,
)

from rastrillo.actor import Approval
from rastrillo.context import USER_SCOPE_KEY, Context, is_tool_call
from rastrillo.options import DEFAULT_APPROVAL_TTL
from rastrillo.registry.declare import Arg, ArgValue
from rastrillo.registry.errors import ApprovalInvalid, BadArg, ToolError, TooManyApprovals
from rastrillo.registry.validate import wire
from rastrillo.sessions.store import WHEN_USER_REVOKED
from rastrillo.storage import (
    METADATA,
    Database,
    DriverTransaction,
    Instant,
    Prepared,
    serialize,
)

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = [
    "APPROVAL_PATH",
    "KEEP_ENDED",
    "MAX_WAITING",
    "MAX_WRITE_ARGS",
    "ApprovalRecord",
    "approval_path",
    "check_size",
    "decide",
    "digest",
    "end_agent",
    "get",
    "refuse",
    "request_approval",
    "settle",
]

_APPROVAL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""An approval id (hex now; ``token_urlsafe`` text before); anything else is no approval,
never a query."""
APPROVAL_PATH = "/_rastrillo/approvals/"
MAX_WAITING = 20
"""How many of one agent's proposed writes may wait for one user's decision at once: a
model cannot bury its user in approvals (nor fill the disk with them)."""
KEEP_ENDED = timedelta(days=7)
"""How long an approval is kept once it has expired (and, at the latest, once it was used
or declined): its page and the console show it until then; the audit log keeps who
approved what for good."""
MAX_WRITE_ARGS = 64 * 1024
"""The most characters a write's args may hold in all, as their wire texts, counting
none that declares its own ``max_length`` (that arg is bounded by its declaration): the
approval page shows the person every character they approve, so a model's megabyte
would be a page no one reads, stored and served."""

approvals_table = Table(
    "rastrillo_approvals",
    METADATA,
    Column("id", String(64), primary_key=True),
    Column("tool", String(64), nullable=False),
    Column("args", Text, nullable=False),
    Column("sentence", Text, nullable=False),
    Column("actor", String(128), nullable=False),
    Column("agent", String(64)),
    Column("user_id", String(255), nullable=False),
    Column("digest", String(64), nullable=False, index=True),
    Column("status", String(16), nullable=False),
    Column("created_at", Instant, nullable=False),
    Column("expires_at", Instant, nullable=False),
    Column("decided_by", String(255)),
    Column("decided_at", Instant),
    Column("used_at", Instant),
    # A user's approvals still waiting for a decision, counted on every proposal.
    Index("ix_rastrillo_approvals_waiting", "user_id", "status", "expires_at"),
    # The ended ones, forgotten in order of their end.
    Index("ix_rastrillo_approvals_expires_at", "expires_at"),
)


@dataclass(frozen=True)
class ApprovalRecord:
    """One approval as stored: what was proposed, for whom, and what became of it."""

    id: str
    tool: str
    args: dict[str, ArgValue]
    """The canonical values as they run: JSON types kept, so `2` and `"2"` differ."""
    sentence: str
    actor: str
    user_id: str
    digest: str
    status: str
    """``pending``, ``approved`` or ``declined``."""
    created_at: datetime
    expires_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    used_at: datetime | None
    agent: str | None = None
    """The name of the agent that proposed the call."""

    @property
    def url(self) -> str:
        """The approval page's path; prefix the app's origin for a link."""
        return approval_path(self.id)

    def state(self, now: datetime) -> str:
        """``pending``, ``approved``, ``declined``, ``expired`` or ``used``, as of ``now``."""
        if self.used_at is not None:
            return "used"
        if self.status != "declined" and now >= self.expires_at:
            return "expired"
        return self.status


def _is_approval_id(value: object) -> bool:
    """Whether ``value`` could be an approval id: the one rule, applied before any lookup,
    for an id from outside (a page's path, a call's ``approval``)."""
    return type(value) is str and _APPROVAL_ID.fullmatch(value) is not None


def approval_path(approval_id: str) -> str:
    """The path of an approval's page (the app's origin makes it a link)."""
    return APPROVAL_PATH + approval_id


def digest(tool: str, args: Mapping[str, ArgValue], actor: str, user_id: str, sentence: str) -> str:
    """SHA-256 over a canonical encoding of everything an approval is bound to.

    The args enter as their wire texts, the very texts the call sends.
    """
    payload = json.dumps(
        [tool, _texts(args), actor, user_id, sentence],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def check_size(tool: str, args: Mapping[str, Arg], texts: Mapping[str, str]) -> None:
    """Refuse, before any approval is asked, a write whose args are too long for the person
    to read: :data:`MAX_WRITE_ARGS` characters in all, as their wire ``texts``, not
    counting an arg that declares ``max_length``. The :class:`BadArg` names the longest."""
    total, longest = 0, ""
    for name, text in texts.items():
        if args[name].max_length is None:
            total += len(text)
            if len(text) > len(texts.get(longest, "")):
                longest = name
    if total > MAX_WRITE_ARGS:
        raise BadArg(
            tool,
            longest,
            f"is {len(texts[longest]):,} characters long, and a write's args may hold at most "
            f"{MAX_WRITE_ARGS:,} characters in all, so the user can read everything they "
            "approve: shorten it, or make the change in smaller calls",
        )


def request_approval(
    db: Database,
    *,
    tool: str,
    args: Mapping[str, ArgValue],
    sentence: str,
    actor: str,
    user_id: str,
    ttl: timedelta = DEFAULT_APPROVAL_TTL,
    agent: str | None = None,
) -> ApprovalRecord:
    """Record a pending approval for one proposed write and return it."""
    with db.driver_write() as tx:
        return _ask(tx, db.clock.now(), tool, args, sentence, actor, user_id, ttl, agent)


def _ask(
    tx: DriverTransaction,
    now: datetime,
    tool: str,
    args: Mapping[str, ArgValue],
    sentence: str,
    actor: str,
    user_id: str,
    ttl: timedelta,
    agent: str | None,
    wanted: str | None = None,
) -> ApprovalRecord:
    row = {
        # Hex, so an id never starts with "-" and `rastrillo call --approval <id>` takes it.
        "id": secrets.token_hex(24),
        "tool": tool,
        "args": json.dumps(dict(sorted(args.items())), ensure_ascii=False),
        "sentence": sentence,
        "actor": actor,
        "agent": agent,
        "user_id": user_id,
        "digest": wanted or digest(tool, args, actor, user_id, sentence),
        "status": "pending",
        "created_at": now,
        "expires_at": now + ttl,
    }
    tx.run(_INSERT, **row)
    return _record({**row, "decided_by": None, "decided_at": None, "used_at": None})


# Each statement compiled once per database; values bound per call, at the driver's level.
_COLUMNS = tuple(column.name for column in approvals_table.columns)
_INSERT = Prepared(
    approvals_table.insert(),
    columns=[c for c in _COLUMNS if c not in ("decided_by", "decided_at", "used_at")],
)
"""A new pending approval: every column but the decision's and the use's."""
_GET = select(approvals_table).where(approvals_table.c.id == bindparam("approval_id"))
_DECIDE = Prepared(
    update(approvals_table)
    .where(
        approvals_table.c.id == bindparam("approval_id"),
        approvals_table.c.user_id == bindparam("user"),
        approvals_table.c.status == "pending",
        approvals_table.c.expires_at > bindparam("now"),
    )
    .values(status=bindparam("decision"), decided_by=bindparam("user"), decided_at=bindparam("now"))
    .returning(*approvals_table.c)
)
"""A decision: the user's own pending, unexpired approval decided; it returns the row as
decided."""
_SAME_CALL = (
    approvals_table.c.digest == bindparam("wanted"),
    approvals_table.c.user_id == bindparam("user"),
    approvals_table.c.used_at.is_(None),
    approvals_table.c.expires_at > bindparam("now"),
)
"""An approval of the identical call (same digest), for the same user, unused and unexpired."""
_IDENTICAL = Prepared(
    select(approvals_table)
    .where(*_SAME_CALL, approvals_table.c.status != "declined")
    .order_by(approvals_table.c.created_at)
)
_USE_IDENTICAL = Prepared(
    update(approvals_table)
    .where(
        approvals_table.c.id == bindparam("approval_id"),
        approvals_table.c.status == "approved",
        *_SAME_CALL,
    )
    .values(used_at=bindparam("now"))
    .returning(approvals_table.c.id)
)

_REDEEM = Prepared(
    update(approvals_table)
    .where(
        approvals_table.c.id == bindparam("approval_id"),
        approvals_table.c.digest == bindparam("wanted"),
        approvals_table.c.user_id == bindparam("user"),
        approvals_table.c.status == "approved",
        approvals_table.c.used_at.is_(None),
        approvals_table.c.expires_at > bindparam("now"),
    )
    .values(used_at=bindparam("now"))
    .returning(approvals_table.c.decided_by, approvals_table.c.decided_at)
)
"""An approval's one use: the row bound to this very call, approved, unused and unexpired,
marked used; it returns who approved it and when."""


_WAITING = Prepared(
    select(func.count()).where(
        approvals_table.c.user_id == bindparam("user"),
        approvals_table.c.status == "pending",
        approvals_table.c.expires_at > bindparam("now"),
        approvals_table.c.actor == bindparam("actor"),
    )
)
"""How many of one agent's proposed writes wait for the user's decision."""
_FORGET = Prepared(
    delete(approvals_table).where(approvals_table.c.expires_at < bindparam("before"))
)
"""The approvals that ended before ``before``: expired then, or used or declined sooner."""


def get(db: Database, approval_id: str) -> ApprovalRecord | None:
    """The approval with this id, or None (for anything that is not an approval id)."""
    if not _is_approval_id(approval_id):
        return None
    with db.read() as conn:
        row = conn.execute(_GET, {"approval_id": approval_id}).first()
    return None if row is None else _record(row._mapping)


def decide(
    db: Database,
    request_or_user_id: Request | Context | str,
    approval_id: str,
    approve: bool,
) -> ApprovalRecord:
    """Record the human's decision on a pending approval, as the user who made it.

    For an app that renders its own approval page: pass the human's request
    (or ``ctx``), whose session names the deciding user, or that user's id.
    Only the user the call acts for may decide; for anyone else the approval
    does not exist (``ApprovalInvalid("unknown")``). A request that is itself a
    tool call can never decide (``ToolError``): consent comes from the human.
    """
    user_id = _deciding_user(request_or_user_id)
    if not _is_approval_id(approval_id):
        raise ApprovalInvalid(approval_id, "unknown")
    now = db.clock.now()
    decision = {
        "approval_id": approval_id,
        "user": user_id,
        "now": now,
        "decision": "approved" if approve else "declined",
    }
    with db.driver_write() as tx:
        decided = tx.run(_DECIDE, **decision)
    if decided:
        return _record(dict(zip(_COLUMNS, decided[0], strict=True)))
    record = get(db, approval_id)
    if record is None or user_id is None or record.user_id != user_id:
        raise ApprovalInvalid(approval_id, "unknown")
    state = record.state(now)
    raise ApprovalInvalid(approval_id, "expired" if state == "expired" else "decided")


def settle(
    tx: DriverTransaction,
    now: datetime,
    approval_id: str | None,
    *,
    tool: str,
    args: Mapping[str, ArgValue],
    actor: str,
    user_id: str,
    sentence: str,
    ttl: timedelta = DEFAULT_APPROVAL_TTL,
    agent: str | None = None,
) -> Approval | ApprovalRecord | None:
    """A write's consent, in the caller's write transaction (with the session's lookup, say).

    With ``approval_id``: that approval's one use, a conditional UPDATE of the approval
    bound to this exact call (its digest), approved, unused and unexpired, so of many
    concurrent uses exactly one wins; None when it is refused (:func:`refuse`, after the
    transaction, says why). Without: the identical call's approved approval (same tool,
    args, actor, user and sentence) used once the same way, or else its pending one,
    named again rather than asking the human twice; else a new pending one, as
    :func:`request_approval` records it, unless :data:`MAX_WAITING` of the agent's already
    wait for the user (:class:`TooManyApprovals`). A new one forgets the approvals that
    ended over :data:`KEEP_ENDED` ago.
    """
    wanted = digest(tool, args, actor, user_id, sentence)
    if approval_id is None:
        found = _use_identical(tx, now, wanted, user_id)
        if found is not None:
            return found
        # Counted and asked in one step, whatever other process proposes for them at once.
        serialize(tx, f"{approvals_table.name} {user_id} {actor}")
        (waiting,) = tx.run(_WAITING, user=user_id, actor=actor, now=now)[0]
        if waiting >= MAX_WAITING:
            raise TooManyApprovals(waiting)
        tx.run(_FORGET, before=now - KEEP_ENDED)
        return _ask(tx, now, tool, args, sentence, actor, user_id, ttl, agent, wanted)
    if not _is_approval_id(approval_id):
        return None
    won = tx.run(_REDEEM, approval_id=approval_id, wanted=wanted, user=user_id, now=now)
    if not won:
        return None
    approved_by, approved_at = won[0]
    return Approval(id=approval_id, approved_by=approved_by, approved_at=approved_at)


def end_agent(conn: Connection, now: datetime, *, user_id: str, actor: str) -> None:
    """End, in the caller's write transaction, the approvals still to be used of one agent
    (its identity, ``str(Actor)``) acting for one user: its grant was revoked, and what
    the user approved or was asked for it will never run. Pending and approved ones
    expire now; used, declined and expired ones stay as they are."""
    _end(conn, now, approvals_table.c.user_id == user_id, approvals_table.c.actor == actor)


def _user_revoked(conn: Connection, now: datetime, user_id: str) -> None:
    """``sessions.revoke_user``'s end of the approvals: every one of the user's still to be
    used ends, whichever agent asked. One was decided by a session of the user's, which
    may have been a thief's (the reason the user's access is ended), and an approved
    write must not run on that word after it."""
    _end(conn, now, approvals_table.c.user_id == user_id)


approvals_table.info[WHEN_USER_REVOKED] = _user_revoked


def _end(conn: Connection, now: datetime, *which: ColumnElement[bool]) -> None:
    """Pending and approved approvals among ``which`` expire now."""
    table = approvals_table
    conn.execute(
        update(table)
        .where(
            *which,
            table.c.used_at.is_(None),
            table.c.status.in_(("pending", "approved")),
            table.c.expires_at > now,
        )
        .values(expires_at=now)
    )


def refuse(
    db: Database,
    approval_id: object,
    now: datetime,
    *,
    tool: str,
    args: Mapping[str, ArgValue],
    actor: str,
    user_id: str,
    sentence: str,
) -> NoReturn:
    """Why an approval's use was refused (:func:`settle`): its ``ApprovalInvalid``.

    Another user's approval is ``unknown``, as :func:`decide` has it: a call learns
    nothing of approvals that are not its user's, not even that one exists.
    """
    approval = approval_id if isinstance(approval_id, str) else ""
    record = get(db, approval)
    if record is None or record.user_id != user_id:
        raise ApprovalInvalid(approval, "unknown")
    for reason, ours, theirs in (
        ("actor", actor, record.actor),
        ("tool", tool, record.tool),
        ("args", _texts(args), _texts(record.args)),
        ("sentence", digest(tool, args, actor, user_id, sentence), record.digest),
    ):
        if ours != theirs:
            raise ApprovalInvalid(approval, reason)
    state = record.state(now)
    raise ApprovalInvalid(approval, "expired" if state == "approved" else state)


def _use_identical(
    tx: DriverTransaction, now: datetime, wanted: str, user_id: str
) -> Approval | ApprovalRecord | None:
    same = {"wanted": wanted, "user": user_id, "now": now}
    pending: ApprovalRecord | None = None
    for row in tx.run(_IDENTICAL, **same):
        record = _record(dict(zip(_COLUMNS, row, strict=True)))
        if record.status == "pending":
            pending = pending or record
            continue
        if tx.run(_USE_IDENTICAL, **same, approval_id=record.id):
            assert record.decided_by is not None and record.decided_at is not None
            return Approval(
                id=record.id, approved_by=record.decided_by, approved_at=record.decided_at
            )
    return pending


def _texts(args: Mapping[str, ArgValue]) -> dict[str, str]:
    return {name: wire(value) for name, value in sorted(args.items())}


def _deciding_user(source: Request | Context | str) -> str | None:
    if isinstance(source, str):
        return source
    request: Request = source.request if isinstance(source, Context) else source
    if is_tool_call(request.scope):
        raise ToolError("an approval is decided by a human in their own session, not a tool call")
    return request.scope.get(USER_SCOPE_KEY)


def _record(row: Mapping[Any, Any]) -> ApprovalRecord:
    return ApprovalRecord(
        id=row["id"],
        tool=row["tool"],
        args=json.loads(row["args"]),
        sentence=row["sentence"],
        actor=row["actor"],
        user_id=row["user_id"],
        digest=row["digest"],
        status=row["status"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        decided_by=row["decided_by"],
        decided_at=row["decided_at"],
        used_at=row["used_at"],
        agent=row["agent"],
    )
