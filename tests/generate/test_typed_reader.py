"""Generate reads `rastrillo.Arg(...)` statically, refuses every inconsistent one, renders it.

And the registry of an app whose args are all plain strings comes out byte for
byte as before typed args existed.
"""

from __future__ import annotations

import ast
import json
import subprocess
import textwrap
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from ruff.__main__ import find_ruff_bin

from rastrillo.generate import generate
from rastrillo.generate.read import read_tool
from rastrillo.generate.render import py_literal, render_tools_module
from rastrillo.registry.declare import Arg, ToolDef, ToolWrite
from rastrillo.tools import FORMATS, schemas_json
from tests.registry.strategies import args

SOURCE = "actions/events/[id]/buy.POST.py"
BUY = ("POST", "/events/{id}/buy")


def read(code: str, method: str = BUY[0], path: str = BUY[1]):
    return read_tool(ast.parse(textwrap.dedent(code)), SOURCE, method, path)


def refusals(code: str, method: str = BUY[0], path: str = BUY[1]) -> list[tuple[int | None, str]]:
    _, problems = read(code, method, path)
    assert problems and {p.file for p in problems} == {SOURCE}
    return [(p.line, p.message) for p in problems]


def test_a_declaration_of_every_kind_of_arg_is_read_as_written() -> None:
    defn, problems = read(
        """\
        import rastrillo
        from rastrillo import Arg

        TOOL = rastrillo.Tool(
            description="Buy tickets for an event. The order is held for 15 minutes.",
            access=rastrillo.ToolWrite,
            args={
                "id": "the event id",
                "quantity": rastrillo.Arg("how many tickets", type=int, minimum=1, maximum=10),
                "seat": Arg("where to sit", choices=["aisle", "window", "any"], required=False),
                "gift": rastrillo.Arg("wrap the tickets as a gift", type=bool, required=False),
                "note": rastrillo.Arg("a note", required=False, max_length=200),
                "price": rastrillo.Arg(description="at most", type=float, minimum=-0.5),
                "code": rastrillo.Arg("a code", pattern=r"^[A-Z]{3}$", min_length=3),
            },
            confirm="Buy {quantity} tickets for event {id}?",
        )
        """
    )
    assert problems == []
    assert defn is not None and dict(defn.args) == {
        "id": Arg("the event id"),
        "quantity": Arg("how many tickets", type=int, minimum=1, maximum=10),
        "seat": Arg("where to sit", choices=("aisle", "window", "any"), required=False),
        "gift": Arg("wrap the tickets as a gift", type=bool, required=False),
        "note": Arg("a note", required=False, max_length=200),
        "price": Arg("at most", type=float, minimum=-0.5),
        "code": Arg("a code", pattern="^[A-Z]{3}$", min_length=3),
    }


def test_every_inconsistent_declaration_is_refused_with_its_line_all_at_once() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(
            description="Buy.",
            access=rastrillo.ToolWrite,
            args={
                "id": rastrillo.Arg("event", required=False),
                "a": rastrillo.Arg("a", type=list),
                "b": rastrillo.Arg("b", choices=[]),
                "c": rastrillo.Arg("c", choices=["x", "x"]),
                "d": rastrillo.Arg("d", type=int, choices=[1, "2"]),
                "e": rastrillo.Arg("e", minimum=1),
                "f": rastrillo.Arg("f", type=int,
                                   minimum=5, maximum=1),
                "g": rastrillo.Arg("g", type=int, max_length=3),
                "h": rastrillo.Arg("h", type=float, pattern="x"),
                "i": rastrillo.Arg("i", pattern="("),
                "j": rastrillo.Arg("j", required=False),
                "k": rastrillo.Arg("k", choices=CHOICES),
                "m": rastrillo.Arg("m", colour="red"),
                "n": rastrillo.Arg(DESCRIPTION),
                "o": rastrillo.Arg("o", "p"),
                "q": rastrillo.Arg("q", min_length=4, max_length=2),
            },
            confirm="Buy {j} for {id}?",
        )
        """
    problems = refusals(code)
    assert problems == [
        (7, "arg 'a': type must be str, int, float or bool, not list"),
        (8, "arg 'b': choices must be a non-empty list"),
        (9, "arg 'c': choice 'x' is repeated"),
        (10, "arg 'd': choices must all be int: '2' is not"),
        (11, "arg 'e': minimum applies to an int or float arg, not str"),
        (13, "arg 'f': minimum 5 is greater than maximum 1"),
        (14, "arg 'g': max_length applies to a str arg, not int"),
        (15, "arg 'h': pattern applies to a str arg, not float"),
        (16, "arg 'i': pattern does not compile: missing ), unterminated subpattern at position 0"),
        (18, "choices of arg 'k' must be a literal"),
        (
            19,
            "rastrillo.Arg for 'm' has no field 'colour'; it takes description, type, "
            "required, choices, minimum, maximum, min_length, max_length, pattern",
        ),
        (20, "arg 'n' needs a description string literal"),
        (21, "rastrillo.Arg for 'o' takes its description, then keywords"),
        (22, "arg 'q': min_length 4 is greater than max_length 2"),
        (6, "path parameter 'id' cannot be optional: the path needs it"),
        (
            24,
            "confirm placeholder {j} names an optional arg; the sentence would show a hole "
            "when it is left out",
        ),
        (
            24,
            "confirm placeholder {id} names an optional arg; the sentence would show a hole "
            "when it is left out",
        ),
    ]


def test_a_bool_path_parameter_is_refused() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(description="x", args={"id": rastrillo.Arg("e", type=bool)})
        """
    assert refusals(code, "GET", "/events/{id}") == [
        (2, "path parameter 'id' cannot be a bool"),
    ]


def test_a_typed_path_parameter_is_fine() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(description="x", args={"id": rastrillo.Arg("e", type=int)})
        """
    defn, problems = read(code, "GET", "/events/{id}")
    assert problems == [] and defn is not None and defn.args["id"].type is int


ALL_STRINGS = [
    ToolDef(
        id="orders_id_cancel_post",
        method="POST",
        path="/orders/{id}/cancel",
        description="Cancel one of my orders and release its tickets.",
        access=ToolWrite,
        args={"id": "the order id", "reason": "why"},
        confirm="Cancel order {id}? Its tickets go back on sale.",
        source="actions/orders/[id]/cancel.POST.py",
    ),
    ToolDef(
        id="orders_get",
        method="GET",
        path="/orders",
        description="List my orders.",
        source="actions/orders/index.GET.py",
    ),
]
# What generate wrote for this registry before typed args existed, byte for byte.
ALL_STRINGS_GEN = '''\
# generated by rastrillo generate; do not edit
"""The tool registry: every action that declares TOOL, sorted by id."""

from rastrillo.registry.declare import ToolDef, ToolRead, ToolWrite

_TOOLS = (
    ToolDef(
        id="orders_get",
        method="GET",
        path="/orders",
        description="List my orders.",
        access=ToolRead,
        args={},
        confirm="",
        source="actions/orders/index.GET.py",
    ),
    ToolDef(
        id="orders_id_cancel_post",
        method="POST",
        path="/orders/{id}/cancel",
        description="Cancel one of my orders and release its tickets.",
        access=ToolWrite,
        args={
            "id": "the order id",
            "reason": "why",
        },
        confirm="Cancel order {id}? Its tickets go back on sale.",
        source="actions/orders/[id]/cancel.POST.py",
    ),
)


def tools() -> list[ToolDef]:
    """Every tool of the app, sorted by id."""
    return list(_TOOLS)
'''
# And the schemas they rendered (the properties of the cancel tool, in every format).
ALL_STRINGS_PROPERTIES = {
    "id": {"type": "string", "description": "the order id"},
    "reason": {"type": "string", "description": "why"},
}


def test_all_string_declarations_generate_the_same_gen_and_schemas() -> None:
    assert render_tools_module(ALL_STRINGS) == ALL_STRINGS_GEN
    for fmt in FORMATS:
        text = schemas_json(ALL_STRINGS, fmt)
        assert '"type": "string"' in text and "null" not in text and "enum" not in text
    anthropic = json.loads(schemas_json(ALL_STRINGS))
    assert anthropic[1]["input_schema"]["properties"] == {}
    assert anthropic[0]["input_schema"] == {
        "type": "object",
        "properties": ALL_STRINGS_PROPERTIES,
        "required": ["id", "reason"],
        "additionalProperties": False,
    }
    [openai] = json.loads(schemas_json(ALL_STRINGS[:1], "openai"))
    assert openai["function"]["parameters"] == anthropic[0]["input_schema"]
    [gemini] = json.loads(schemas_json(ALL_STRINGS[:1], "gemini"))
    assert gemini["parameters"] == {
        "type": "object",
        "properties": ALL_STRINGS_PROPERTIES,
        "required": ["id", "reason"],
    }


# The ruff binary itself: `python -m ruff` would start an interpreter first, twice an example.
RUFF = find_ruff_bin()


def test_a_text_holding_both_quotes_is_quoted_as_ruff_quotes_it(tmp_path: Path) -> None:
    # Hypothesis found '\'"': repr writes '\'"' where ruff writes "'\"".
    texts = ["'\"", 'a"b"c\'', "\\'\"", "x\n'\"", "\"\"''", "\"''", '""\'', "\x00'\"\u202e"]
    file = tmp_path / "texts.py"
    file.write_text("".join(f"x{n} = {py_literal(text)}\n" for n, text in enumerate(texts)))
    result = subprocess.run(
        [RUFF, "format", "--check", "--isolated", str(file)], text=True, capture_output=True
    )
    assert result.returncode == 0, result.stdout
    namespace: dict[str, object] = {}
    exec(file.read_text(), namespace)
    assert [namespace[f"x{n}"] for n in range(len(texts))] == texts


def test_typed_args_render_to_source_that_reads_back_and_stays_ruff_formatted(
    tmp_path: Path,
) -> None:
    """Each example's module reads back as its tool; ruff then checks all the modules in one
    run per command (a run per example was 80 processes). A module ruff refuses is named,
    with its source, though hypothesis does not shrink its example."""
    rendered: list[Path] = []

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(args(), args())
    def reads_back(first: Arg, second: Arg) -> None:
        defn = ToolDef(
            id="x_post",
            method="POST",
            path="/x",
            description="x",
            access=ToolWrite,
            args={"first": first, "second": second, "plain": "a string"},
            confirm="x",
            source="actions/x.POST.py",
        )
        source = render_tools_module([defn])
        namespace: dict[str, object] = {}
        exec(source, namespace)
        assert namespace["tools"]() == [defn]  # type: ignore[operator]
        file = tmp_path / f"tools_{len(rendered):04d}.py"
        file.write_text(source, encoding="utf-8")
        rendered.append(file)

    reads_back()
    assert rendered
    for command in (
        # (RUF001: the app's own descriptions and choices may hold look-alike letters.)
        ["check", "--isolated", "--select", "E,F,W,I,B,UP,SIM,RUF", "--ignore", "RUF001"],
        ["format", "--check", "--isolated"],
    ):
        result = subprocess.run([RUFF, *command, *rendered], capture_output=True, text=True)
        refused = [file.read_text() for file in rendered if file.name in result.stdout]
        assert result.returncode == 0, "\n".join([result.stdout, result.stderr, *refused])


def test_generate_writes_typed_args_and_check_passes(tmp_path: Path) -> None:
    action = tmp_path / "actions" / "events" / "[id]" / "buy.POST.py"
    action.parent.mkdir(parents=True)
    action.write_text(
        textwrap.dedent(
            """\
            import rastrillo

            TOOL = rastrillo.Tool(
                description="Buy.",
                access=rastrillo.ToolWrite,
                args={"id": "event", "n": rastrillo.Arg("how many", type=int, minimum=1)},
                confirm="Buy {n}?",
            )


            def handle(ctx):
                return ctx.text(str(ctx.args["n"]))
            """
        )
    )
    generate(tmp_path)
    assert generate(tmp_path, check=True) == []
    text = (tmp_path / "gen" / "tools.py").read_text()
    assert "from rastrillo.registry.declare import Arg, ToolDef, ToolWrite" in text
    assert '            "n": Arg(\n                "how many",\n                type=int,' in text
