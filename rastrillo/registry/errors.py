"""Why a tool call was refused: one exception class per refusal, each with a message a
model can act on. A refused call never reaches a handler."""

from __future__ import annotations

from collections.abc import Iterable

from rastrillo.errors import RastrilloError

__all__ = [
    "ApprovalInvalid",
    "BadActor",
    "BadArg",
    "ConfirmRequired",
    "MissingArg",
    "TooManyApprovals",
    "ToolError",
    "UnknownArg",
    "UnknownTool",
]


class ToolError(RastrilloError):
    """A tool call the dispatcher refused before sending it to the app."""

    @property
    def audit_note(self) -> str:
        """Why, as the audit log records it."""
        return f"{type(self).__name__}: {self}"


_NAMED = 5
"""How many names a refusal quotes: a call may bring 50,000 undeclared args."""
_NAME_SHOWN = 40
"""How much of one quoted name (an arg's, or an unknown tool's) a refusal shows."""


def _quoted(names: list[str]) -> str:
    """The first :data:`_NAMED` names, each escaped (``repr``) and cut to
    :data:`_NAME_SHOWN` characters, then how many more there are: the refusal is read by
    the model, kept in the audit row and printed by ``rastrillo audit``, and a hostile
    call must not make any of them as large as the call."""
    shown = ", ".join(
        repr(name) if len(name) <= _NAME_SHOWN else repr(name[:_NAME_SHOWN]) + "…"
        for name in names[:_NAMED]
    )
    more = len(names) - _NAMED
    return f"{shown} and {more} more" if more > 0 else shown


class UnknownTool(ToolError):
    """The call names no tool in the registry."""

    def __init__(self, tool: str, known: Iterable[str]) -> None:
        self.tool = tool
        names = ", ".join(sorted(known)) or "none"
        super().__init__(f"unknown tool {_quoted([tool])}; the tools are: {names}")


class UnknownArg(ToolError):
    """The call passes args the tool does not declare; none is silently dropped.

    ``names`` holds them all, sorted; the message quotes the first few."""

    def __init__(self, tool: str, names: Iterable[str], declared: Iterable[str]) -> None:
        self.names = sorted(names)
        listed = _quoted(self.names)
        allowed = ", ".join(sorted(declared)) or "none"
        super().__init__(f"tool {tool!r} takes no arg {listed}; its args are: {allowed}")


class MissingArg(ToolError):
    """The call leaves out args the tool requires."""

    def __init__(self, tool: str, names: Iterable[str]) -> None:
        self.names = sorted(names)
        listed = ", ".join(repr(n) for n in self.names)
        super().__init__(f"tool {tool!r} needs the arg {listed}; it is required")


class BadArg(ToolError):
    """An arg value the app must never receive: not of the declared type, outside its
    choices or bounds, or with unsafe characters. The message says what the arg expects."""

    def __init__(self, tool: str, name: str, problem: str) -> None:
        self.name = name
        super().__init__(f"tool {tool!r}, arg {name!r}: {problem}")


class BadActor(ToolError):
    """The call is not made by a named agent acting for the session's user."""


class ConfirmRequired(ToolError):
    """A write waits for the human it acts for to approve this exact call.

    Show ``sentence`` to the user with a link to ``url``; once they approve,
    call again with ``approval=approval_id`` and identical args.
    """

    def __init__(self, tool: str, sentence: str, approval_id: str, url: str) -> None:
        self.tool = tool
        self.sentence = sentence
        self.approval_id = approval_id
        self.url = url
        super().__init__(
            f"tool {tool!r} changes data and needs the user's approval: ask them to approve "
            f"{sentence!r} at {url}, then call again with the same args and this approval id"
        )

    @property
    def audit_note(self) -> str:
        return f"ConfirmRequired: waiting for the user to approve {self.sentence!r}"


class TooManyApprovals(ToolError):
    """The agent already has as many proposed writes waiting for its user's decision as
    it may: no new approval is asked until the user decides one, or one expires."""

    def __init__(self, waiting: int) -> None:
        self.waiting = waiting
        super().__init__(
            f"{waiting} approvals of this agent are waiting for the user's decision, the "
            "most there may be: wait for the user to decide one (or for one to expire) "
            "before proposing another write"
        )


class ApprovalInvalid(ToolError):
    """The approval given does not allow this call; ``reason`` says why.

    Redeeming: ``unknown`` (no such approval of this user's), ``pending``,
    ``declined``, ``expired``, ``used``, or a mismatch: ``tool``, ``args``, ``actor``,
    ``sentence``. Deciding: ``unknown``, ``expired``, ``decided``.
    """

    _MESSAGES = {
        "unknown": "no such approval",
        "pending": "the user has not decided yet",
        "declined": "the user declined this call",
        "expired": "the approval expired before it was used",
        "used": "the approval was already used; each approval runs its call once",
        "tool": "the approval is for another tool",
        "args": "the args differ from the ones the user approved",
        "actor": "the approval is for another agent",
        "sentence": "the tool's confirm sentence changed since the user approved",
        "decided": "the approval was already decided",
    }

    def __init__(self, approval_id: str, reason: str) -> None:
        self.approval_id = approval_id
        self.reason = reason
        detail = self._MESSAGES[reason]
        super().__init__(f"approval invalid ({reason}): {detail}")
