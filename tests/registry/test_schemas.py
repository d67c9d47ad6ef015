"""Schemas for every provider, checked against each provider's published constraints.

The registries come from declarations generate accepts, so these tests also
check the rules' promise (generate/rules.py): a registry that passes them renders
validly for every provider at once.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import re
from typing import Any

import jsonschema
import mcp_types
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rastrillo.generate.read import read_tool
from rastrillo.registry.declare import Access, Arg, ToolDef, ToolRead, ToolWrite, tool_id
from rastrillo.registry.validate import Invalid, accept
from rastrillo.tools import FORMATS, schemas, schemas_json
from tests.registry import strategies

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
GEMINI_SCHEMA_KEYS = {
    "type",
    "description",
    "properties",
    "required",
    "enum",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
}
# OpenAI strict mode's supported keywords for the types we use (its structured-outputs
# guide, "Supported properties"): no minLength or maxLength.
OPENAI_STRICT_KEYS = {"type", "description", "enum", "minimum", "maximum", "pattern"}
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}
GEMINI_TYPES = {"string", "number", "integer", "boolean", "array", "object"}


def name_of(schema: dict[str, Any]) -> str:
    return schema.get("function", schema)["name"]


def walk(schema: dict[str, Any]):
    """Every (sub)schema of a JSON schema made of objects and strings."""
    yield schema
    for sub in schema.get("properties", {}).values():
        yield from walk(sub)


@functools.cache
def adapter(kind: Any) -> pydantic.TypeAdapter[Any]:
    """A provider SDK's type as pydantic checks it; building one costs milliseconds, and
    the property test below checks hundreds of schemas against the same few types."""
    return pydantic.TypeAdapter(kind)


@functools.cache
def check_schema(text: str) -> None:
    """That a schema (as sorted JSON) is JSON Schema 2020-12: each tool's input schema is
    rendered alike for three formats, and the meta-schema check is the property test's
    largest cost, so each distinct schema is checked once."""
    jsonschema.Draft202012Validator.check_schema(json.loads(text))


def check_input_schema(schema: dict[str, Any], defn: ToolDef, *, strict: bool = False) -> None:
    """JSON Schema 2020-12 with the provider's keys; and it accepts what dispatch accepts."""
    check_schema(json.dumps(schema, sort_keys=True))
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert list(schema["properties"]) == sorted(defn.args)
    required = [n for n, a in defn.args.items() if a.required or strict]
    assert schema.get("required", []) == required
    assert all(ANTHROPIC_KEY.fullmatch(key) for key in schema["properties"])
    for name, arg in defn.args.items():
        prop = schema["properties"][name]
        assert "default" not in prop and prop["description"].startswith(arg.description)
        nullable = strict and not arg.required
        json_type = JSON_TYPES[arg.type]
        assert prop["type"] == ([json_type, "null"] if nullable else json_type)
        if strict:
            assert set(prop) <= OPENAI_STRICT_KEYS
        if "enum" in prop:
            assert prop["enum"] == [*(arg.choices or ()), *([None] if nullable else [])]
    validator = jsonschema.Draft202012Validator(schema)
    assert not validator.is_valid({"confirmed": True})
    if strict:
        from openai.lib._pydantic import _ensure_strict_json_schema

        # What OpenAI's own SDK makes of a schema for strict mode changes nothing here.
        strict_form = _ensure_strict_json_schema(copy.deepcopy(schema), path=(), root={})
        if not schema["properties"]:
            assert strict_form.pop("required") == []  # our schema leaves it out for no args
        assert strict_form == schema


def check_values(schema: dict[str, Any], defn: ToolDef, values: dict[str, Any]) -> None:
    """A value dispatch accepts is valid for the schema; one the schema allows, dispatch takes.

    (Except what only the description says, `2.0` for an integer, which JSON
    Schema allows and dispatch refuses: no silent coercion, and text holding a control
    or bidirectional character, which no schema keyword says and dispatch refuses.)
    """
    for name, value in values.items():
        arg = defn.args[name]
        try:
            accept(arg, value)
        except Invalid:
            accepted = False
        else:
            accepted = True
        sub = jsonschema.Draft202012Validator(schema["properties"][name])
        if accepted:
            assert sub.is_valid(value), (name, value)
        elif sub.is_valid(value) and value is not None:
            coerced = arg.type is int and isinstance(value, float)
            unsafe = isinstance(value, str) and not strategies.plain_text(value)
            assert coerced or unsafe, (name, value)


def check_description(description: str, defn: ToolDef) -> None:
    assert description.strip() and len(description) <= 1024
    assert description.endswith(WRITE_SUFFIX) == (defn.access is Access.WRITE)


# Each check imports its provider's SDK itself: together the SDKs take seconds to import,
# and every pytest worker imports this module to collect it, most never running it.


def check_anthropic(schema: dict[str, Any], defn: ToolDef) -> None:
    from anthropic.types import ToolParam

    adapter(ToolParam).validate_python(schema)
    assert set(schema) == {"name", "description", "input_schema"}
    assert ANTHROPIC_NAME.fullmatch(schema["name"])
    check_description(schema["description"], defn)
    check_input_schema(schema["input_schema"], defn)


def check_openai(schema: dict[str, Any], defn: ToolDef) -> None:
    from openai.types.chat import ChatCompletionFunctionToolParam

    adapter(ChatCompletionFunctionToolParam).validate_python(schema)
    assert set(schema) == {"type", "function"} and schema["type"] == "function"
    function = schema["function"]
    assert set(function) == {"name", "description", "parameters", "strict"}
    assert OPENAI_NAME.fullmatch(function["name"]) and function["strict"] is True
    check_description(function["description"], defn)
    check_input_schema(function["parameters"], defn, strict=True)


def check_openai_responses(schema: dict[str, Any], defn: ToolDef) -> None:
    from openai.types.responses import FunctionToolParam

    adapter(FunctionToolParam).validate_python(schema)
    assert set(schema) == {"type", "name", "description", "parameters", "strict"}
    assert schema["type"] == "function" and schema["strict"] is True
    assert OPENAI_NAME.fullmatch(schema["name"])
    check_description(schema["description"], defn)
    check_input_schema(schema["parameters"], defn, strict=True)


def check_gemini(schema: dict[str, Any], defn: ToolDef) -> None:
    from google.genai import types as genai

    declaration = genai.FunctionDeclaration.model_validate(schema)  # unknown fields refused
    dumped = declaration.model_dump(by_alias=True, exclude_none=True, mode="json")
    for sub in walk(dumped["parameters"]) if "parameters" in dumped else ():
        sub["type"] = sub["type"].lower()  # the SDK's enum spells the types in capitals
    assert dumped == schema  # nothing dropped or renamed on the way through the SDK's model
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
        assert all(isinstance(choice, str) for choice in sub.get("enum", []))
    assert all(VERTEX_KEY.fullmatch(key) for key in parameters["properties"])
    assert parameters.get("required", []) == [n for n, a in defn.args.items() if a.required]


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
# Built once, not inside each draw (hypothesis would work each out again per example).
descriptions = words.filter(str.strip)


@st.composite
def declarations(draw: st.DrawFn) -> tuple[str, str, str]:
    """An action's TOOL as source text: plain descriptions and `rastrillo.Arg(...)` mixed."""
    method = draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]))
    access = "ToolRead" if method == "GET" else "ToolWrite"
    params = draw(st.lists(arg_names, max_size=3, unique=True))
    parts = draw(st.lists(segments, min_size=1, max_size=4))
    path = "/" + "/".join(parts + ["{" + p + "}" for p in params])
    names = params + draw(st.lists(arg_names, max_size=4))
    declared: dict[str, Arg | str] = {}
    for name in dict.fromkeys(names):
        if draw(st.booleans()):
            declared[name] = draw(words)
        elif name in params:
            declared[name] = draw(strategies.PATH_ARGS)
        else:
            declared[name] = draw(strategies.args())
    description = draw(descriptions)
    placeable = sorted(n for n, a in declared.items() if isinstance(a, str) or a.required)
    used = draw(st.lists(st.sampled_from(placeable), max_size=3)) if placeable else []
    confirm = "Really? " + " ".join("{" + n + "}" for n in used)
    entries = ", ".join(
        f"{name!r}: {arg!r}" if isinstance(arg, str) else f"{name!r}: rastrillo.{arg!r}"
        for name, arg in declared.items()
    )
    code = (
        "import rastrillo\n"
        "TOOL = rastrillo.Tool(\n"
        f"    description={description!r},\n"
        f"    access=rastrillo.{access},\n"
        f"    args={{{entries}}},\n"
        f"    confirm={confirm!r},\n"
        ")\n"
    )
    return code, method, path


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(declarations(), max_size=5), st.data())
def test_any_registry_generate_accepts_is_valid_for_every_provider(
    declared: list[tuple[str, str, str]], data: st.DataObject
) -> None:
    defs = []
    for code, method, path in declared:
        if len(tool_id(method, path)) > 64:
            continue
        defn, problems = read_tool(ast.parse(code), "actions/x.py", method, path)
        assert problems == [] and defn is not None, problems
        defs.append(defn)
    for fmt in FORMATS:
        rendered = schemas(defs, fmt)
        assert json.loads(schemas_json(defs, fmt)) == rendered
        for schema, defn in zip(rendered, defs, strict=True):
            CHECKS[fmt](schema, defn)
    for defn, schema in zip(defs, schemas(defs, "mcp"), strict=True):
        values = {
            name: data.draw(strategies.values_for(arg) | strategies.JSON_VALUES)
            for name, arg in defn.args.items()
        }
        check_values(schema["inputSchema"], defn, values)
