"""docs/app.md's examples (conventions: tests/doc_examples.py): the app.py `rastrillo new`
writes, the `wrap` seam, the storage calls inside a handle, and an app's own test."""

from __future__ import annotations

from pathlib import Path

import pytest

from rastrillo.cli.main import main
from rastrillo.testing import TestApp
from tests.doc_examples import app_py, doc_block, handle_py
from tests.support import write_app

PAGE = "docs/app.md"


@pytest.fixture(scope="module")
def new_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    app_dir = tmp_path_factory.mktemp("new") / "shop"
    assert main(["new", str(app_dir)]) == 0
    return app_dir


def test_rastrillo_new_writes_the_app_py_shown(new_app):
    shown = doc_block(PAGE, "python", "OPTIONS = rastrillo.Options(\n")
    assert (new_app / "app.py").read_text() == shown


def test_the_testing_example_passes_against_a_new_app(new_app, tmp_path):
    block = doc_block(PAGE, "python", "from rastrillo.testing import TestApp")
    namespace = {"__file__": str(new_app / "tests" / "test_home.py")}
    exec(compile(block, "app.md testing example", "exec"), namespace)
    assert namespace["APP_DIR"] == new_app
    namespace["test_home"](tmp_path)


def test_wrap_adds_the_apps_own_middleware(tmp_path):
    wrap = doc_block(PAGE, "python", "wrap=")
    page = "def handle(ctx):\n    return ctx.text('x' * 1000)\n"
    app_dir = write_app(tmp_path / "app", {"index.GET.py": page}, files={"app.py": app_py(wrap)})
    app = TestApp(app_dir, tmp_path)
    answer = app.client.get("/", headers={"Accept-Encoding": "gzip"})
    assert answer.headers["content-encoding"] == "gzip"
    assert answer.text == "x" * 1000
    assert int(answer.headers["content-length"]) < 100
    plain = app.client.get("/", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers


def test_the_storage_calls_read_write_and_write_in_one_transaction(tmp_path):
    body = doc_block(PAGE, "python", "ctx.db.query(")
    answer = 'ctx.json({"rows": len(rows), "row": row.name, "count": count})'
    app_dir = write_app(
        tmp_path / "app",
        {"events.POST.py": handle_py(body, answer)},
        files={
            "migrations/0001_events.sql": "CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT);"
        },
    )
    app = TestApp(app_dir, tmp_path)
    app.db.execute("INSERT INTO events (id, name) VALUES (7, 'Rock')")
    assert app.client.post("/events").json() == {"rows": 1, "row": "Rock", "count": 2}
    names = [tuple(r) for r in app.db.query("SELECT id, name FROM events ORDER BY id")]
    assert names == [(7, "Blues"), (8, "Folk")]
