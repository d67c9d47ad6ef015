"""docs/mcp.md's examples (conventions: tests/doc_examples.py): the app.py that turns
``/mcp`` on, and the test that lists its tools with a personal token."""

from __future__ import annotations

from rastrillo.loader import load_options
from tests.doc_examples import app_py, doc_block
from tests.support import write_app

PAGE = "docs/mcp.md"
ORDER = """\
import rastrillo

TOOL = rastrillo.Tool(description="One of my orders.", access=rastrillo.ToolRead,
                      args={"id": "the order id"})


def handle(ctx):
    return ctx.json({"id": ctx.params["id"]})
"""


def test_the_testing_example_lists_the_tools_of_the_app_shown(tmp_path):
    options = doc_block(PAGE, "python", "mcp=True,\n")
    app_dir = write_app(
        tmp_path / "app", {"orders/[id].GET.py": ORDER}, files={"app.py": app_py(options)}
    )
    assert load_options(app_dir).mcp is True
    namespace = {"app_dir": app_dir, "tmp_path": tmp_path}
    example = doc_block(PAGE, "python", "TestApp(")
    exec(compile(example, "mcp.md testing example", "exec"), namespace)
    answer = namespace["answer"]
    assert answer.status_code == 200
    [tool] = answer.json()["result"]["tools"]
    assert (tool["name"], tool["annotations"]["readOnlyHint"]) == ("orders_id_get", True)
