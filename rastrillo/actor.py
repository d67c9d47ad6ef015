"""Who is acting: a human in a browser, or a named agent on a user's behalf."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from rastrillo.errors import written

_AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_GRANT_ID = re.compile(r"[0-9a-f]{32}")
AGENT_NAME_RULE = "1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit"
"""The agent-name rule in words, for every message that refuses a name."""


def is_grant_id(value: object) -> bool:
    """Whether ``value`` could be a grant id (``secrets.token_hex(16)``): a ``str`` (never
    a subclass) wholly matching. The one rule for a grant id from outside (a page's path,
    a terminal), applied before any lookup: PostgreSQL refuses a NUL in text, and no
    driver encodes a lone surrogate, so either would be a traceback, not "no such grant"."""
    return type(value) is str and _GRANT_ID.fullmatch(value) is not None


@dataclass(frozen=True)
class Approval:
    """The human decision a write ran under: which approval, who, and when."""

    id: str
    approved_by: str
    approved_at: datetime


@dataclass(frozen=True)
class Actor:
    """The party a request is attributed to.

    A browser request has a human actor; a dispatched tool call has an agent
    actor (``Actor.agent(name)``) carrying the user it acts for and, on an
    approved write, the approval. An agent connected through a grant (MCP, a
    personal token) carries the grant's id too: it is a different agent from the
    app's own in-process agent of the same name, and from another grant's.
    """

    human: bool = True
    name: str = ""
    user_id: str | None = None
    approval: Approval | None = None
    grant: str | None = None
    """The id of the grant the agent calls through; None for the app's own agent."""

    @classmethod
    def agent(cls, name: str, *, grant: str | None = None) -> Actor:
        """A named agent; the name is letters, digits, `_`, `.` or `-` (max 64)."""
        return cls(human=False, name=name, grant=grant)

    @functools.cached_property
    def is_named_agent(self) -> bool:
        """An agent whose name (and grant id, if any) is well formed."""
        return (
            not self.human
            and isinstance(self.name, str)
            and _AGENT_NAME.fullmatch(self.name) is not None
            and (self.grant is None or is_grant_id(self.grant))
        )

    def __str__(self) -> str:
        """The agent's identity, which approvals and audit rows are bound to:
        ``agent:assistant``, or ``agent:assistant (grant 1f…)`` through a grant."""
        if self.human:
            return "human"
        # Whatever a hand-built actor holds is written, never raised on (a huge integer).
        name = self.name if type(self.name) is str else written(self.name)
        if self.grant is None:
            return f"agent:{name}"
        grant = self.grant if type(self.grant) is str else written(self.grant)
        return f"agent:{name} (grant {grant})"

    def describe(self) -> str:
        """Who did it, for a record an app keeps: ``agent:concierge for user 3, approved
        by user 3 at 2025-06-01 12:00:00 UTC``; a browser request gives ``user 3``."""
        if self.human:
            return f"user {self.user_id}" if self.user_id is not None else "human"
        approval = self.approval
        return describe(
            str(self),
            self.user_id,
            approval.approved_by if approval else None,
            approval.approved_at if approval else None,
        )


def describe(
    actor: str, user_id: str | None, approved_by: str | None, approved_at: datetime | None
) -> str:
    """The sentence of `Actor.describe`, from stored fields (the audit log uses it too)."""
    text = f"{actor} for user {user_id}" if user_id is not None else actor
    if approved_by is not None and approved_at is not None:
        when = approved_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        text += f", approved by user {approved_by} at {when}"
    return text
