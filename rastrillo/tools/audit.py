"""The audit log: one row for every tool call, refused or run.

Who acted (the agent and the user it acted for), what they asked (the tool
and its exact args), under which approval (who approved, when), what came of
it (the refusal and why, or the response status) and how long it took. The
framework writes it, so no app has to remember to.

A call that changed state — a write tool that ran — is written before
dispatch returns its result, in its own transaction: once the caller sees the
result, the row is in the database. Every other row (reads, refusals) is
appended by a background writer per database, in batches, so a read never
waits on a commit (one would double its cost); such a row reaches the table
within milliseconds, and :func:`latest`, :func:`flush` and interpreter exit
wait for every row appended before them. Only a hard crash (SIGKILL, power
loss) in those milliseconds can lose a read's row; an approved write is in
addition recorded, before it runs, by its approval row. While the database is
locked or unreachable, at most :data:`QUEUED_MAX` rows wait: one past them is
logged in full instead, never lost unsaid.
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import math
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import Column, Float, Integer, String, Table, Text, bindparam, inspect, select

from rastrillo.actor import Actor, Approval, describe
from rastrillo.errors import RastrilloError, written
from rastrillo.storage import (
    METADATA,
    Database,
    DriverTransaction,
    Instant,
    Prepared,
    is_unavailable,
)
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

audit_table = Table(
    "rastrillo_audit",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Instant, nullable=False),
    Column("call_id", String(64), nullable=False),
    Column("tool", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("agent", String(64)),
    Column("user_id", String(255), index=True),
    Column("args", Text, nullable=False),
    Column("approval_id", String(64)),
    Column("approval_path", Text),
    Column("approved_by", String(255)),
    Column("approved_at", Instant),
    Column("status", Integer),
    Column("refusal_kind", String(64)),
    Column("refusal", Text),
    Column("client", String(255)),
    Column("duration_ms", Float, nullable=False),
)
_COLUMNS = tuple(column.name for column in audit_table.columns if not column.primary_key)
"""A row's fields, in the order the INSERT takes them."""


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


class Called(Protocol):
    """What the audit log keeps of a call as it was made (a ``tools.Call`` is one)."""

    @property
    def call_id(self) -> object: ...
    @property
    def tool(self) -> object: ...
    @property
    def actor(self) -> object: ...
    @property
    def args(self) -> object: ...
    @property
    def client(self) -> object: ...


class Entry:
    """One call's row in the making, filled in as the call goes, then given to :func:`append`.

    Made as the call starts, from the call as it was made (``call_id`` None: one is
    made up when the row is appended; ``actor`` an :class:`~rastrillo.actor.Actor`,
    or whatever stood in its place), so the row says how long the call took. Then
    a value for each column but ``at`` (the time it is appended), ``agent`` (the
    name of ``actor`` when it is a named agent) and ``approved_by``/``approved_at``,
    which come from ``approval``, the approval a write ran under. Any value is
    taken, whatever it holds: see :func:`append`. Turning them into the row's
    texts is left to the thread that writes it.
    """

    # Defaults for what a call may never fill in: a new entry sets only what it knows.
    stored: list[Any] | None = None
    """The row as it is stored, made once it waits behind many others (its args dropped)."""
    row_id: int | None = None
    """An approved write's row, written by :func:`begin` before the write ran: appending
    the entry writes its outcome there."""
    user_id: str | None = None
    approval: Approval | None = None
    approval_id: object = None
    approval_path: str | None = None
    status: int | None = None
    refusal_kind: str | None = None
    refusal: str | None = None
    at: datetime
    duration_ms: float

    def __init__(self, call: Called) -> None:
        self.call_id, self.tool, self.actor, self.client = (
            call.call_id,
            call.tool,
            call.actor,
            call.client,
        )
        self.args: Any = call.args
        self.started = time.perf_counter()


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
    entry.duration_ms = (time.perf_counter() - entry.started) * 1000
    if entry.row_id is None:
        _stamp(entry, db.clock.now())
    if durable:
        _insert(db, [entry])
    else:
        (_writers.get(id(db)) or _writer(db)).put(entry)


def begin(tx: DriverTransaction, entry: Entry, now: datetime) -> None:
    """An approved write's row, in the transaction that uses its approval: on disk before
    the write runs, so that no process ending in ``handle`` leaves a write unrecorded.
    Its status stays NULL until :func:`append` writes the outcome."""
    entry.duration_ms = (time.perf_counter() - entry.started) * 1000
    _stamp(entry, now)
    [(entry.row_id,)] = tx.run(_BEGUN, **dict(zip(_COLUMNS, _row(entry), strict=True)))


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
    writer = _writers.get(id(db))
    if writer is None:
        return
    pending = writer.wait(timeout)
    lost, dropped = writer.take_lost()
    if pending or lost or dropped:
        raise AuditNotWritten(pending, lost, dropped)


def shutdown(timeout: float = 30.0) -> None:
    """At interpreter exit: wait for every database's queued rows, then log, row by row,
    any that could still not be written. (A server's end calls it with no wait: its
    lifespan's flush has already waited.)

    A writer waiting out a database that cannot answer is not waited for: its rows are
    logged at once, where a platform's kill grace would end a longer wait with nothing
    logged."""
    for writer in list(_writers.values()):
        if writer.wait(timeout, until_outage=True):
            for entry in writer.abandon():
                log.error("audit: row not written before exit: %s", _as_json(entry))


def latest(db: Database, limit: int = 20, user_id: str | None = None) -> list[AuditRecord]:
    """The newest rows first, optionally only the calls made for one user.

    Rows appended before the call are waited for (up to ten seconds), so a
    caller sees its own calls. A database the app never opened has no audit
    table, and so no rows.
    """
    writer = _writers.get(id(db))
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


ARG_TEXT_KEPT = 4096
"""The most characters of one arg's name or value a row keeps (the rest cut, ending ``…``)."""
ARGS_KEPT = 64
"""The most args a row keeps, in the call's order; the others are counted under ``"…"``."""


_INT_KEPT = 10**ARG_TEXT_KEPT
"""A bound no integer a row keeps as a number reaches (its text would be over
:data:`ARG_TEXT_KEPT` characters)."""


def _json_scalar(value: Any) -> Any:
    """A value as JSON keeps it: bools, integers and finite numbers as they are (a typed
    `2` is not recorded as `"2"`), anything else as storable text, cut to its length."""
    if isinstance(value, bool | int):
        # An integer past Python's 4,300 digits cannot be written as JSON: kept as text.
        return value if -_INT_KEPT < value < _INT_KEPT else _cut(_text(value), ARG_TEXT_KEPT)
    if isinstance(value, float) and math.isfinite(value):
        return value
    return _cut(_text(value), ARG_TEXT_KEPT)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _args_json(args: dict[Any, Any]) -> str:
    """The call's args as the row keeps them, bounded whatever a model sent: a megabyte of
    text, or ten thousand names, is a few KiB of row."""
    kept = {
        _cut(_text(name), ARG_TEXT_KEPT): _json_scalar(value)
        for name, value in itertools.islice(args.items(), ARGS_KEPT)
    }
    if len(args) > ARGS_KEPT:
        kept["…"] = f"{len(args) - ARGS_KEPT} more args"
    return _ARGS_ENCODER.encode(kept)


_ARGS_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""Made once: ``json.dumps`` with any option makes an encoder on every call."""


def _text(value: Any) -> str:
    """Any value as text every database stores: non-strings as ``repr``; a lone
    surrogate (not UTF-8) and a NUL (refused by PostgreSQL) escaped as ``\\udxxx``
    and ``\\x00``."""
    text = value if isinstance(value, str) else written(value)
    if text.isascii() and "\x00" not in text:
        return text  # the usual case: nothing to escape
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


_TEXTS = [
    (index, column.type.length, column.nullable)
    for index, column in enumerate(audit_table.c[name] for name in _COLUMNS)
    if isinstance(column.type, String) and column.name != "args"
]
"""Each text column but ``args`` (made storable as it is made), by its index in a row: its
length (None: unbounded) and whether it takes NULL."""


def _row(entry: Entry) -> list[Any]:
    """The entry's row, its values in :data:`_COLUMNS` order, each text storable and cut
    to its column's length. A list, made once per row by the thread that writes it: the
    fewest steps from an entry to the driver's parameters."""
    if entry.stored is not None:
        return entry.stored
    actor = entry.actor if isinstance(entry.actor, Actor) else None
    approval = entry.approval
    row = [
        entry.at,
        entry.call_id,
        entry.tool,
        str(actor) if actor is not None else entry.actor,
        actor.name if actor is not None and actor.is_named_agent else None,
        entry.user_id,
        _args_json(entry.args),
        entry.approval_id,
        entry.approval_path,
        approval.approved_by if approval else None,
        approval.approved_at if approval else None,
        entry.status,
        entry.refusal_kind,
        entry.refusal,
        entry.client,
        entry.duration_ms,
    ]
    for index, limit, nullable in _TEXTS:
        value = row[index]
        if value is None:
            if nullable:
                continue
        elif (
            type(value) is str
            and value.isascii()
            and "\x00" not in value
            and (limit is None or len(value) <= limit)
        ):
            continue  # the usual case: stored as it is
        row[index] = _text(value) if limit is None else _cut(_text(value), limit)
    return row


def _keep_as_stored(entry: Entry) -> bool:
    """Keep the entry as its row is stored, the call's args let go; False, and the entry
    left as it is, when the row cannot be made (an object handed over in-process that
    raises when written)."""
    if entry.stored is None:
        try:
            entry.stored = _row(entry)
        except Exception:
            return False
        entry.args = None
    return True


_INSERT = Prepared(audit_table.insert(), columns=_COLUMNS)
_BEGUN = Prepared(audit_table.insert().returning(audit_table.c.id), columns=_COLUMNS)
_OUTCOME = Prepared(
    audit_table.update()
    .where(audit_table.c.id == bindparam("row_id"))
    .values(status=bindparam("status"), duration_ms=bindparam("duration_ms"))
)


def _as_json(entry: Entry) -> str:
    """A row for the log, storable text as it would have been stored; where the row cannot
    be made (an object handed over in-process that raises when written), what can be said."""
    try:
        row = _row(entry)
    except Exception:
        return f"a row that cannot be made, call {written(entry.call_id)} of {written(entry.tool)}"
    return json.dumps(dict(zip(_COLUMNS, row, strict=True)), default=str, ensure_ascii=True)


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


_RETRY_FIRST = 0.05
_RETRY_MAX = 2.0


def _insert(
    db: Database, rows: list[Entry], on_wait: Callable[[], None] | None = None
) -> list[Entry]:
    """Insert ``rows``; return those the database refused, each logged in full.

    A database that cannot serve now (``storage.is_unavailable``: locked past
    the busy timeout, unreachable, out of room) is waited out: the rows are
    retried, with a growing pause, until written, ``on_wait`` called as the
    wait begins. Any other failure is a row's own: the rows are then written
    one at a time, so one refused row never costs another.
    """
    delay = _RETRY_FIRST
    waiting = False
    while True:
        try:
            with db.driver_write() as tx:
                new = [_row(row) for row in rows if row.row_id is None]
                if new:
                    tx.run_many(_INSERT, new)
                for row in rows:
                    if row.row_id is not None:
                        tx.run(
                            _OUTCOME,
                            row_id=row.row_id,
                            status=row.status,
                            duration_ms=row.duration_ms,
                        )
        except Exception as exc:
            if not is_unavailable(exc):
                refused = exc
                break
            if not waiting:
                log.warning("audit: %d rows wait for the database (%s); retrying", len(rows), exc)
                waiting = True
                if on_wait is not None:
                    on_wait()
            time.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)
        else:
            if waiting:
                log.warning("audit: %d rows written after waiting for the database", len(rows))
            return []
    if len(rows) == 1:
        log.error("audit: the database refused a row: %s", _as_json(rows[0]), exc_info=refused)
        return rows
    return [lost for row in rows for lost in _insert(db, [row])]


QUEUED_MAX = 10_000
"""The most rows one database's background writer keeps waiting, besides the batch it is
writing, while the database is locked or unreachable: calls made through an outage cost
bounded memory. The first rows are kept, the oldest of the outage (a :func:`flush` has
counted them as pending); a row appended past the bound is logged in full
(``rastrillo.tools.audit``, ERROR) instead, and counted as ``dropped`` by the next
:func:`flush`. A write is never queued: its row is written with its approval's use
(:func:`begin`), before it runs, and its outcome waits out the database in the thread that
ran it, so no write goes unrecorded."""
_KEPT_AS_GIVEN = 1_000
"""Past this many waiting rows (the writer is behind), or once the writer waits for the
database, a row is queued as it is stored, bounded by :data:`ARGS_KEPT` and
:data:`ARG_TEXT_KEPT`, not holding the call's args as given. A healthy writer at full speed
finds up to a few hundred rows waiting when it takes a batch (on two loaded cores: a
median of 124-154, at most 392), so a lower bound would have reads make their rows'
stored form in the normal case; an outage is told by the writer, not by the count."""


class _Writer:
    """Writes one database's queued rows in batches on a thread that ends when idle."""

    _IDLE_SECONDS = 1.0
    _LINGER_SECONDS = 0.02

    def __init__(self, db: Database) -> None:
        self._db = weakref.ref(db)
        """Weak: a database no one uses any more is collected, its writer with it."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._rows: list[Entry] = []
        self._batch: list[Entry] = []
        self._queued = 0
        self._done = 0
        self._lost = 0
        self._dropped = 0
        self._running = False
        self._outage = False
        """The database made the writer wait: a row is queued as it is stored."""
        self._idle = False
        """The thread waits for rows: a new row must wake it."""

    def put(self, row: Entry) -> None:
        with self._lock:  # the condition's own lock, without its Python-level wrapper
            waiting = len(self._rows)
            if (waiting < _KEPT_AS_GIVEN and not self._outage) or (
                row.stored is not None and waiting < QUEUED_MAX
            ):
                self._rows.append(row)
                self._queued += 1
                if self._idle:
                    self._cond.notify()
                if not self._running:
                    self._running = True
                    threading.Thread(target=self._run, name="rastrillo-audit", daemon=True).start()
                return
        self._put_behind(row)

    def _outage_began(self) -> None:
        """The database makes the writer wait: the rows queued already, and each one queued
        until it is written, are kept as they are stored, not with the calls' args as
        given (their memory bounded whatever the calls sent)."""
        with self._cond:
            self._outage = True
            self._cond.notify_all()  # a shutdown waits no longer
            queued = list(self._rows)
        for row in queued:  # the writer's from their put on: nobody else changes them
            _keep_as_stored(row)  # one that cannot be made is lost when its turn comes

    def _put_behind(self, row: Entry) -> None:
        """A row behind many waiting ones: queued as it is stored (the caller's args let
        go), or, with :data:`QUEUED_MAX` waiting, not queued but logged in full."""
        if row.stored is None:
            # Outside the lock: only while the writer lags.
            if _keep_as_stored(row):
                self.put(row)
            else:
                with self._lock:
                    self._lost += 1
                log.error("audit: row not written: %s", _as_json(row))
            return
        with self._lock:
            self._dropped += 1
        log.error(
            "audit: %d rows already wait for the database, row not queued: %s",
            QUEUED_MAX,
            _as_json(row),
        )

    def wait(self, timeout: float, *, until_outage: bool = False) -> int:
        """Wait until the rows queued so far are written or refused, or with
        ``until_outage`` until the writer waits for the database; return how many are not."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._queued
            while (
                self._done < target
                and not (until_outage and self._outage)
                and self._cond.wait(max(0.0, deadline - time.monotonic()))
            ):
                pass
            return max(0, target - self._done)

    def take_lost(self) -> tuple[int, int]:
        """How many rows the database refused, and how many found the queue full, since
        the last call."""
        with self._cond:
            lost, dropped, self._lost, self._dropped = self._lost, self._dropped, 0, 0
            return lost, dropped

    def abandon(self) -> list[Entry]:
        """The rows not written yet: the one batch being written and every queued row."""
        with self._cond:
            return [*self._batch, *self._rows]

    def _run(self) -> None:
        while True:
            time.sleep(self._LINGER_SECONDS)  # let a batch gather: one commit for many rows
            with self._cond:
                if not self._rows:
                    self._idle = True
                    self._cond.wait(self._IDLE_SECONDS)
                    self._idle = False
                if not self._rows:
                    self._running = False
                    return
                self._batch, self._rows = self._rows, []
            db = self._db()
            if db is None:  # collected with rows queued: they have nowhere to go
                for entry in self._batch:
                    log.error("audit: database gone, row not written: %s", _as_json(entry))
                lost = self._batch
            else:
                try:
                    lost = _insert(db, self._batch, self._outage_began)
                except Exception:  # the writer must outlive any batch: its rows count as lost
                    log.exception("audit: %d rows not written", len(self._batch))
                    lost = self._batch
                self._outage = False
                del db
            with self._cond:
                self._done += len(self._batch)
                self._lost += len(lost)
                self._batch = []
                self._cond.notify_all()


_writers: dict[int, _Writer] = {}
"""Each database's writer, by the database's ``id``: a plain dict is the cheapest lookup
for a row appended on every call, and a writer leaves it when its database is collected
(before the ``id`` can be reused)."""
_writers_lock = threading.Lock()


def _writer(db: Database) -> _Writer:
    writer = _writers.get(id(db))
    if writer is None:
        with _writers_lock:
            writer = _writers.get(id(db))
            if writer is None:
                writer = _writers[id(db)] = _Writer(db)
                # Not at exit: there shutdown() must still find the writer, to wait for its rows.
                weakref.finalize(db, _writers.pop, id(db), None).atexit = False
    return writer


atexit.register(shutdown)
