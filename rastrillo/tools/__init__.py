"""Agent-callable tools: the registry's schemas for each provider, the consent sentence,
and dispatch of a model's call through the app, with consent and audit.

Every public name is imported on first use (PEP 562), as the top-level `rastrillo` does:
an app imports `rastrillo.tools.audit` and `consent` at start, and its first page must not
pay for dispatch (`rastrillo.tools.calls`, with anyio's streams) that only a tool call runs.
"""

from __future__ import annotations

from rastrillo.lazy import on_first_use

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rastrillo.context import ToolCallMarker
    from rastrillo.registry.confirm import confirm_sentence
    from rastrillo.registry.errors import (
        ApprovalInvalid,
        BadActor,
        BadArg,
        ConfirmRequired,
        MissingArg,
        ToolError,
        TooManyApprovals,
        UnknownArg,
        UnknownTool,
    )
    from rastrillo.registry.schemas import FORMATS, schemas, schemas_json
    from rastrillo.tools.calls import Call, Result, dispatch, dispatch_sync

__all__ = [
    "FORMATS",
    "ApprovalInvalid",
    "BadActor",
    "BadArg",
    "Call",
    "ConfirmRequired",
    "MissingArg",
    "Result",
    "TooManyApprovals",
    "ToolCallMarker",
    "ToolError",
    "UnknownArg",
    "UnknownTool",
    "confirm_sentence",
    "dispatch",
    "dispatch_sync",
    "schemas",
    "schemas_json",
]

_REGISTRY_ERRORS = "rastrillo.registry.errors"
_CALLS = "rastrillo.tools.calls"
_LAZY = {
    "FORMATS": "rastrillo.registry.schemas",
    "ApprovalInvalid": _REGISTRY_ERRORS,
    "BadActor": _REGISTRY_ERRORS,
    "BadArg": _REGISTRY_ERRORS,
    "Call": _CALLS,
    "ConfirmRequired": _REGISTRY_ERRORS,
    "MissingArg": _REGISTRY_ERRORS,
    "Result": _CALLS,
    "TooManyApprovals": _REGISTRY_ERRORS,
    "ToolCallMarker": "rastrillo.context",  # where it is defined: calls.py loads at the first call
    "ToolError": _REGISTRY_ERRORS,
    "UnknownArg": _REGISTRY_ERRORS,
    "UnknownTool": _REGISTRY_ERRORS,
    "confirm_sentence": "rastrillo.registry.confirm",
    "dispatch": _CALLS,
    "dispatch_sync": _CALLS,
    "schemas": "rastrillo.registry.schemas",
    "schemas_json": "rastrillo.registry.schemas",
}


__getattr__, __dir__ = on_first_use(globals(), _LAZY)
