"""confirm_sentence: one left-to-right pass, values inserted literally, never raises; and
confirm_parts, the same sentence in pieces with each value marked."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rastrillo.registry.confirm import confirm_parts, placeholders
from rastrillo.registry.declare import Tool, ToolDef, ToolWrite
from rastrillo.tools import confirm_sentence

DEFN = {"id": "x_post", "method": "POST", "path": "/x", "description": "x", "access": ToolWrite}


def sentence(template: str, args: dict[str, str]) -> str:
    return confirm_sentence(ToolDef(**DEFN, confirm=template), args)


@pytest.mark.parametrize(
    ("template", "args", "expected"),
    [
        ("Cancel order {id}?", {"id": "7"}, "Cancel order 7?"),
        ("Cancel order {id}?", {}, "Cancel order {id}?"),
        ("Move {a} to {b}, then {a} again", {"a": "x", "b": "y"}, "Move x to y, then x again"),
        ("{id}{id}", {"id": "1"}, "11"),
        (
            "Cancel {id} because {reason}",
            {"id": "{reason}", "reason": "{id}"},
            "Cancel {reason} because {id}",
        ),
        ("{id}", {"id": "\\1 \\g<0> $1 %s {}"}, "\\1 \\g<0> $1 %s {}"),
        (
            "{ id } {1} {a-b} {} {{id}}",
            {"id": "7", "1": "x", "a-b": "y"},
            "{ id } {1} {a-b} {} {7}",
        ),
        ("", {"id": "7"}, ""),
        ("Buy {n} tickets", {"n": "2", "extra": "ignored"}, "Buy 2 tickets"),
        ("Say {msg}", {"msg": "line one\nline two"}, "Say line one\nline two"),
    ],
)
def test_examples(template: str, args: dict[str, str], expected: str) -> None:
    assert sentence(template, args) == expected


def test_works_on_a_tool_declaration_too() -> None:
    tool = Tool(description="x", access=ToolWrite, args={"id": "i"}, confirm="Cancel {id}?")
    assert confirm_sentence(tool, {"id": "9"}) == "Cancel 9?"


def test_placeholders() -> None:
    assert placeholders("{a} {b_1} {a} {1x} {a-b} {_}") == ["a", "b_1", "a", "_"]


# A template is literal text and placeholders; the oracle renders each part on its own.
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
literal_text = st.text(st.characters(blacklist_characters="{}"))
parts = st.lists(st.tuples(st.just("text"), literal_text) | st.tuples(st.just("name"), names))
values = st.text()


@given(parts, st.dictionaries(names, values))
def test_single_pass_and_literal_values(
    template_parts: list[tuple[str, str]], args: dict[str, str]
) -> None:
    template = "".join(v if kind == "text" else "{" + v + "}" for kind, v in template_parts)
    expected = "".join(
        v if kind == "text" else args.get(v, "{" + v + "}") for kind, v in template_parts
    )
    assert sentence(template, args) == expected
    # In pieces, as the approval page shows it: the same text, and exactly the values put in.
    pieces = confirm_parts(ToolDef(**{**DEFN, "confirm": template}), args)
    assert "".join(text for text, _ in pieces) == expected
    put = [args[v] for kind, v in template_parts if kind == "name" and args.get(v)]
    assert [text for text, value in pieces if value] == put


@given(st.text(), st.dictionaries(st.text(), st.text()), st.randoms())
def test_never_raises_and_is_deterministic(
    template: str, args: dict[str, str], rnd: random.Random
) -> None:
    result = sentence(template, args)
    assert isinstance(result, str)
    items = list(args.items())
    rnd.shuffle(items)
    assert sentence(template, dict(items)) == result


@given(st.lists(names, min_size=1), st.dictionaries(names, names.map(lambda n: "{" + n + "}")))
def test_values_that_look_like_placeholders_stay_as_given(
    used: list[str], args: dict[str, str]
) -> None:
    template = " ".join("{" + n + "}" for n in used)
    assert sentence(template, args) == " ".join(args.get(n, "{" + n + "}") for n in used)
