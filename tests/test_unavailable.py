"""The database goes away under a real server: requests are answered 503 with Retry-After,
readiness says so, liveness does not, and everything works again once it is back.

PostgreSQL is reached through a unix-socket relay the test cuts, as a network or a
restart would."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from rastrillo.storage import Database, is_unavailable
from tests.support import Relay, Server, write_app

ACTIONS = {
    "notes/index.GET.py": """
        def handle(ctx):
            return ctx.json([r.body for r in ctx.db.query("SELECT body FROM notes")])
    """,
}
MIGRATION = {"migrations/0001_notes.sql": "CREATE TABLE notes (id SERIAL PRIMARY KEY, body TEXT);"}


@pytest.mark.postgres
def test_postgres_down_is_503_with_retry_after_and_not_ready(
    tmp_path: Path, serve, relayed_url: tuple[str, Relay]
) -> None:
    url, relay = relayed_url
    server: Server = serve(write_app(tmp_path / "app", ACTIONS, files=MIGRATION), "--db", url)
    with server.client(timeout=30) as c:
        assert c.get("/notes").json() == []
        assert (c.get("/readyz").status_code, c.get("/readyz").text) == (200, "ready")
        relay.cut()
        for request in (
            lambda: c.get("/notes"),
            lambda: c.get("/notes", headers={"Cookie": "rastrillo_session=" + "x" * 40}),
            lambda: c.get("/readyz"),
        ):
            response = request()
            assert response.status_code == 503
            assert int(response.headers["Retry-After"]) > 0
        assert c.get("/healthz").text == "ok"  # alive: restarting it would not help
        relay.mend()
        assert c.get("/notes").json() == []
        assert c.get("/readyz").status_code == 200
    assert server.stop() == 0
    log = server.log.read_text()
    assert "Traceback" not in log
    assert "database unavailable" in log


def test_an_unreachable_sqlite_file_is_unavailable_and_a_bad_query_is_not(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "gone" / "app.db"))
    (tmp_path / "gone").rmdir()
    with pytest.raises(OperationalError) as unreachable:
        db.query("SELECT 1")
    assert is_unavailable(unreachable.value)
    db = Database(str(tmp_path / "app.db"))
    with pytest.raises(OperationalError) as bad:
        db.query("SELEC 1")
    assert not is_unavailable(bad.value)
    with pytest.raises(OperationalError) as missing:
        db.query("SELECT * FROM nowhere")
    assert not is_unavailable(missing.value)
