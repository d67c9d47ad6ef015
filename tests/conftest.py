"""Shared fixtures: real servers on loopback for throwaway app folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import Server, free_port

# Timing is measured in bench/, never in tests: no per-example deadline, which
# would only make property tests flaky on a loaded CI machine.
settings.register_profile("rastrillo", deadline=None, print_blob=True)
settings.load_profile("rastrillo")


@pytest.fixture
def serve() -> Iterator:
    """Start ``python app.py`` for an app folder on a free loopback port."""
    servers: list[Server] = []

    def start(app_dir: Path, *args: str) -> Server:
        port = free_port()
        server = Server(app_dir, ["--addr", f"127.0.0.1:{port}", *args], f"http://127.0.0.1:{port}")
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
