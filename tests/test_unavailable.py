"""The database goes away under a real server: requests are answered 503 with Retry-After,
readiness says so, liveness does not, and everything works again once it is back.

PostgreSQL is reached through a unix-socket relay the test cuts, as a network or a
restart would."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from rastrillo.storage import Database, is_unavailable
from tests.support import Server, write_app

ACTIONS = {
    "notes/index.GET.py": """
        def handle(ctx):
            return ctx.json([r.body for r in ctx.db.query("SELECT body FROM notes")])
    """,
}
MIGRATION = {"migrations/0001_notes.sql": "CREATE TABLE notes (id SERIAL PRIMARY KEY, body TEXT);"}


class Relay:
    """Forwards connections from a unix socket in ``folder`` to PostgreSQL's own socket;
    ``cut`` drops every connection and refuses new ones until ``mend``."""

    def __init__(self, folder: Path, target: str) -> None:
        self.path = str(folder / ".s.PGSQL.5432")
        self.target = target
        self.live: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.listener: socket.socket | None = None
        self.mend()

    def mend(self) -> None:
        listener = socket.socket(socket.AF_UNIX)
        with contextlib.suppress(FileNotFoundError):
            Path(self.path).unlink()
        listener.bind(self.path)
        listener.listen()
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        assert self.listener is not None
        self.listener.close()
        Path(self.path).unlink()
        with self.lock:
            for s in self.live:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.live.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX)
            server.connect(self.target)
            with self.lock:
                self.live.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def relayed_url(pg_url: str, tmp_path: Path) -> Iterator[tuple[str, Relay]]:
    url = make_url(pg_url)
    folder = tmp_path / "relay"
    folder.mkdir()
    relay = Relay(folder, str(Path(str(url.query["host"])) / ".s.PGSQL.5432"))
    yield url.set(query={"host": str(folder)}).render_as_string(hide_password=False), relay
    with contextlib.suppress(Exception):
        relay.cut()


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
