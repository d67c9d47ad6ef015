"""The audit log: one row for every tool call, refused or run.

Who acted (the agent and the user it acted for), what they asked (the tool
and its exact args), under which approval (who approved, when), what came of
it (the refusal and why, or the response status) and how long it took. The
framework writes it, so no app has to remember to.

A call that changes state — an approved write — has its row written in the
transaction that uses its approval (:func:`begin`), before it runs, and its
outcome before dispatch returns its result: once the caller sees the result, the
whole row is in the database, and a process that ends inside ``handle`` still
leaves the write recorded. Every other row (reads, refusals) is appended by a
background writer per database (``audit_writer.py``), in batches, so a read never
waits on a commit (one would double its cost); such a row reaches the table
within milliseconds, and :func:`latest`, :func:`flush` and interpreter exit
wait for every row appended before them. Only a hard crash (SIGKILL, power
loss) in those milliseconds can lose a read's row. While the database is
locked or unreachable, at most :data:`QUEUED_MAX` rows wait: one past them is
logged in full instead, never lost unsaid. The table, and how a call's entry
becomes a row, are in ``audit_rows.py``.
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import inspect, select

from rastrillo.actor import describe
from rastrillo.errors import RastrilloError
from rastrillo.storage import Database, DriverTransaction
from rastrillo.tools.audit_rows import (
    ARG_TEXT_KEPT,
    ARGS_KEPT,
    BEGUN,
    COLUMNS,
    Called,
    Entry,
    as_json,
    audit_table,
    stored_row,
)
from rastrillo.tools.audit_writer import QUEUED_MAX, insert_rows, writer_for, writers
from rastrillo.visible import field, json_line, quoted

__all__ = [
    "ARGS_KEPT",
    "ARG_TEXT_KEPT",
    "QUEUED_MAX",
    "AuditNotWritten",
    "AuditRecord",
    "Called",
    "Entry",
    "append",
    "begin",
    "flush",
    "latest",
    "shutdown",
]

log = logging.getLogger("rastrillo.tools.audit")


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """One tool call as the audit log keeps it."""

    at: datetime
    call_id: str
    tool: str
    actor: str
    """``agent:<name>`` as given, even when the call was refused for it."""
    user_id: str | None
    args: dict[str, Any]
    agent: str | None = None
    """The agent's name; None when the call was not made by a named agent."""
    approval_id: str | None = None
    approval_path: str | None = None
    """The approval page's path, for a write that waits for approval or ran under one."""
    approved_by: str | None = None
    approved_at: datetime | None = None
    status: int | None = None
    """The response status of a call that ran; None when refused, or for an approved write
    whose process ended before it had an outcome (its row is written before it runs)."""
    refusal_kind: str | None = None
    """The refusal's class (``ConfirmRequired``, ``ApprovalInvalid``, …); None when it ran."""
    refusal: str | None = None
    """Why the call was refused (the error's class and message); None when it ran."""
    client: str | None = None
    """The agent's client (an MCP client's name), when the caller named one."""
    duration_ms: float = 0.0

    @property
    def outcome(self) -> str:
        if self.refusal is not None:
            return f"refused: {self.refusal}"
        return _NO_OUTCOME if self.status is None else str(self.status)

    def __str__(self) -> str:
        """The row on one line for a terminal (``rastrillo audit``), every character of what
        the model and the app chose escaped once: a text arg, and a refusal's text, in
        quotes (:func:`visible.quoted`), and a name or id in quotes unless it is one plain
        word (:func:`visible.field`): a tool a model made up, an arg's name it sent to one,
        a user id or a refused value holding ``  → 200  […]``, cannot end their field and
        forge the next."""
        who = describe(
            field(self.actor),
            None if self.user_id is None else field(self.user_id),
            None if self.approved_by is None else field(self.approved_by),
            self.approved_at,
        )
        args = " ".join(f"{field(k)}={_shown(v)}" for k, v in self.args.items())
        at = self.at.astimezone(UTC)
        outcome = self.outcome if self.refusal is None else f"refused: {quoted(self.refusal)}"
        return (
            f"{at:%Y-%m-%d %H:%M:%S}  {field(self.tool)}({args})  {who}"
            f"  → {outcome}"
            f"  [{self.duration_ms:.1f} ms, call {field(self.call_id)}]"
        )


_NO_OUTCOME = "no outcome recorded"


def _shown(value: object) -> str:
    """An arg's value as ``rastrillo audit`` prints it: a text quoted, a number or a bool
    as its JSON (a row keeps any other value as text: see :func:`_json_scalar`)."""
    if isinstance(value, str):
        return quoted(value)
    return json_line(value)


# Call ids for calls without one: unique per process run, without a syscall per call.
_RUN = secrets.token_hex(4)
_SEQUENCE = itertools.count(1)


def append(db: Database, entry: Entry, *, durable: bool = False) -> None:
    """Record one call, whatever it held: never refused for its content.

    Every text is made storable on every database (by the thread that writes
    it, not the caller's): a non-string as its ``repr``, a lone surrogate or a
    NUL escaped, a value longer than its column cut short (ending ``…``).
    ``durable`` writes the row now, in the calling thread, waiting out a locked
    or unreachable database; otherwise it is queued for the background writer.
    An entry :func:`begin` wrote has its outcome (status, duration) written.
    The entry is the row from now on: nothing may change it after this.
    """
    entry.duration_ms = entry.elapsed_ms()
    if entry.row_id is None:
        _stamp(entry, db.clock.now())
    if durable:
        insert_rows(db, [entry])
    else:
        (writers.get(id(db)) or writer_for(db)).put(entry)


def begin(tx: DriverTransaction, entry: Entry, now: datetime) -> int:
    """An approved write's row, in the transaction that uses its approval: on disk before
    the write runs, so that no process ending in ``handle`` leaves a write unrecorded.
    Its status stays NULL until :func:`append` writes the outcome there.

    Returns the row's id, for the caller to set as ``entry.row_id`` once the transaction
    has committed, not before: a row rolled back has no id to write an outcome to (on
    SQLite the next row would take it)."""
    entry.duration_ms = entry.elapsed_ms()
    _stamp(entry, now)
    [(row_id,)] = tx.run(BEGUN, **dict(zip(COLUMNS, stored_row(entry), strict=True)))
    return int(row_id)


def _stamp(entry: Entry, now: datetime) -> None:
    """The row's time and call id, and the call's args as they are now (the caller's
    mapping may change once the entry is handed over)."""
    entry.at = now
    if entry.call_id is None:
        entry.call_id = f"{_RUN}-{next(_SEQUENCE)}"
    args = entry.args
    entry.args = dict(args) if type(args) is dict or isinstance(args, Mapping) else {}


class AuditNotWritten(RastrilloError):
    """Rows appended before a :func:`flush` are not in the table.

    ``pending`` rows are still queued: the database is locked or unreachable,
    and the writer goes on retrying them. ``lost`` rows were refused by the
    database since the last flush, and ``dropped`` rows found the queue full
    (:data:`QUEUED_MAX`) since the last flush: both are in the log, each in full.
    """

    def __init__(self, pending: int, lost: int, dropped: int = 0) -> None:
        self.pending = pending
        self.lost = lost
        self.dropped = dropped
        parts = []
        if pending:
            parts.append(f"{pending} still waiting for the database (retrying)")
        if lost:
            parts.append(f"{lost} refused by the database (logged in full)")
        if dropped:
            parts.append(f"{dropped} not queued, the queue being full (logged in full)")
        super().__init__(f"audit rows not written: {'; '.join(parts)}")


def flush(db: Database, timeout: float = 10.0) -> None:
    """Wait until every row appended so far is in the table.

    Raises :class:`AuditNotWritten` when, after ``timeout`` seconds, some are
    still waiting (they stay queued and are written once the database lets
    them), or when, since the last flush, the database refused rows or rows
    found the queue full.
    """
    writer = writers.get(id(db))
    if writer is None:
        return
    pending = writer.wait(timeout)
    lost, dropped = writer.take_lost()
    if pending or lost or dropped:
        raise AuditNotWritten(pending, lost, dropped)


def shutdown(timeout: float = 30.0) -> None:
    """At interpreter exit: wait for every database's queued rows, then log, row by row,
    any that could still not be written. (A server's end calls it with no wait: its
    lifespan's flush has already waited. Rows an earlier call logged are neither waited
    for nor logged again.)

    A writer waiting out a database that cannot answer is not waited for: its rows are
    logged at once, where a platform's kill grace would end a longer wait with nothing
    logged."""
    for writer in list(writers.values()):
        if writer.wait(timeout, until_outage=True):
            writer.abandon(_unwritten)


def _unwritten(entry: Entry) -> None:
    log.error("audit: row not written before exit: %s", as_json(entry))


def latest(db: Database, limit: int = 20, user_id: str | None = None) -> list[AuditRecord]:
    """The newest rows first, optionally only the calls made for one user.

    Rows appended before the call are waited for (up to ten seconds), so a
    caller sees its own calls. A database the app never opened has no audit
    table, and so no rows.
    """
    writer = writers.get(id(db))
    if writer is not None:
        writer.wait(10.0)
    query = (
        select(audit_table).order_by(audit_table.c.at.desc(), audit_table.c.id.desc()).limit(limit)
    )
    if user_id is not None:
        query = query.where(audit_table.c.user_id == user_id)
    with db.read() as conn:
        if not inspect(conn).has_table(audit_table.name):
            return []
        rows = conn.execute(query).mappings().all()
    return [_record(row) for row in rows]


def _record(row: Mapping[Any, Any]) -> AuditRecord:
    return AuditRecord(
        at=row["at"],
        call_id=row["call_id"],
        tool=row["tool"],
        actor=row["actor"],
        agent=row["agent"],
        user_id=row["user_id"],
        args=json.loads(row["args"]),
        approval_id=row["approval_id"],
        approval_path=row["approval_path"],
        approved_by=row["approved_by"],
        approved_at=row["approved_at"],
        status=row["status"],
        refusal_kind=row["refusal_kind"],
        refusal=row["refusal"],
        client=row["client"],
        duration_ms=row["duration_ms"],
    )


atexit.register(shutdown)
