"""Helpers for an app's own tests: the app on a fresh database, and a browser-like client."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from starlette.testclient import TestClient

from .app import App, Options, handler, with_overrides
from .loader import load_options
from .sessions import cookie_name, create_session
from .storage import Database


class TestApp:
    """An app folder's app on a fresh SQLite database under ``tmp_path``.

    ``client`` behaves like a same-origin browser (it sends the app's
    ``Origin``), so forms pass the CSRF check as they would for a real user.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, app_dir: Path, tmp_path: Path, **overrides: object) -> None:
        options = load_options(Path(app_dir))
        overrides.setdefault("db", str(Path(tmp_path) / "test.db"))
        self.app: App = handler(with_overrides(options, **overrides))
        self.client = self.browser()

    @property
    def db(self) -> Database:
        return self.app.db

    def browser(self) -> TestClient:
        """A new same-origin client with its own cookie jar (one more person)."""
        return TestClient(self.app, base_url=self.app.origin, headers={"Origin": self.app.origin})

    def sign_in(self, client: TestClient, user_id: str | int) -> str:
        """Give ``client`` a fresh session for ``user_id``, as signing in would; return its id."""
        options = self.app.options
        session_id = create_session(
            self.db, user_id, idle=options.session_idle, lifetime=options.session_lifetime
        )
        client.cookies.set(cookie_name(self.app.origin), session_id)
        return session_id


@contextmanager
def live_server(options: Options) -> Iterator[App]:
    """The app served by uvicorn in a thread on a free loopback port, for tests over real HTTP.

    The app's origin is set to the address served, so the CSRF check sees the
    same origin a browser on that address would send.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # else ~40 ms per request
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    app = handler(with_overrides(options, origin=f"http://127.0.0.1:{sock.getsockname()[1]}"))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_config=None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        yield app
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        app.db.dispose()
