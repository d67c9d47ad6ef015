"""Schemas for every provider, checked against each provider's published constraints.

The registries come from declarations generate accepts, so these tests also
check the contract's claim: a registry that passes the rules renders validly
for every provider at once.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import jsonschema
import mcp_types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rastrillo.generate.read import read_tool
from rastrillo.registry.declare import Access, ToolDef, ToolRead, ToolWrite, tool_id
from rastrillo.tools import FORMATS, schemas, schemas_json

CANCEL = ToolDef(
    id="orders_id_cancel_post",
    method="POST",
    path="/orders/{id}/cancel",
    description="Cancel one order and release its tickets.",
    access=ToolWrite,
    args={"reason": "why it is cancelled", "id": "the order id"},
    confirm="Cancel order {id}? Its tickets go back on sale.",
    source="actions/orders/[id]/cancel.POST.py",
)
EVENTS = ToolDef(
    id="events_get",
    method="GET",
    path="/events",
    description="List upcoming events.",
    source="actions/events.GET.py",
)
REGISTRY = [EVENTS, CANCEL]

WRITE_SUFFIX = " (write: requires human confirmation)"
CANCEL_INPUT = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "the order id"},
        "reason": {"type": "string", "description": "why it is cancelled"},
    },
    "required": ["id", "reason"],
    "additionalProperties": False,
}
EVENTS_INPUT = {"type": "object", "properties": {}, "additionalProperties": False}


# --- the exact shape of each format ----------------------------------------------


def test_formats() -> None:
    assert FORMATS == ("anthropic", "openai", "openai-responses", "gemini", "mcp")


def test_anthropic_is_the_default() -> None:
    assert (
        schemas(REGISTRY)
        == schemas(REGISTRY, "anthropic")
        == [
            {
                "name": "events_get",
                "description": "List upcoming events.",
                "input_schema": EVENTS_INPUT,
            },
            {
                "name": "orders_id_cancel_post",
                "description": "Cancel one order and release its tickets." + WRITE_SUFFIX,
                "input_schema": CANCEL_INPUT,
            },
        ]
    )


def test_openai_chat_completions() -> None:
    assert schemas([CANCEL], "openai") == [
        {
            "type": "function",
            "function": {
                "name": "orders_id_cancel_post",
                "description": "Cancel one order and release its tickets." + WRITE_SUFFIX,
                "parameters": CANCEL_INPUT,
                "strict": True,
            },
        }
    ]


def test_openai_responses() -> None:
    assert schemas([EVENTS], "openai-responses") == [
        {
            "type": "function",
            "name": "events_get",
            "description": "List upcoming events.",
            "parameters": EVENTS_INPUT,
            "strict": True,
        }
    ]


def test_gemini() -> None:
    assert schemas(REGISTRY, "gemini") == [
        {"name": "events_get", "description": "List upcoming events."},
        {
            "name": "orders_id_cancel_post",
            "description": "Cancel one order and release its tickets." + WRITE_SUFFIX,
            "parameters": {
                "type": "object",
                "properties": CANCEL_INPUT["properties"],
                "required": ["id", "reason"],
            },
        },
    ]


def test_mcp_annotations_come_from_the_access() -> None:
    read, write = schemas(REGISTRY, "mcp")
    assert read == {
        "name": "events_get",
        "description": "List upcoming events.",
        "inputSchema": EVENTS_INPUT,
        "annotations": {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    }
    assert write["inputSchema"] == CANCEL_INPUT
    assert write["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    }


def test_registry_order_is_kept() -> None:
    for fmt in FORMATS:
        assert [name_of(s) for s in schemas([CANCEL, EVENTS], fmt)] == [CANCEL.id, EVENTS.id]


def test_unknown_format() -> None:
    for bad in ("claude", "OpenAI", "", None, ["mcp"]):
        with pytest.raises(ValueError, match="anthropic, openai, openai-responses, gemini, mcp"):
            schemas(REGISTRY, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'claude'"):
        schemas_json([], "claude")


def test_json() -> None:
    assert schemas_json([]) == "[]"
    for fmt in FORMATS:
        assert schemas_json([], fmt) == "[]"
        text = schemas_json(REGISTRY, fmt)
        assert json.loads(text) == schemas(REGISTRY, fmt)
        assert text == schemas_json(REGISTRY, fmt)
        assert text.isascii()
    assert schemas_json([EVENTS]).splitlines()[:3] == ["[", "  {", '    "name": "events_get",']


def test_results_are_fresh_each_call() -> None:
    for fmt in FORMATS:
        first = schemas(REGISTRY, fmt)
        first[1].clear()
        assert schemas(REGISTRY, fmt)[1] != {}
    anthropic = schemas([CANCEL])
    anthropic[0]["input_schema"]["properties"]["id"]["type"] = "integer"
    assert schemas([CANCEL])[0]["input_schema"] == CANCEL_INPUT


# --- provider constraints, checked on any registry generate accepts ----------------

OPENAI_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
ANTHROPIC_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # the older, stricter form of {1,128}
ANTHROPIC_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
GEMINI_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")
VERTEX_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MCP_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
# The fields of Gemini's OpenAPI 3.0 Schema subset that we may use.
GEMINI_SCHEMA_KEYS = {"type", "description", "properties", "required", "enum", "format"}
GEMINI_TYPES = {"string", "number", "integer", "boolean", "array", "object"}


def name_of(schema: dict[str, Any]) -> str:
    return schema.get("function", schema)["name"]


def walk(schema: dict[str, Any]):
    """Every (sub)schema of a JSON schema made of objects and strings."""
    yield schema
    for sub in schema.get("properties", {}).values():
        yield from walk(sub)


def check_input_schema(schema: dict[str, Any], defn: ToolDef) -> None:
    """JSON Schema 2020-12, OpenAI strict mode, Anthropic keys; and it means what dispatch does."""
    jsonschema.Draft202012Validator.check_schema(schema)
    for sub in walk(schema):
        assert "default" not in sub
        if sub["type"] == "object":
            assert sub["additionalProperties"] is False
            assert sorted(sub.get("required", [])) == sorted(sub["properties"])
        else:
            assert sub["type"] == "string"
    assert list(schema["properties"]) == sorted(defn.args)
    assert schema.get("required", []) == sorted(defn.args)
    assert all(ANTHROPIC_KEY.fullmatch(key) for key in schema["properties"])
    validator = jsonschema.Draft202012Validator(schema)
    call = {name: "7" for name in defn.args}
    assert validator.is_valid(call)
    assert not validator.is_valid({**call, "confirmed": "true"})
    if defn.args:
        assert not validator.is_valid(dict(list(call.items())[1:]))
        assert not validator.is_valid({**call, next(iter(call)): 7})


def check_description(description: str, defn: ToolDef) -> None:
    assert description.strip() and len(description) <= 1024
    assert description.endswith(WRITE_SUFFIX) == (defn.access is Access.WRITE)


def check_anthropic(schema: dict[str, Any], defn: ToolDef) -> None:
    assert set(schema) == {"name", "description", "input_schema"}
    assert ANTHROPIC_NAME.fullmatch(schema["name"])
    check_description(schema["description"], defn)
    check_input_schema(schema["input_schema"], defn)


def check_openai(schema: dict[str, Any], defn: ToolDef) -> None:
    assert set(schema) == {"type", "function"} and schema["type"] == "function"
    function = schema["function"]
    assert set(function) == {"name", "description", "parameters", "strict"}
    assert OPENAI_NAME.fullmatch(function["name"]) and function["strict"] is True
    check_description(function["description"], defn)
    check_input_schema(function["parameters"], defn)


def check_openai_responses(schema: dict[str, Any], defn: ToolDef) -> None:
    assert set(schema) == {"type", "name", "description", "parameters", "strict"}
    assert schema["type"] == "function" and schema["strict"] is True
    assert OPENAI_NAME.fullmatch(schema["name"])
    check_description(schema["description"], defn)
    check_input_schema(schema["parameters"], defn)


def check_gemini(schema: dict[str, Any], defn: ToolDef) -> None:
    assert set(schema) <= {"name", "description", "parameters"}
    assert GEMINI_NAME.fullmatch(schema["name"])
    check_description(schema["description"], defn)
    if not defn.args:
        assert "parameters" not in schema  # Gemini: an OBJECT's properties must be non-empty
        return
    parameters = schema["parameters"]
    assert parameters["type"] == "object" and parameters["properties"]
    for sub in walk(parameters):
        assert set(sub) <= GEMINI_SCHEMA_KEYS and sub["type"] in GEMINI_TYPES
    assert all(VERTEX_KEY.fullmatch(key) for key in parameters["properties"])
    assert parameters["required"] == sorted(defn.args)


def check_mcp(schema: dict[str, Any], defn: ToolDef) -> None:
    tool = mcp_types.Tool.model_validate(schema)
    # Nothing dropped or renamed on the way through the SDK's model.
    assert tool.model_dump(by_alias=True, exclude_none=True, mode="json") == schema
    assert MCP_NAME.fullmatch(tool.name)
    assert tool.input_schema["type"] == "object"
    check_description(schema["description"], defn)
    check_input_schema(schema["inputSchema"], defn)
    hints = tool.annotations
    assert hints is not None
    assert hints.read_only_hint is (defn.access is ToolRead)
    assert hints.destructive_hint is (defn.access is ToolWrite)
    assert hints.open_world_hint is False


CHECKS = {
    "anthropic": check_anthropic,
    "openai": check_openai,
    "openai-responses": check_openai_responses,
    "gemini": check_gemini,
    "mcp": check_mcp,
}


def test_every_format_is_checked() -> None:
    assert tuple(CHECKS) == FORMATS


@pytest.mark.parametrize("fmt", FORMATS)
def test_sample_registry_meets_each_provider(fmt: str) -> None:
    for schema, defn in zip(schemas(REGISTRY, fmt), REGISTRY, strict=True):
        CHECKS[fmt](schema, defn)


# A declaration generate accepts, written as an action file would write it.
segments = st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True)
arg_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,63}", fullmatch=True)
words = st.text(st.characters(codec="utf-8"), max_size=40)


@st.composite
def declarations(draw: st.DrawFn) -> tuple[str, str, str]:
    method = draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]))
    access = "ToolRead" if method == "GET" else "ToolWrite"
    params = draw(st.lists(arg_names, max_size=3, unique=True))
    parts = draw(st.lists(segments, min_size=1, max_size=4))
    path = "/" + "/".join(parts + ["{" + p + "}" for p in params])
    names = params + draw(st.lists(arg_names, max_size=4))
    args = {name: draw(words) for name in dict.fromkeys(names)}
    description = draw(words.filter(str.strip))
    used = draw(st.lists(st.sampled_from(sorted(args)), max_size=3)) if args else []
    confirm = "Really? " + " ".join("{" + n + "}" for n in used)
    code = (
        "import rastrillo\n"
        "TOOL = rastrillo.Tool(\n"
        f"    description={description!r},\n"
        f"    access=rastrillo.{access},\n"
        f"    args={args!r},\n"
        f"    confirm={confirm!r},\n"
        ")\n"
    )
    return code, method, path


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(declarations(), max_size=5))
def test_any_registry_generate_accepts_is_valid_for_every_provider(
    declared: list[tuple[str, str, str]],
) -> None:
    defs = []
    for code, method, path in declared:
        if len(tool_id(method, path)) > 64:
            continue
        defn, problems = read_tool(ast.parse(code), "actions/x.py", method, path)
        assert problems == [] and defn is not None
        defs.append(defn)
    for fmt in FORMATS:
        rendered = schemas(defs, fmt)
        assert json.loads(schemas_json(defs, fmt)) == rendered
        for schema, defn in zip(rendered, defs, strict=True):
            CHECKS[fmt](schema, defn)
