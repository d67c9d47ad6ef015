"""The layers: the pure packages load no web stack, and `import rastrillo` is lazy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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


def test_rastrillo_tools_keeps_its_public_names() -> None:
    from rastrillo.tools import dispatch, dispatch_sync, schemas
    from rastrillo.tools.dispatch import dispatch as dispatch_function

    assert dispatch is dispatch_function
    assert callable(dispatch_sync) and callable(schemas)
