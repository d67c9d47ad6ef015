"""The layers: the pure packages load no web stack, and `import rastrillo` is lazy."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import rastrillo

WEB_STACK = ("sqlalchemy", "starlette", "uvicorn", "argon2", "jinja2", "anyio", "httpx")


def loaded_after(statement: str) -> set[str]:
    """Top-level packages in `sys.modules` after running `statement` in a fresh interpreter."""
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return {name.partition(".")[0] for name in json.loads(out)}


@pytest.mark.parametrize(
    "statement",
    [
        "import rastrillo",
        "import rastrillo.generate",
        "import rastrillo.registry.declare, rastrillo.registry.confirm",
        "import rastrillo.registry.schemas, rastrillo.registry.errors",
        "from rastrillo import Tool, ToolDef, ToolRead, ToolWrite, Access, GenerateError",
        "from rastrillo.generate import generate, render_gen",
        "from rastrillo.cli.main import build_parser; build_parser()",
    ],
)
def test_the_pure_layers_import_no_web_stack(statement: str) -> None:
    assert loaded_after(statement).isdisjoint(WEB_STACK)


def test_the_public_names_still_resolve_and_load_the_runtime_on_use() -> None:
    loaded = loaded_after("import rastrillo; rastrillo.App; rastrillo.handler")
    assert {"starlette", "sqlalchemy"} <= loaded
    import rastrillo

    for name in rastrillo.__all__:
        assert getattr(rastrillo, name) is not None
    assert set(rastrillo.__all__) <= set(dir(rastrillo))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        rastrillo.nothing  # noqa: B018


@pytest.mark.parametrize(
    "first",
    ["import rastrillo.tools.calls", "from rastrillo.tools import audit", "import rastrillo.tools"],
)
def test_rastrillo_tools_keeps_its_public_names_whatever_is_imported_first(first: str) -> None:
    """`rastrillo.tools.dispatch` is the function, whichever of the package's modules a
    fresh process imports first: its names load on first use, and no module of the package
    is named like one of them (importing it would set the package's attribute to it)."""
    code = (
        f"{first}\n"
        "import rastrillo.tools\n"
        "from rastrillo.tools import dispatch, dispatch_sync, schemas\n"
        "from rastrillo.tools.calls import dispatch as dispatch_function\n"
        "assert dispatch is dispatch_function and rastrillo.tools.dispatch is dispatch\n"
        "assert callable(dispatch_sync) and callable(schemas)\n"
        "names = rastrillo.tools.__all__\n"
        "assert all(getattr(rastrillo.tools, n) is not None for n in names)\n"
        "assert set(names) <= set(dir(rastrillo.tools))\n"
        "try:\n    rastrillo.tools.nothing\nexcept AttributeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout == "module 'rastrillo.tools' has no attribute 'nothing'\n"


def _imports(path: Path, package: str) -> set[str]:
    """Every rastrillo module ``path`` imports, type-only and function-level imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (
                package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            )
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("rastrillo.")}


def _unit(module: str) -> str:
    """The package (``tools``, ``sessions``) or top-level module (``app``) a module is in."""
    return module.split(".")[1]


def package_graph() -> dict[str, set[str]]:
    root = Path(rastrillo.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts).removesuffix(".__init__")
        if "scaffold" in parts or module == "rastrillo":
            continue
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for target in _imports(path, package):
            if _unit(target) != _unit(module):
                graph.setdefault(_unit(module), set()).add(_unit(target))
    return graph


def test_the_packages_form_layers_with_no_cycle_even_for_types() -> None:
    try:
        TopologicalSorter(package_graph()).prepare()
    except CycleError as exc:
        pytest.fail("import cycle: " + " imports ".join(reversed(exc.args[1])))


def test_options_sits_below_the_runtime_and_keeps_its_public_names() -> None:
    import rastrillo.app
    import rastrillo.options

    assert package_graph()["options"].isdisjoint({"app", "context", "sessions", "tools"})
    assert rastrillo.Options is rastrillo.app.Options is rastrillo.options.Options


def test_the_pure_packages_import_only_pure_ones() -> None:
    graph = package_graph()
    assert graph["registry"] <= {"errors", "collector"}
    assert graph["generate"] <= {"errors", "collector", "registry", "routing"}
    assert "collector" not in graph  # the standard library alone


def drawn_rows() -> list[set[str]]:
    """The layers as docs/architecture.md draws them, bottom row first: each row the
    packages (``tools/``) and modules (``app.py``) its line starts with."""
    text = (Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    rows = []
    for line in block.splitlines():
        names = []
        for word in line.split() if line[:1].strip() else []:
            if not re.fullmatch(r"[a-z_]+(?:\.py|/)", word):
                break
            names.append(word.removesuffix(".py").removesuffix("/"))
        if names:
            rows.append(set(names))
    return rows[::-1]


def test_the_drawn_layers_are_the_imports() -> None:
    """Every package is drawn once, and imports nothing drawn above its own row: the
    picture a newcomer reads is the code's."""
    rows = drawn_rows()
    row_of = {name: i for i, row in enumerate(rows) for name in row}
    assert sum(len(row) for row in rows) == len(row_of), "a package drawn twice"
    graph = package_graph()
    packages = set(graph) | {t for targets in graph.values() for t in targets}
    undrawn, gone = sorted(packages - set(row_of)), sorted(set(row_of) - packages)
    assert not undrawn, f"draw {undrawn} in docs/architecture.md's Layers"
    assert not gone, f"{gone} drawn in docs/architecture.md's Layers are not in the code"
    above = {
        f"{name} imports {target}"
        for name, targets in graph.items()
        for target in targets
        if row_of[target] > row_of[name]
    }
    assert not above


def test_a_command_builds_and_imports_no_other_command(capsys) -> None:
    code = (
        "import sys\nfrom rastrillo.cli.main import build_parser, _command\n"
        "build_parser(_command(['--traceback', 'generate', '--check'])).parse_args("
        "['--traceback', 'generate', '--check'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('rastrillo.cli.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "['rastrillo.cli.main']"
    from rastrillo.cli.main import main

    for argv in (["--help"], ["-h", "generate"]):
        with pytest.raises(SystemExit):
            main(argv)
        listing = capsys.readouterr().out
        for command in ("new", "generate", "dev", "tools", "audit", "agents"):
            assert f"    {command} " in listing


def test_generate_imports_what_only_an_error_or_a_pattern_needs_only_then(tmp_path) -> None:
    """`rastrillo generate` over an app with no problem and no pattern imports neither the
    terminal escaping (and `typing`) nor the pattern checks: a tenth of its imports; nor
    `pathlib` (with `fnmatch`), which generate does without; nor the request matching and
    its URL parsing (`rastrillo.router`, `urllib.parse`); nor `unicodedata`, a shared library
    only a long line of wide text needs."""
    action = tmp_path / "actions" / "orders" / "[id].GET.py"
    action.parent.mkdir(parents=True)
    action.write_text(
        "import rastrillo\n\nTOOL = rastrillo.Tool(description='Show an order.', "
        "args={'id': rastrillo.Arg('the order id', type=int, minimum=1)})\n\n"
        "def handle(ctx):\n    return None\n"
    )
    code = (
        "import sys\nbefore = set(sys.modules)\nfrom rastrillo.cli.main import main\n"
        f"assert main(['generate', {str(tmp_path)!r}]) == 0\n"
        "print(sorted(set(sys.modules) - before))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    loaded = set(ast.literal_eval(out.splitlines()[-1]))
    assert "rastrillo.generate" in loaded
    lazy = {
        "typing",
        "pathlib",
        "rastrillo.visible",
        "rastrillo.registry.backtrack",
        "rastrillo.registry.pattern",
        "rastrillo.router",
        "urllib.parse",
        "unicodedata",
    }
    assert not loaded & lazy


FIRST_USE_ONLY = ("argon2", "sqlparse", "sqlalchemy.dialects.postgresql", "rastrillo.tools.calls")
"""Imported at the first use, never at start: the password hashing (a sign-in), the
migration splitter (a migration to apply), PostgreSQL's dialect (a PostgreSQL database),
dispatch (a tool call, the console's included)."""


def test_a_sqlite_app_restarted_serves_its_first_page_without_what_it_does_not_use(
    tmp_path,
) -> None:
    """The tickets demo, started again on its migrated SQLite database, serves a page as a
    restart or a wake from zero would, loading none of `FIRST_USE_ONLY`; its first start
    (the migrations) and a sign-in load what each needs."""
    tickets = Path(__file__).resolve().parent.parent / "examples" / "tickets"
    start = (
        "import sys\nfrom pathlib import Path\nfrom rastrillo.testing import TestApp\n"
        f"t = TestApp(Path({str(tickets)!r}), Path({str(tmp_path)!r}))\n"
        "assert t.client.get('/events/1').status_code == 200\n"
        "print(sorted(sys.modules))\n"
        "form = {'email': 'alice@example.com', 'password': 'tickets-demo'}\n"
        "assert t.client.post('/signin', data=form, follow_redirects=False).status_code == 303\n"
        "print(sorted(sys.modules))\n"
    )
    loaded = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", start], check=True, capture_output=True, text=True
        ).stdout
        loaded.append([set(ast.literal_eval(line)) for line in out.splitlines()[-2:]])
    (first_page, _), (page_again, signed_in) = loaded
    assert "sqlparse" in first_page  # the demo's migrations, applied at its first start
    assert "rastrillo.pages.console" in first_page  # the demo's console is on
    assert not page_again & set(FIRST_USE_ONLY)
    assert "argon2" in signed_in
