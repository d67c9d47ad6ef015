"""Agent-callable tools: the registry's schemas for each provider, the consent sentence,
and dispatch of a model's call through the app, with consent and audit."""

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
from rastrillo.tools.dispatch import Call, Result, ToolCallMarker, dispatch, dispatch_sync

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
