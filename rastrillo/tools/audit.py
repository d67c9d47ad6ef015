"""The audit log: one row for every tool call, refused or run.

Who acted (the agent and the user it acted for), what they asked (the tool
and its exact args), under which approval (who approved, when), what came of
it (the refusal and why, or the response status) and how long it took. The
framework writes it, so no app has to remember to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, Float, Integer, String, Table, Text, select

from rastrillo.actor import Approval, describe
from rastrillo.storage import METADATA, Database

__all__ = ["AuditRecord", "append", "as_utc", "latest"]

audit_table = Table(
    "rastrillo_audit",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("call_id", String(64), nullable=False),
    Column("tool", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("user_id", String(255), index=True),
    Column("args", Text, nullable=False),
    Column("approval_id", String(64)),
    Column("approved_by", String(255)),
    Column("approved_at", DateTime(timezone=True)),
    Column("status", Integer),
    Column("refusal", Text),
    Column("duration_ms", Float, nullable=False),
)


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """One tool call as the audit log keeps it."""

    at: datetime
    call_id: str
    tool: str
    actor: str
    """``agent:<name>`` as given, even when the call was refused for it."""
    user_id: str | None
    args: dict[str, str]
    approval_id: str | None = None
    approved_by: str | None = None
    approved_at: datetime | None = None
    status: int | None = None
    """The response status of a call that ran; None when refused."""
    refusal: str | None = None
    """Why the call was refused (the error's class and message); None when it ran."""
    duration_ms: float = 0.0

    @property
    def outcome(self) -> str:
        return f"refused: {self.refusal}" if self.refusal is not None else str(self.status)

    def __str__(self) -> str:
        who = describe(self.actor, self.user_id, self.approved_by, self.approved_at)
        args = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in self.args.items())
        at = self.at.astimezone(UTC)
        return (
            f"{at:%Y-%m-%d %H:%M:%S}  {self.tool}({args})  {who}  → {self.outcome}"
            f"  [{self.duration_ms:.1f} ms, call {self.call_id}]"
        )


def append(
    db: Database,
    *,
    call_id: str,
    tool: str,
    actor: str,
    user_id: str | None,
    args: Mapping[str, Any],
    approval: Approval | None,
    approval_id: str | None,
    status: int | None,
    refusal: str | None,
    duration_ms: float,
) -> None:
    """Append one row; whatever the call held is kept, non-strings as their ``repr``."""
    with db.write() as conn:
        conn.execute(
            audit_table.insert().values(
                at=datetime.now(UTC),
                call_id=call_id,
                tool=_text(tool),
                actor=_text(actor),
                user_id=user_id,
                args=json.dumps(_printable(args), ensure_ascii=False),
                approval_id=approval_id,
                approved_by=approval.approved_by if approval else None,
                approved_at=approval.approved_at if approval else None,
                status=status,
                refusal=refusal,
                duration_ms=duration_ms,
            )
        )


def latest(db: Database, limit: int = 20, user_id: str | None = None) -> list[AuditRecord]:
    """The newest rows first, optionally only the calls made for one user."""
    query = select(audit_table).order_by(audit_table.c.id.desc()).limit(limit)
    if user_id is not None:
        query = query.where(audit_table.c.user_id == user_id)
    with db.read() as conn:
        rows = conn.execute(query).all()
    return [_record(row._mapping) for row in rows]


def _printable(args: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in args.items()}


def _text(value: Any) -> str:
    """Any value as text the database takes: non-strings as ``repr``, lone surrogates escaped."""
    text = value if isinstance(value, str) else repr(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _record(row: Mapping[str, Any]) -> AuditRecord:
    return AuditRecord(
        at=as_utc(row["at"]),
        call_id=row["call_id"],
        tool=row["tool"],
        actor=row["actor"],
        user_id=row["user_id"],
        args=json.loads(row["args"]),
        approval_id=row["approval_id"],
        approved_by=row["approved_by"],
        approved_at=as_utc(row["approved_at"]),
        status=row["status"],
        refusal=row["refusal"],
        duration_ms=row["duration_ms"],
    )


def as_utc(value: Any) -> Any:
    """SQLite hands datetimes back naive; every time the framework stores is UTC."""
    if isinstance(value, datetime) and value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value
