"""docs/actions.md's example action runs in a real app (conventions: tests/doc_examples.py)."""

from __future__ import annotations

from rastrillo.testing import TestApp
from tests.doc_examples import action_path, doc_blocks
from tests.support import write_app


def test_the_order_page_renders_an_order_and_answers_404_for_a_missing_one(tmp_path):
    [block] = doc_blocks("docs/actions.md", "python")
    app_dir = write_app(
        tmp_path / "app",
        {action_path(block): block},
        files={
            "migrations/0001_orders.sql": (
                "CREATE TABLE orders (id INTEGER PRIMARY KEY, event TEXT);"
            ),
            "templates/order.html": "<h1>Order {{ order.id }}: {{ order.event }}</h1>",
        },
    )
    app = TestApp(app_dir, tmp_path)
    app.db.execute("INSERT INTO orders (id, event) VALUES (7, '<Jazz & Blues>')")
    page = app.client.get("/orders/7")
    assert page.status_code == 200
    assert page.text == "<h1>Order 7: &lt;Jazz &amp; Blues&gt;</h1>"
    assert app.client.get("/orders/8").status_code == 404
