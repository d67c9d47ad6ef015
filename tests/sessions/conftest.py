"""A small app with session routes, served on loopback by uvicorn in a thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from rastrillo.app import App
from rastrillo.testing import ManualClock, live_server
from tests.sessions._sessions_app import make_options
from tests.support import TLS


@pytest.fixture
def clock() -> ManualClock:
    """The clock of every app the test serves, moved by the test for session and rate-limit
    expiry."""
    return ManualClock()


@pytest.fixture
def serve(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., App]]:
    """Start the test app on a real server (options overridable); stopped after the test."""
    stack: list = []

    def start(**overrides: object) -> App:
        manager = live_server(make_options(tmp_path, clock=clock, **overrides))
        stack.append(manager)
        return manager.__enter__()

    yield start
    for manager in reversed(stack):
        manager.__exit__(None, None, None)


@pytest.fixture
def app(serve: Callable[..., App]) -> App:
    return serve()


@pytest.fixture
def browser() -> Iterator[Callable[[App], httpx.Client]]:
    """Same-origin browsers (each its own cookie jar), sending Sec-Fetch-Site as browsers do."""
    clients: list[httpx.Client] = []

    def make(app: App) -> httpx.Client:
        client = httpx.Client(
            verify=TLS, base_url=app.origin, headers={"Sec-Fetch-Site": "same-origin"}
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
