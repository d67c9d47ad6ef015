"""Render the tool registry in each model provider's tool format.

Each arg is a JSON `string`, `integer`, `number` or `boolean` with its choices
as `enum` and its bounds as `minimum`, `maximum`, `minLength`, `maxLength` and
`pattern` where the provider's schema subset has the keyword; a constraint it
lacks is written into the arg's description instead (dispatch enforces every
constraint all the same). No key beyond the declared args is accepted. An
optional arg is left out of `required`, except in OpenAI's strict formats,
where every property is required and an optional one may be `null`. The rules
generate enforces keep names, keys and descriptions inside every provider's
limits, so one registry renders for all. Each call builds fresh dicts:
callers may change the result freely.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from rastrillo.collector import collector_paused
from rastrillo.registry.declare import (
    WRITE_SUFFIX,
    Arg,
    ArgMap,
    ToolDef,
    ToolWrite,
    description_as_sent,
)
from rastrillo.registry.validate import phrases

__all__ = ["FORMATS", "WRITE_SUFFIX", "schemas", "schemas_json"]

Schema = dict[str, Any]


_JSON_TYPE = {str: "string", int: "integer", float: "number", bool: "boolean"}
_KEYWORDS = {
    "minimum": "minimum",
    "maximum": "maximum",
    "min_length": "minLength",
    "max_length": "maxLength",
    "pattern": "pattern",
}
_ALL = frozenset(["choices", *_KEYWORDS])
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def _openai_native(arg: Arg) -> frozenset[str]:
    """Strict mode's subset: no string lengths, and a `pattern` without lookaround."""
    native = {"choices", "minimum", "maximum"}
    if arg.pattern is not None and not any(t in arg.pattern for t in _LOOKAROUND):
        native.add("pattern")
    return frozenset(native)


def _gemini_native(arg: Arg) -> frozenset[str]:
    """Gemini's OpenAPI subset: every bound, but an `enum` of strings only."""
    return _ALL if arg.type is str else _ALL - {"choices"}


def _everything(arg: Arg) -> frozenset[str]:
    return _ALL


class _Way:
    """How a format renders an arg: the constraints it carries as keywords (the rest go into
    words), and whether an optional arg is written as nullable.

    Also the key of that rendering in the arg's `rendered` (compared by identity).
    """

    __slots__ = ("native", "nullable")

    def __init__(self, native: Callable[[Arg], frozenset[str]], *, nullable: bool) -> None:
        self.native = native
        self.nullable = nullable


_JSON_SCHEMA = _Way(_everything, nullable=False)
_OPENAI_STRICT = _Way(_openai_native, nullable=True)
_GEMINI = _Way(_gemini_native, nullable=False)


def _render(arg: Arg, way: _Way) -> Schema:
    nullable = way.nullable and not arg.required
    json_type = _JSON_TYPE[arg.type]
    prop: Schema = {
        "type": [json_type, "null"] if nullable else json_type,
        "description": arg.description,
    }
    if not arg.constraints:
        return prop
    kinds = way.native(arg)
    described = []
    for field_name, value in arg.constraints:
        if field_name not in kinds:
            described.append(field_name)
        elif field_name == "choices":
            choices: list[object] = list(arg.choices or ())
            prop["enum"] = [*choices, None] if nullable else choices
        else:
            prop[_KEYWORDS[field_name]] = value
    if described:
        words = "; ".join(phrases(arg, described))
        prop["description"] = f"{arg.description} ({words})" if arg.description else words
    if way is _GEMINI and "enum" in prop:
        prop = {"type": prop.pop("type"), "format": "enum", **prop}  # Gemini's enum form
    return prop


def _object_schema(args: ArgMap, way: _Way) -> tuple[Schema, list[str]]:
    """The schemas of `args` rendered `way`, by name, and the names of the required ones.

    Each arg's rendering is made once and kept on the arg (it is frozen), then copied
    out with the lists in it, so a registry renders on every model turn at the cost of
    the copies.
    """
    properties = {}
    required = []
    for name, arg in args.items():  # ArgMap iterates sorted
        template = arg.rendered.get(way)
        if template is None:
            template = arg.rendered[way] = _render(arg, way)
        properties[name] = prop = template.copy()
        if arg.required:
            required.append(name)
        elif way.nullable:
            prop["type"] = prop["type"].copy()
        if "enum" in prop:
            prop["enum"] = prop["enum"].copy()
    return properties, required


def _input_schema(defn: ToolDef) -> Schema:
    """JSON Schema for the args: optional args left out of `required`, nothing else allowed."""
    properties, required = _object_schema(defn.args, _JSON_SCHEMA)
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _strict_schema(defn: ToolDef) -> Schema:
    """OpenAI strict mode: every property required, an optional one nullable."""
    properties, _ = _object_schema(defn.args, _OPENAI_STRICT)
    schema: Schema = {"type": "object", "properties": properties}
    if properties:
        schema["required"] = list(properties)
    schema["additionalProperties"] = False
    return schema


def _anthropic(defn: ToolDef) -> Schema:
    return {
        "name": defn.id,
        "description": description_as_sent(defn.description, defn.access),
        "input_schema": _input_schema(defn),
    }


def _openai(defn: ToolDef) -> Schema:
    return {
        "type": "function",
        "function": {
            "name": defn.id,
            "description": description_as_sent(defn.description, defn.access),
            "parameters": _strict_schema(defn),
            "strict": True,
        },
    }


def _openai_responses(defn: ToolDef) -> Schema:
    return {
        "type": "function",
        "name": defn.id,
        "description": description_as_sent(defn.description, defn.access),
        "parameters": _strict_schema(defn),
        "strict": True,
    }


def _gemini(defn: ToolDef) -> Schema:
    """A function declaration in Gemini's OpenAPI 3.0 subset.

    Gemini refuses `additionalProperties` (unknown field) and an object schema
    with no properties, so a tool without args has no `parameters` at all. Its
    `enum` holds strings only, with `format: enum`; other choices are written
    into the description.
    """
    declaration: Schema = {
        "name": defn.id,
        "description": description_as_sent(defn.description, defn.access),
    }
    properties, required = _object_schema(defn.args, _GEMINI)
    if properties:
        parameters: Schema = {"type": "object", "properties": properties}
        if required:
            parameters["required"] = required
        declaration["parameters"] = parameters
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
    hints = _WRITE_HINTS if defn.access is ToolWrite else _READ_HINTS  # as description_as_sent
    return {
        "name": defn.id,
        "description": description_as_sent(defn.description, defn.access),
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
    """One tool schema per def, in registry order, in the given provider's format.

    The collector is paused while the list is built: its thousands of dicts hold no cycle
    and live until it is returned, and would otherwise set off collections that walk the
    whole process heap, as much time as the rendering in a process not frozen after start-up.
    """
    try:
        render = _RENDERERS[format]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown tool schema format {format!r}; known formats: {', '.join(FORMATS)}"
        ) from None
    with collector_paused():
        return [render(defn) for defn in defs]


def schemas_json(defs: Iterable[ToolDef], format: str = "anthropic") -> str:
    """`schemas` as JSON text: 2-space indent, ASCII-only, `[]` for no tools."""
    return json.dumps(schemas(defs, format), indent=2)
