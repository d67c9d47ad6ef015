"""The static TOOL reader, the registry rules, and the rendered gen/tools.py."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rastrillo.errors import Problem
from rastrillo.generate.read import read_tool
from rastrillo.generate.render import render_tools_module
from rastrillo.generate.rules import check_registry
from rastrillo.loader import load_file
from rastrillo.registry.declare import (
    Access,
    Arg,
    Tool,
    ToolDef,
    ToolRead,
    ToolWrite,
    tool_id,
)

SOURCE = "actions/orders/[id]/cancel.POST.py"
CANCEL = ("POST", "/orders/{id}/cancel")


def read(code: str, method: str = CANCEL[0], path: str = CANCEL[1], source: str = SOURCE):
    return read_tool(ast.parse(textwrap.dedent(code)), source, method, path)


def refusals(code: str, method: str = CANCEL[0], path: str = CANCEL[1]) -> list[tuple[int, str]]:
    """(line, message) of every problem; each must name the action file."""
    _, problems = read(code, method, path)
    assert problems, "expected generate to refuse this TOOL"
    assert {p.file for p in problems} == {SOURCE}
    return [(p.line, p.message) for p in problems]  # type: ignore[misc]


VALID = """\
import rastrillo


def handle(ctx):
    ...


TOOL = rastrillo.Tool(
    description="Cancel one order "
    "and release its tickets.",
    access=rastrillo.ToolWrite,
    args={"reason": "why it is cancelled", "id": "the order id"},
    confirm="Cancel order {id}? Its tickets go back on sale.",
)
"""


def test_reads_a_valid_declaration() -> None:
    defn, problems = read(VALID)
    assert problems == []
    assert defn == ToolDef(
        id="orders_id_cancel_post",
        method="POST",
        path="/orders/{id}/cancel",
        description="Cancel one order and release its tickets.",
        access=ToolWrite,
        args={"id": "the order id", "reason": "why it is cancelled"},
        confirm="Cancel order {id}? Its tickets go back on sale.",
        source=SOURCE,
    )


def test_no_tool_is_none_without_problems() -> None:
    assert read("import rastrillo\n\ndef handle(ctx): ...\nTOOLS = 1\n") == (None, [])
    # Only module level counts: a TOOL inside a function is not a declaration.
    assert read("def handle(ctx):\n    TOOL = 1\n") == (None, [])


def test_never_imports_the_action() -> None:
    code = (
        "import no_such_module\n"
        "raise SystemExit(1)\n"
        "from rastrillo import Tool\n"
        'TOOL = Tool(description="List events.")\n'
    )
    defn, problems = read(code, "GET", "/events")
    assert problems == [] and defn is not None and defn.id == "events_get"


@pytest.mark.parametrize(
    ("imports", "tool", "access"),
    [
        ("import rastrillo", "rastrillo.Tool", "rastrillo.ToolRead"),
        ("from rastrillo import Tool, ToolRead", "Tool", "ToolRead"),
        ("import rastrillo as r", "r.Tool", "r.ToolRead"),
        ("from rastrillo import Tool as T, ToolRead as R", "T", "R"),
        ("from rastrillo.registry.declare import Tool, ToolRead", "Tool", "ToolRead"),
        ("from rastrillo.registry import declare", "declare.Tool", "declare.ToolRead"),
    ],
)
def test_accepted_spellings(imports: str, tool: str, access: str) -> None:
    code = f'{imports}\nTOOL: object = {tool}(description="List events.", access={access})\n'
    defn, problems = read(code, "GET", "/events")
    assert problems == []
    assert defn is not None and defn.access is ToolRead


def test_write_spellings() -> None:
    for access in ("rastrillo.ToolWrite", "ToolWrite"):
        code = f"""\
            import rastrillo
            from rastrillo import ToolWrite
            TOOL = rastrillo.Tool(description="x", access={access}, args={{"id": ""}}, confirm="?")
            """
        defn, problems = read(code)
        assert problems == [] and defn is not None and defn.access is Access.WRITE


def test_access_defaults_to_read() -> None:
    defn, problems = read('import rastrillo\nTOOL = rastrillo.Tool(description="x")\n', "GET", "/")
    assert problems == [] and defn is not None and defn.access is ToolRead and defn.id == "get"


# --- values that are not literals ---------------------------------------------


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ('f"Cancel {1}"', "description must be a string literal"),
        ("DESCRIPTION", "description must be a string literal"),
        ('"a" + "b"', "description must be a string literal"),
        ('str("x")', "description must be a string literal"),
        ("b'bytes'", "description must be a string literal"),
        ("None", "description must be a string literal"),
    ],
)
def test_description_must_be_a_literal(expr: str, message: str) -> None:
    code = f"""\
        import rastrillo
        TOOL = rastrillo.Tool(
            access=rastrillo.ToolWrite,
            description={expr},
            args={{"id": "the order id"}},
            confirm="ok?",
        )
        """
    assert refusals(code) == [(4, message)]


def test_confirm_must_be_a_literal() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(
            description="x", access=rastrillo.ToolWrite, args={"id": "i"},
            confirm=CONFIRM,
        )
        """
    assert refusals(code) == [(4, "confirm must be a string literal")]


@pytest.mark.parametrize(
    "expr",
    ['"write"', "WRITE", "rastrillo.ToolDelete", "Access.WRITE", "rastrillo.Access.WRITE", "1"],
)
def test_access_must_name_toolread_or_toolwrite(expr: str) -> None:
    code = f'import rastrillo\nTOOL = rastrillo.Tool(description="x", access={expr})\n'
    assert refusals(code, "GET", "/") == [
        (2, "access must be rastrillo.ToolRead or rastrillo.ToolWrite")
    ]


NOT_A_DICT = "args must be a dict literal of names to descriptions or rastrillo.Arg"


@pytest.mark.parametrize(
    ("expr", "line", "message"),
    [
        ("ARGS", 3, NOT_A_DICT),
        ('dict(id="x")', 3, NOT_A_DICT),
        ('{"id": "x", **MORE}', 3, "args cannot unpack another mapping with **"),
        ('{ID: "x", "id": "x"}', 3, "each arg name must be a string literal"),
        ('{"id": DESC}', 3, "arg 'id' must be a description string literal or rastrillo.Arg(...)"),
        ('{"id": "x",\n "id": "y"}', 4, "arg 'id' is declared twice"),
    ],
)
def test_args_must_be_a_literal_dict_of_strings(expr: str, line: int, message: str) -> None:
    code = f'import rastrillo\nTOOL = rastrillo.Tool(description="x",\nargs={expr})\n'
    assert refusals(code, "GET", "/orders/{id}") == [(line, message)]


def test_tool_must_be_a_tool_call() -> None:
    assert refusals("TOOL = make_tool()\n") == [
        (1, "TOOL must be rastrillo.Tool(...) called with literal arguments")
    ]
    assert refusals('TOOL = Tool(description="x")\n') == [
        (1, "TOOL must be rastrillo.Tool(...) called with literal arguments")
    ]


def test_tool_is_declared_once() -> None:
    code = (
        "import rastrillo\n"
        'TOOL = rastrillo.Tool(description="a")\n'
        "\n"
        'TOOL = rastrillo.Tool(description="b")\n'
    )
    assert refusals(code, "GET", "/") == [
        (4, "TOOL is assigned more than once; an action declares one tool")
    ]


def test_fields_by_keyword_only_and_known() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(
            "x",
            description="x",
            title="Cancel",
            **EXTRA,
        )
        """
    assert refusals(code, "GET", "/") == [
        (3, "rastrillo.Tool takes keyword arguments only"),
        (5, "rastrillo.Tool has no field 'title'; it takes description, access, args, confirm"),
        (6, "rastrillo.Tool takes no **mapping; write each field out"),
    ]


def test_generate_takes_exactly_the_fields_tool_and_arg_take_when_run() -> None:
    """A field added to `Tool` or `Arg` is one generate reads too: no second list to forget."""
    tool_takes = [p for p in inspect.signature(Tool.__init__).parameters if p != "self"]
    arg_takes = [p for p in inspect.signature(Arg.__init__).parameters if p != "self"]
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(
            description="x",
            args={"id": rastrillo.Arg("the order id", colour="red")},
            title="Cancel",
        )
        """
    assert refusals(code, "GET", "/orders/{id}") == [
        (4, f"rastrillo.Arg for 'id' has no field 'colour'; it takes {', '.join(arg_takes)}"),
        (5, f"rastrillo.Tool has no field 'title'; it takes {', '.join(tool_takes)}"),
    ]


@pytest.mark.parametrize(
    ("written", "meant"),
    [("descripton", "description"), ("acess", "access"), ("arg", "args"), ("confim", "confirm")],
)
def test_a_misspelt_field_is_one_line_naming_the_field_meant(written: str, meant: str) -> None:
    fields = {
        "description": '"Cancel my order."',
        "access": "rastrillo.ToolWrite",
        "args": '{"id": "the order id"}',
        "confirm": '"Cancel order {id}?"',
    }
    lines = "".join(f"    {written if f == meant else f}={v},\n" for f, v in fields.items())
    code = f"import rastrillo\nTOOL = rastrillo.Tool(\n{lines})\n"
    line = 3 + list(fields).index(meant)
    assert refusals(code) == [
        (line, f"rastrillo.Tool has no field {written!r}; did you mean {meant!r}?")
    ]


# --- the rules of generate/rules.py ---------------------------------------------


def test_write_tool_needs_confirm() -> None:
    code = (
        "import rastrillo\n"
        'TOOL = rastrillo.Tool(description="x", access=rastrillo.ToolWrite, args={"id": "i"})\n'
    )
    assert refusals(code) == [
        (2, "a write tool needs a confirm sentence, the question its human approves")
    ]
    blank = (
        "import rastrillo\n"
        'TOOL = rastrillo.Tool(description="x", access=rastrillo.ToolWrite,\n'
        'args={"id": "i"},\n'
        'confirm="  ")\n'
    )
    assert refusals(blank) == [
        (4, "a write tool needs a confirm sentence, the question its human approves")
    ]


def test_path_parameter_must_be_an_arg() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(
            description="Move a ticket.",
            access=rastrillo.ToolWrite,
            args={"note": "a note"},
            confirm="Move it?",
        )
        """
    move = "/events/{event}/tickets/{ticket}/move"
    assert refusals(code, "POST", move) == [
        (5, f"path parameter 'event' of {move} must be declared in args"),
        (5, f"path parameter 'ticket' of {move} must be declared in args"),
    ]
    without_args = 'import rastrillo\nTOOL = rastrillo.Tool(description="Show one order.")\n'
    assert refusals(without_args, "GET", "/orders/{id}") == [
        (2, "path parameter 'id' of /orders/{id} must be declared in args")
    ]


def test_confirm_placeholders_must_be_args() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(
            description="Cancel one order.",
            access=rastrillo.ToolWrite,
            args={"id": "the order id"},
            confirm="Cancel order {id} because {reason}? {reason}! {not-a-placeholder}",
        )
        """
    assert refusals(code) == [(6, "confirm placeholder {reason} is not an arg")]


def test_read_tool_must_be_get() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(
            description="Cancel one order.",
            access=rastrillo.ToolRead,
            args={"id": "the order id"},
        )
        """
    message = (
        "a read tool must be a GET action, not POST; declare access=rastrillo.ToolWrite "
        "if it changes state (access defaults to read)"
    )
    assert refusals(code) == [(4, message)]
    # Without an explicit access, the TOOL line is blamed.
    implicit = 'import rastrillo\nTOOL = rastrillo.Tool(description="x", args={"id": "i"})\n'
    assert refusals(implicit, "DELETE", "/orders/{id}") == [
        (2, message.replace("not POST", "not DELETE"))
    ]


def test_write_tool_must_not_be_get() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(
            description="Show one order.",
            access=rastrillo.ToolWrite,
            args={"id": "the order id"},
            confirm="Show {id}?",
        )
        """
    assert refusals(code, "GET", "/orders/{id}") == [
        (4, "a write tool cannot be a GET action: GET must not change state")
    ]


@pytest.mark.parametrize("description", ['""', '"   "', '"\\n"'])
def test_description_must_not_be_empty(description: str) -> None:
    code = f"import rastrillo\nTOOL = rastrillo.Tool(\ndescription={description})\n"
    assert refusals(code, "GET", "/") == [
        (3, "description is empty; the model chooses tools by it")
    ]


def test_description_is_required() -> None:
    assert refusals("import rastrillo\nTOOL = rastrillo.Tool()\n", "GET", "/") == [
        (2, "TOOL needs a description")
    ]


def test_description_limit_counts_what_the_model_is_sent() -> None:
    ok_read = f'import rastrillo\nTOOL = rastrillo.Tool(description="{"x" * 1024}")\n'
    assert read(ok_read, "GET", "/")[1] == []
    too_long = f'import rastrillo\nTOOL = rastrillo.Tool(description="{"x" * 1025}")\n'
    assert refusals(too_long, "GET", "/") == [
        (
            2,
            "description is 1025 characters as sent to the model (write tools add "
            "' (write: requires human confirmation)'); the limit is 1024",
        )
    ]
    # A write tool's description gets a 37-character suffix in every schema.
    write = (
        "import rastrillo\n"
        'TOOL = rastrillo.Tool(description="{}", access=rastrillo.ToolWrite, confirm="ok?")\n'
    )
    assert read(write.format("x" * 987), "POST", "/x")[1] == []
    assert refusals(write.format("x" * 988), "POST", "/x")[0][1].startswith(
        "description is 1025 characters"
    )


def test_tool_id_limit() -> None:
    code = 'import rastrillo\nTOOL = rastrillo.Tool(description="x")\n'
    assert read(code, "GET", "/" + "a" * 60)[1] == []  # a...a_get: 64
    assert refusals(code, "GET", "/" + "a" * 61) == [
        (
            2,
            f"tool id '{'a' * 61}_get' is 65 characters; the limit is 64 "
            "(shorten the action's path)",
        )
    ]


@pytest.mark.parametrize("name", ["1st", "order-id", "a.b", "", "naïve", "x" * 65, "has space"])
def test_arg_name_rule(name: str) -> None:
    code = (
        "import rastrillo\n"
        'TOOL = rastrillo.Tool(description="x", args={\n'
        '"ok": "fine",\n'
        f'{name!r}: "bad"}})\n'
    )
    assert refusals(code, "GET", "/") == [
        (4, f"arg name {name!r} must match [A-Za-z_][A-Za-z0-9_]{{0,63}}")
    ]


def test_arg_names_at_the_limits_are_fine() -> None:
    code = 'import rastrillo\nTOOL = rastrillo.Tool(description="x", args={"_": "a", "%s": "b"})\n'
    assert read(code % ("Z" + "9" * 63), "GET", "/")[1] == []


def test_every_offender_is_listed_at_once() -> None:
    code = """\
        import rastrillo
        TOOL = rastrillo.Tool(
            description="",
            access=rastrillo.ToolWrite,
            args={
                "bad-name": "x",
                "reason": REASON,
            },
            confirm="",
        )
        """
    path = "/orders/{id}/" + "x" * 60
    assert refusals(code, "GET", path) == [
        (7, "arg 'reason' must be a description string literal or rastrillo.Arg(...)"),
        (3, "description is empty; the model chooses tools by it"),
        (4, "a write tool cannot be a GET action: GET must not change state"),
        (9, "a write tool needs a confirm sentence, the question its human approves"),
        (6, "arg name 'bad-name' must match [A-Za-z_][A-Za-z0-9_]{0,63}"),
        (5, f"path parameter 'id' of {path} must be declared in args"),
        (
            2,
            f"tool id 'orders_id_{'x' * 60}_get' is 74 characters; "
            "the limit is 64 (shorten the action's path)",
        ),
    ]
    # An unreadable TOOL gives no def: generate could not write it anyway.
    assert read(code, "GET", path)[0] is None


def test_rule_breaking_but_readable_tool_still_has_a_def() -> None:
    """So the cross-tool checks can name it too."""
    defn, problems = read('import rastrillo\nTOOL = rastrillo.Tool(description="x")\n')
    assert problems and defn is not None and defn.id == "orders_id_cancel_post"


# --- arbitrary literal values never crash the reader -----------------------------

literals = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda inner: (
        st.lists(inner)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text() | st.integers(), inner)
    ),
    max_leaves=8,
)
access_exprs = st.sampled_from(
    [
        "rastrillo.ToolRead",
        "rastrillo.ToolWrite",
        "rastrillo.Access.WRITE",
        "ToolWrite",
        "x.y.z",
        "1",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    description=literals,
    access=access_exprs | literals.map(repr),
    args=literals | st.dictionaries(st.text(), st.text() | literals),
    confirm=literals,
    method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]),
    path=st.text(),
)
def test_read_tool_never_raises_on_literal_values(
    description: object, access: str, args: object, confirm: object, method: str, path: str
) -> None:
    code = (
        "import rastrillo\n"
        "from rastrillo import ToolWrite\n"
        f"TOOL = rastrillo.Tool(\n"
        f"    description={description!r},\n"
        f"    access={access},\n"
        f"    args={args!r},\n"
        f"    confirm={confirm!r},\n"
        ")\n"
    )
    defn, problems = read_tool(ast.parse(code), "actions/x.POST.py", method, path)
    assert all(isinstance(p, Problem) and isinstance(p.line, int) for p in problems)
    assert all(p.file == "actions/x.POST.py" and 3 <= p.line <= 8 for p in problems)  # type: ignore[operator]
    if defn is not None:
        assert isinstance(defn.description, str) and isinstance(defn.confirm, str)
        assert all(isinstance(k, str) and isinstance(v, Arg) for k, v in defn.args.items())


# --- cross-tool rules -----------------------------------------------------------


def a_def(source: str, method: str = "POST", path: str = "/a-b") -> ToolDef:
    return ToolDef(
        id=tool_id(method, path),
        method=method,
        path=path,
        description="x",
        access=ToolWrite,
        confirm="ok?",
        source=source,
    )


def test_two_tools_with_one_id_name_both_files() -> None:
    first = a_def("actions/a-b.POST.py", path="/a-b")
    second = a_def("actions/a_b.POST.py", path="/a_b")
    assert check_registry([first, a_def("actions/c.POST.py", path="/c"), second]) == [
        Problem(
            "actions/a-b.POST.py", None, "tool id 'a_b_post' is also used by actions/a_b.POST.py"
        ),
        Problem(
            "actions/a_b.POST.py", None, "tool id 'a_b_post' is also used by actions/a-b.POST.py"
        ),
    ]


def test_distinct_ids_pass() -> None:
    assert check_registry([a_def("a.POST.py", path="/a"), a_def("b.POST.py", path="/b")]) == []
    assert check_registry([]) == []


# --- the rendered module ---------------------------------------------------------

REGISTRY = [
    ToolDef(
        id="orders_id_cancel_post",
        method="POST",
        path="/orders/{id}/cancel",
        description='Cancel one order; it\'s "final".\nReally.',
        access=ToolWrite,
        args={"reason": "why ✓", "id": "the order id"},
        confirm="Cancel order {id}?",
        source="actions/orders/[id]/cancel.POST.py",
    ),
    ToolDef(
        id="events_get",
        method="GET",
        path="/events",
        description="List events " * 100,
        source="actions/events.GET.py",
    ),
]


def load(source: str, tmp_path: Path, kind: str = "gen_tools_under_test") -> ModuleType:
    """``source`` as a module written to a file and loaded as an app's are: once per
    ``kind``."""
    file = tmp_path / "tools.py"
    file.write_text(source, encoding="utf-8")
    return load_file(file, kind)


def test_rendered_module_round_trips_sorted_by_id(tmp_path: Path) -> None:
    source = render_tools_module(REGISTRY)
    assert source.startswith("# generated by rastrillo generate; do not edit\n")
    tools = load(source, tmp_path).tools()
    assert tools == sorted(REGISTRY, key=lambda d: d.id)
    assert [t.id for t in tools] == ["events_get", "orders_id_cancel_post"]
    tools.clear()  # callers get a fresh list each time
    assert len(load(source, tmp_path, "again").tools()) == 2


def test_rendered_module_is_deterministic() -> None:
    assert render_tools_module(REGISTRY) == render_tools_module(list(reversed(REGISTRY)))
    reordered = [
        ToolDef(**{**vars(REGISTRY[0]), "args": {"id": "the order id", "reason": "why ✓"}}),
        REGISTRY[1],
    ]
    assert render_tools_module(reordered) == render_tools_module(REGISTRY)


def test_empty_registry(tmp_path: Path) -> None:
    assert load(render_tools_module([]), tmp_path).tools() == []


def _described(description: str) -> list[ToolDef]:
    return [ToolDef(id="x_get", method="GET", path="/x", description=description, source="x")]


WIDE = _described("注文を表示 " * 10)
"""Its line, 83 characters, takes 133 columns: too long only counted as ruff counts them."""
NARROW = _described("éé " * 20)
"""Its line, 83 characters, none of them wide, fits."""


@pytest.mark.parametrize(
    ("registry", "exempt"),
    [(REGISTRY, True), ([], False), (WIDE, True), (NARROW, False)],
    ids=["tools", "empty", "wide", "narrow"],
)
def test_rendered_module_is_ruff_clean(
    registry: list[ToolDef], exempt: bool, tmp_path: Path
) -> None:
    file = tmp_path / "tools.py"
    source = render_tools_module(registry)
    assert ("# ruff: noqa: E501\n" in source) is exempt
    file.write_text(source, encoding="utf-8")
    for command in (
        ["check", "--isolated", "--select", "E,F,W,I,B,UP,SIM,RUF"],
        ["format", "--check", "--isolated"],
    ):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *command, str(file)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


@given(st.text(), st.text())
def test_rendered_literals_are_exact(description: str, confirm: str) -> None:
    defn = ToolDef(
        id="x_post",
        method="POST",
        path="/x",
        description=description,
        confirm=confirm,
        args={description[:5] or "k": confirm},
        source="actions/x.POST.py",
    )
    namespace: dict[str, object] = {}
    exec(render_tools_module([defn]), namespace)
    assert namespace["tools"]() == [defn]  # type: ignore[operator]
