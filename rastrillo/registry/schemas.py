"""Render the tool registry in each model provider's tool format.

Every arg is a required string and no other key is accepted, which is at once
what the HTTP form layer carries and what OpenAI's strict mode demands; the
rules generate enforces (section 3 of the contract) keep names, keys and
descriptions inside every provider's limits, so one registry renders for all.
Each call builds fresh dicts: callers may change the result freely.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from rastrillo.registry.declare import Access, ToolDef

__all__ = ["FORMATS", "WRITE_SUFFIX", "schemas", "schemas_json"]

WRITE_SUFFIX = " (write: requires human confirmation)"
"""Appended to a write tool's description, so the model knows the call may pause."""

Schema = dict[str, Any]


def _description(defn: ToolDef) -> str:
    return defn.description + WRITE_SUFFIX if defn.access is Access.WRITE else defn.description


def _properties(defn: ToolDef) -> Schema:
    return {name: {"type": "string", "description": text} for name, text in defn.args.items()}


def _input_schema(defn: ToolDef) -> Schema:
    """JSON Schema for the args, valid in OpenAI strict mode: all required, nothing else."""
    schema: Schema = {"type": "object", "properties": _properties(defn)}
    if defn.args:
        schema["required"] = list(defn.args)  # ArgMap iterates sorted
    schema["additionalProperties"] = False
    return schema


def _anthropic(defn: ToolDef) -> Schema:
    return {"name": defn.id, "description": _description(defn), "input_schema": _input_schema(defn)}


def _openai(defn: ToolDef) -> Schema:
    return {
        "type": "function",
        "function": {
            "name": defn.id,
            "description": _description(defn),
            "parameters": _input_schema(defn),
            "strict": True,
        },
    }


def _openai_responses(defn: ToolDef) -> Schema:
    return {
        "type": "function",
        "name": defn.id,
        "description": _description(defn),
        "parameters": _input_schema(defn),
        "strict": True,
    }


def _gemini(defn: ToolDef) -> Schema:
    """A function declaration in Gemini's OpenAPI 3.0 subset.

    Gemini refuses `additionalProperties` (unknown field) and an object schema
    with no properties, so a tool without args has no `parameters` at all.
    """
    declaration: Schema = {"name": defn.id, "description": _description(defn)}
    if defn.args:
        declaration["parameters"] = {
            "type": "object",
            "properties": _properties(defn),
            "required": list(defn.args),
        }
    return declaration


_READ_HINTS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}
_WRITE_HINTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": False,
}


def _mcp(defn: ToolDef) -> Schema:
    """An MCP `Tool`, its annotations derived from the access, never set by hand.

    A write is marked destructive and not idempotent: the framework cannot tell
    an additive write from a destructive one, and MCP's own defaults are the
    cautious ones. Every tool acts on the app's own data, so none is open-world.
    """
    hints = _WRITE_HINTS if defn.access is Access.WRITE else _READ_HINTS
    return {
        "name": defn.id,
        "description": _description(defn),
        "inputSchema": _input_schema(defn),
        "annotations": dict(hints),
    }


_RENDERERS: dict[str, Callable[[ToolDef], Schema]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "openai-responses": _openai_responses,
    "gemini": _gemini,
    "mcp": _mcp,
}

FORMATS: tuple[str, ...] = tuple(_RENDERERS)
"""The format names `schemas` accepts, the default first."""


def schemas(defs: Iterable[ToolDef], format: str = "anthropic") -> list[Schema]:
    """One tool schema per def, in registry order, in the given provider's format."""
    try:
        render = _RENDERERS[format]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown tool schema format {format!r}; known formats: {', '.join(FORMATS)}"
        ) from None
    return [render(defn) for defn in defs]


def schemas_json(defs: Iterable[ToolDef], format: str = "anthropic") -> str:
    """`schemas` as JSON text: 2-space indent, ASCII-only, `[]` for no tools."""
    return json.dumps(schemas(defs, format), indent=2)
