"""A real server with MCP on, and a token of one user's agent, for the attacks here."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from rastrillo.storage import Database
from tests.agents.mcp_app import Person, make_app
from tests.support import Server, free_port

HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
    "Content-Type": "application/json",
}


@dataclass(frozen=True)
class Served:
    url: str
    """The server's ``/mcp``."""
    token: str
    """A personal token of user 3's agent ``claude``."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    app_dir = make_app(tmp_path_factory.mktemp("redteam") / "app")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = Server(app_dir, ["--addr", f"127.0.0.1:{port}"], base)
    db = Database(str(app_dir / "app.db"))
    try:
        yield Served(base + "/mcp", Person(base, db, "3").token("claude"))
    finally:
        server.stop()
        db.dispose()
