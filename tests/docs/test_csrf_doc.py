"""docs/csrf.md's example: a test refusing a foreign Origin, run against a real app
(conventions: tests/doc_examples.py)."""

from __future__ import annotations

from rastrillo.testing import TestApp
from tests.doc_examples import doc_blocks
from tests.support import write_app

CANCEL = "def handle(ctx):\n    return ctx.text(f\"cancelled {ctx.params['id']}\")\n"


def test_the_example_refuses_a_foreign_origin_the_app_otherwise_lets_through(tmp_path):
    [block] = doc_blocks("docs/csrf.md", "python")
    app = TestApp(write_app(tmp_path / "app", {"orders/[id]/cancel.POST.py": CANCEL}), tmp_path)
    namespace = {"app": app}
    exec(compile(block, "csrf.md example", "exec"), namespace)
    assert namespace["response"].text == "Cross-site request refused."
    assert app.client.post("/orders/1/cancel").text == "cancelled 1"
