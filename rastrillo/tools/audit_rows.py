"""The audit table, and a call's entry made into a row every database stores.

A row keeps whatever a call held, never refused for its content: every text made
storable (a non-string as its ``repr``, a lone surrogate or a NUL escaped) and cut to its
column, the args bounded (:data:`ARGS_KEPT` of them, each cut at :data:`ARG_TEXT_KEPT`),
so a model's megabyte is a few KiB of row.
"""

from __future__ import annotations

import itertools
import json
import math
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Column, Float, Integer, String, Table, Text, bindparam

from rastrillo.actor import Actor, Approval
from rastrillo.clock import Clock
from rastrillo.errors import written
from rastrillo.storage import METADATA, Instant, Prepared

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
COLUMNS = tuple(column.name for column in audit_table.columns if not column.primary_key)
"""A row's fields, in the order the INSERT takes them."""


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

    def __init__(self, call: Called, clock: Clock) -> None:
        """``clock``: the one the call is timed on (its database's)."""
        self.call_id, self.tool, self.actor, self.client = (
            call.call_id,
            call.tool,
            call.actor,
            call.client,
        )
        self.args: Any = call.args
        self.clock = clock
        self.started = clock.monotonic()

    def elapsed_ms(self) -> float:
        """Milliseconds since the call started."""
        return (self.clock.monotonic() - self.started) * 1000


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
    for index, column in enumerate(audit_table.c[name] for name in COLUMNS)
    if isinstance(column.type, String) and column.name != "args"
]
"""Each text column but ``args`` (made storable as it is made), by its index in a row: its
length (None: unbounded) and whether it takes NULL."""


def stored_row(entry: Entry) -> list[Any]:
    """The entry's row, its values in :data:`COLUMNS` order, each text storable and cut
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


def keep_as_stored(entry: Entry) -> bool:
    """Keep the entry as its row is stored, the call's args let go; False, and the entry
    left as it is, when the row cannot be made (an object handed over in-process that
    raises when written)."""
    if entry.stored is None:
        try:
            entry.stored = stored_row(entry)
        except Exception:
            return False
        entry.args = None
    return True


INSERT = Prepared(audit_table.insert(), columns=COLUMNS)
BEGUN = Prepared(audit_table.insert().returning(audit_table.c.id), columns=COLUMNS)
OUTCOME = Prepared(
    audit_table.update()
    .where(audit_table.c.id == bindparam("row_id"))
    .values(status=bindparam("status"), duration_ms=bindparam("duration_ms"))
    .returning(audit_table.c.id)
)
"""An approved write's outcome, written to the row :func:`~rastrillo.tools.audit.begin`
wrote; it returns the row's id, so a row that is not there is known, not passed over."""


def as_json(entry: Entry) -> str:
    """A row for the log, storable text as it would have been stored; where the row cannot
    be made (an object handed over in-process that raises when written), what can be said."""
    try:
        row = stored_row(entry)
    except Exception:
        return f"a row that cannot be made, call {written(entry.call_id)} of {written(entry.tool)}"
    return json.dumps(dict(zip(COLUMNS, row, strict=True)), default=str, ensure_ascii=True)
