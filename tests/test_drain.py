"""SIGTERM while writes wait for the database's lock: no client is told a write failed when
it was saved. Every 201 is in the database, every refused write (503) is not, no 500."""

from __future__ import annotations

import signal
import sqlite3
import threading
from pathlib import Path

import httpx

from tests.support import TLS, Server, until, write_app

ACTIONS = {
    "notes/index.POST.py": """
        import logging

        def handle(ctx):
            body = ctx.form.get("body") or ctx.form["b"]
            logging.getLogger("notes").info("arrived %s", body)
            ctx.db.execute("INSERT INTO notes (body) VALUES (:b)", b=body)
            return ctx.text("saved", status=201)
    """,
}
MIGRATION = {"migrations/0001_notes.sql": "CREATE TABLE notes (body TEXT);"}
WRITERS = 6


def wait_for_log(server: Server, text: str, count: int = 1) -> None:
    until(
        lambda: server.log.read_text().count(text) >= count,
        f"the server to log {text!r} {count} time(s)",
        30,
        show=server.log.read_text,
    )


def test_sigterm_never_answers_500_for_a_write_it_then_commits(tmp_path: Path, serve) -> None:
    app_dir = write_app(tmp_path / "app", ACTIONS, extra="drain_timeout=1.0,", files=MIGRATION)
    db = tmp_path / "notes.db"
    server: Server = serve(app_dir, "--db", str(db))
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    answers: dict[str, int] = {}

    def post(body: str) -> None:
        with server.client(headers={"Origin": server.base_url}, timeout=60) as c:
            answers[body] = c.post("/notes", data={"body": body}).status_code

    writers = [threading.Thread(target=post, args=(f"note {i}",)) for i in range(WRITERS)]
    for w in writers:
        w.start()
    wait_for_log(server, "arrived", WRITERS)
    server.process.send_signal(signal.SIGTERM)
    wait_for_log(server, "refusing new writes")
    holder.execute("ROLLBACK")
    for w in writers:
        w.join()
    assert server.process.wait(30) == 0

    saved = {row[0] for row in sqlite3.connect(db).execute("SELECT body FROM notes")}
    assert saved == {body for body, status in answers.items() if status == 201}
    assert sorted(set(answers.values())) == [201, 503], answers
    assert "Traceback" not in server.log.read_text()


def test_a_refused_write_asks_the_client_to_retry(tmp_path: Path, serve) -> None:
    app_dir = write_app(tmp_path / "app", ACTIONS, extra="drain_timeout=0.0,", files=MIGRATION)
    db = tmp_path / "notes.db"
    server: Server = serve(app_dir, "--db", str(db))
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    first = threading.Thread(
        target=lambda: httpx.post(
            server.base_url + "/notes",
            data={"body": "first"},
            headers={"Origin": server.base_url},
            timeout=60,
            verify=TLS,
        )
    )
    first.start()
    wait_for_log(server, "arrived")
    answers: list[httpx.Response] = []
    with server.client(headers={"Origin": server.base_url}, timeout=60) as c:
        second = threading.Thread(target=lambda: answers.append(c.post("/notes", data={"b": "2"})))
        second.start()
        wait_for_log(server, "arrived", 2)
        server.process.send_signal(signal.SIGTERM)
        wait_for_log(server, "refusing new writes")
        holder.execute("ROLLBACK")
        second.join()
    first.join()
    assert server.process.wait(30) == 0
    refused = answers[0]
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "5"
    assert "nothing was saved" in refused.text
