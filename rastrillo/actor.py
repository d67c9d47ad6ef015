"""Who is acting: a human in a browser, or a named agent on a user's behalf."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


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
    approved write, the approval.
    """

    human: bool = True
    name: str = ""
    user_id: str | None = None
    approval: Approval | None = None

    @classmethod
    def agent(cls, name: str) -> Actor:
        """A named agent; the name is letters, digits, `_`, `.` or `-` (max 64)."""
        return cls(human=False, name=name)

    @property
    def is_named_agent(self) -> bool:
        return not self.human and bool(_AGENT_NAME.match(self.name))

    def __str__(self) -> str:
        return "human" if self.human else f"agent:{self.name}"
