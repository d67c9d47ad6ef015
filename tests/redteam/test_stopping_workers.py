"""``--workers N`` on PostgreSQL: a server asked to stop while its audit rows wait for the
database, served by a real uvicorn on loopback and called over ``/mcp``."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from rastrillo.storage import Database
from tests.agents.mcp_app import Person, tools_call
from tests.redteam.conftest import HEADERS
from tests.support import Server, free_port, until, write_app

ACTIONS = {
    "ping.GET.py": """
        import rastrillo

        TOOL = rastrillo.Tool(description="Answer pong.")


        def handle(ctx):
            return ctx.text("pong")
    """,
}


@pytest.mark.postgres
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_stopping_servers_rows_held_by_a_locked_table_are_logged_in_full_not_waited_for(
    tmp_path: Path, pg_url: str, workers: str
) -> None:
    """A read ran while another connection held the audit table: its row waits in memory.
    The server is asked to stop; its lifespan's flush gives up after ten seconds and says
    so. The process then exits with the table still locked, its row logged in full: a
    second wait would take the stop past its bound and into the platform's kill, where
    the row is lost unsaid. A worker of ``--workers`` ends with ``os._exit``, which runs
    no exit handler: its row was lost without a word."""
    app_dir = write_app(tmp_path / "app", ACTIONS, extra="mcp=True,")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = ["--addr", f"127.0.0.1:{port}", "--db", pg_url, "--workers", workers]
    server = Server(app_dir, args, base)
    db = Database(pg_url)
    holder = db.engine.connect()
    try:
        token = Person(base, db, "3").token("claude")
        headers = {**HEADERS, "Authorization": f"Bearer {token}"}
        lock = holder.begin()
        holder.exec_driver_sql("LOCK TABLE rastrillo_audit IN EXCLUSIVE MODE")
        with httpx.Client(timeout=30) as http:
            answer = http.post(base + "/mcp", json=tools_call("ping_get", {}), headers=headers)
        assert answer.json()["result"]["content"][0]["text"] == "pong", answer.text
        until(
            lambda: db.query(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE 'INSERT INTO rastrillo_audit%'"
            ),
            "the audit writer to wait for the lock",
        )
        server.process.send_signal(signal.SIGTERM)
        # the table still locked; within the bound docs/app.md gives ("Stopping"), 30 s:
        # the exit handler waited 30 s more for the row the server's end had logged
        assert server.process.wait(timeout=30) == 0
        lock.rollback()
    finally:
        holder.close()
        server.stop()
    log = server.log.read_text()
    assert "at shutdown" in log, log  # the lifespan's flush gave up, and said so
    [line] = [line for line in log.splitlines() if "row not written before exit" in line]
    assert '"tool": "ping_get"' in line and '"status": 200' in line, line
    assert db.query("SELECT tool FROM rastrillo_audit") == []  # logged, not also written
    db.dispose()
