"""docs/sidecar.md's examples (conventions: tests/doc_examples.py): its passes run against a
real SQLite database with the tables they use, and its app answers ``GET /api/next-due``."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import text

from rastrillo.loader import load_file, load_options
from rastrillo.sidecar import PassContext, Sidecar
from rastrillo.storage import Database
from rastrillo.testing import TestApp
from tests.doc_examples import app_py, doc_blocks
from tests.support import write_app

PAGE = "docs/sidecar.md"
TABLES = """\
CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT NOT NULL, status TEXT NOT NULL,
                     hold_expires_at TEXT);
CREATE TABLE outbox (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL,
                     email TEXT NOT NULL, kind TEXT NOT NULL);
"""
TOKEN = "next-due-token"
HOME = {"index.GET.py": "def handle(ctx):\n    return ctx.text('home')\n"}


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An app whose app.py is the page's Python, in order; its migrations are the page's
    bookmarks table and the orders and outbox tables its passes use."""
    [bookmarks] = doc_blocks(PAGE, "sql")
    return write_app(
        tmp_path_factory.mktemp("sidecar") / "app",
        HOME,
        files={
            "app.py": app_py(*doc_blocks(PAGE, "python")),
            "migrations/0001_orders.sql": TABLES,
            "migrations/0002_bookmarks.sql": bookmarks,
        },
    )


@pytest.fixture(scope="module")
def module(app_dir: Path) -> ModuleType:
    load_options(app_dir)
    return load_file(app_dir / "app.py", "app")


@pytest.fixture
def app(app_dir: Path, tmp_path: Path) -> TestApp:
    return TestApp(app_dir, tmp_path)


def pass_context(db: Database, stopping: threading.Event | None = None) -> PassContext:
    now = datetime.now(UTC)
    return PassContext(
        stopping=stopping or threading.Event(),
        started_at=now,
        scheduled_for=now,
        pass_id=1,
        first=True,
        db=db,
    )


def test_send_reminders_says_when_the_next_pass_is_due(module, app):
    before = datetime.now(UTC)
    due = module.send_reminders(pass_context(app.db))
    assert before + timedelta(minutes=5) <= due <= datetime.now(UTC) + timedelta(minutes=5)


def test_a_sidecar_with_settings_wraps_the_pass(tmp_path):
    first, with_settings = doc_blocks(PAGE, "python")[:2]
    app_dir = write_app(tmp_path / "app", HOME, files={"app.py": app_py(first, with_settings)})
    sidecar = load_options(app_dir).sidecar
    assert isinstance(sidecar, Sidecar)
    assert sidecar.jitter is True
    assert sidecar.pass_fn.__name__ == "send_reminders"


def test_send_receipts_catches_up_in_batches_once_each_and_returns_none(module, app):
    statuses = {order: "held" if order % 10 == 0 else "paid" for order in range(1, 251)}
    with app.db.write() as conn:
        conn.execute(
            text("INSERT INTO orders (id, email, status) VALUES (:id, :email, :status)"),
            [{"id": o, "email": f"a{o}@x", "status": s} for o, s in statuses.items()],
        )
    paid = [order for order, status in statuses.items() if status == "paid"]
    assert len(paid) > module.BATCH
    app.db.execute(
        "CREATE TRIGGER down BEFORE INSERT ON outbox WHEN NEW.order_id = 151"
        " BEGIN SELECT RAISE(ABORT, 'mail server down'); END"
    )
    with pytest.raises(Exception, match="mail server down"):
        module.send_receipts(pass_context(app.db))
    # The batch that failed left nothing; the one before it is kept, with its bookmark.
    outbox = app.db.query("SELECT order_id FROM outbox ORDER BY order_id")
    assert [r.order_id for r in outbox] == paid[: module.BATCH]
    app.db.execute("DROP TRIGGER down")
    assert module.send_receipts(pass_context(app.db)) is None
    assert module.send_receipts(pass_context(app.db)) is None  # again: changes nothing
    outbox = app.db.query("SELECT order_id, email, kind FROM outbox ORDER BY order_id")
    assert [(r.order_id, r.email, r.kind) for r in outbox] == [
        (order, f"a{order}@x", "receipt") for order in paid
    ]


def test_send_receipts_stops_between_batches_when_asked(module, app):
    app.db.execute("INSERT INTO orders (id, email, status) VALUES (1, 'a@x', 'paid')")
    stopping = threading.Event()
    stopping.set()
    assert module.send_receipts(pass_context(app.db, stopping)) is None
    assert app.db.query("SELECT * FROM outbox") == []


def test_next_due_answers_the_earliest_hold(module, app, monkeypatch):
    monkeypatch.setenv("CARLOS_ADMIN_TOKEN", TOKEN)
    assert app.app.options.next_due is module.next_hold_expiry
    assert app.app.options.sidecar is module.release_expired_holds

    def asked() -> object:
        answer = app.client.get("/api/next-due", headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 200
        return answer.json()

    assert asked() == {"due": 0}
    first, second = datetime(2030, 1, 1, 9, 0, 30, 900_000, UTC), datetime(2030, 1, 2, tzinfo=UTC)
    for order, expiry in enumerate([second, first], 1):
        app.db.execute(
            "INSERT INTO orders (id, email, status, hold_expires_at)"
            " VALUES (:id, 'a@x', 'held', :at)",
            id=order,
            at=expiry.isoformat(),
        )
    assert asked() == {"due": int(first.timestamp())}
    assert module.release_expired_holds(pass_context(app.db)) == first
