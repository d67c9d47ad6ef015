"""JSON numbers and texts over ``/mcp`` reach dispatch as the model wrote them, and are
held to the arg's declared type there (docs/agents.md, "Dispatch: JSON values, no
coercion"); a text's length is its code points, there as from a form.

The SDK parses a request with its own JSON parser (jiter), not Python's ``json``: it reads
``NaN`` and ``Infinity``, keeps ``2.0`` a float, and reads integers of up to 4,300 digits.
Whatever it makes of a number, dispatch takes only what a browser's form could also send.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rastrillo.agents import grants
from rastrillo.testing import TestApp
from rastrillo.tools import audit
from tests.support import write_app

ECHO = """
import rastrillo

TOOL = rastrillo.Tool(description="Echo the typed args.", args={
    "n": rastrillo.Arg("an integer", type=int, required=False),
    "f": rastrillo.Arg("a number", type=float, required=False),
    "s": rastrillo.Arg("a text", required=False, max_length=4),
})


def handle(ctx):
    return ctx.json({k: [repr(v), type(v).__name__] for k, v in ctx.args.items() if v is not None})
"""


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestApp, dict[str, str]]]:
    root: Path = tmp_path_factory.mktemp("numbers")
    app_dir = write_app(root / "app", {"echo.GET.py": ECHO}, extra="mcp=True,")
    with TestApp(app_dir, root) as t:
        _, token, _ = grants.personal_token(t.db, user_id="3", agent="claude")
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
            "Content-Type": "application/json",
        }
        yield t, headers


def short(value: object) -> str:
    """A test id: the JSON text, a long number cut to its length in characters."""
    text = str(value)
    return text if len(text) <= 30 else f"{text[:12]}…({len(text)} chars)"


def call(echo: tuple[TestApp, dict[str, str]], arguments: str) -> dict[str, object]:
    """One ``tools/call`` of ``echo_get`` whose arguments are the JSON text given."""
    t, headers = echo
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        '"params":{"name":"echo_get","arguments":' + arguments + "}}"
    )
    answer = t.client.post("/mcp", content=body.encode(), headers=headers)
    assert answer.status_code == 200, answer.text
    result: dict[str, object] = answer.json()["result"]
    return result


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ('{"n": 2.0}', "must be an integer, not the number 2.0"),
        ('{"n": 1e0}', "must be an integer, not the number 1.0"),
        ('{"n": "2"}', "must be an integer, not the string '2'"),
        ('{"n": true}', "must be an integer, not true"),
        ('{"n": -0.0}', "must be an integer, not the number -0.0"),
        ('{"f": NaN}', "must be a number, not the number nan"),
        ('{"f": Infinity}', "must be a number, not the number inf"),
        ('{"f": 1e400}', "must be a number, not the number inf"),
        # What jiter still reads, past what a form's integer text may hold (4,000 digits).
        ('{"n": ' + "9" * 4001 + "}", "must be an integer, not a very long number"),
        ('{"n": -' + "9" * 4300 + "}", "must be an integer, not a very long number"),
    ],
    ids=short,
)
def test_a_number_not_of_the_args_type_is_refused_over_mcp(
    echo: tuple[TestApp, dict[str, str]], arguments: str, refusal: str
) -> None:
    result = call(echo, arguments)
    assert result["isError"] is True
    [content] = result["content"]  # type: ignore[misc]
    assert content["text"].endswith(refusal), content["text"]


@pytest.mark.parametrize(
    ("arguments", "seen"),
    [
        ('{"n": 2}', {"n": ["2", "int"]}),
        ('{"n": -0}', {"n": ["0", "int"]}),
        ('{"n": ' + "9" * 4000 + "}", {"n": ["9" * 4000, "int"]}),
        ('{"f": 2}', {"f": ["2.0", "float"]}),
        ('{"f": -0.0}', {"f": ["-0.0", "float"]}),
        ('{"f": 1E2}', {"f": ["100.0", "float"]}),
        ('{"n": null, "f": null}', {}),
        # A repeated key is read once, its last value, by the server: the value the
        # approval page would show is the one that runs.
        ('{"n": 10, "n": 3}', {"n": ["3", "int"]}),
    ],
    ids=short,
)
def test_a_number_of_the_args_type_reaches_the_handler_as_that_value(
    echo: tuple[TestApp, dict[str, str]], arguments: str, seen: dict[str, list[str]]
) -> None:
    result = call(echo, arguments)
    assert result["isError"] is False, result
    assert result["structuredContent"] == seen


FOUR = "\U0001f600" * 4
"""Four code points, eight UTF-16 units (JavaScript's ``length``)."""


@pytest.mark.parametrize(
    ("text", "taken"),
    [
        (FOUR, True),
        (FOUR + "a", False),
        ("e\u0301" * 2, True),  # two letters, four code points: each accent counts
        ("e\u0301" * 2 + "e", False),
    ],
    ids=["4-emoji", "5", "2-accented", "5-code-points"],
)
def test_a_strings_length_is_its_code_points_over_mcp_and_from_a_form(
    echo: tuple[TestApp, dict[str, str]], text: str, taken: bool
) -> None:
    """``max_length`` counts characters as JSON Schema does, code points (docs/agents.md,
    "Typed args"): an emoji is one, not JavaScript's two UTF-16 units, and a letter
    written with a combining accent is two. A call over ``/mcp``, its text as raw UTF-8
    or as JSON's surrogate-pair escapes, and a browser's form get the same answer."""
    t, _ = echo
    for arguments in (
        json.dumps({"s": text}, ensure_ascii=False),
        json.dumps({"s": text}),  # \ud83d\ude00 …
    ):
        result = call(echo, arguments)
        assert result["isError"] is not taken, result
        if taken:
            assert result["structuredContent"] == {"s": [repr(text), "str"]}
    from_form = t.client.get("/echo", params={"s": text})
    assert (from_form.status_code == 200) is taken, from_form.text


def test_a_lone_surrogate_is_refused_before_any_tool_runs(
    echo: tuple[TestApp, dict[str, str]],
) -> None:
    """Half of a surrogate pair is no character and cannot be written as UTF-8 (to a form
    body, an audit row): the SDK's JSON parser refuses the request whole, a JSON-RPC parse
    error, and no tool runs or is recorded."""
    t, headers = echo
    audit.flush(t.db)
    before = audit.latest(t.db, limit=1)
    for half in ("\\ud83d", "\\ude00", "\\ud83d\\u0041"):
        body = (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
            '"params":{"name":"echo_get","arguments":{"s":"' + half + '"}}}'
        )
        answer = t.client.post("/mcp", content=body.encode(), headers=headers)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == -32700
    assert audit.latest(t.db, limit=1) == before  # no row since
