"""Helpers for an app's own tests: the app on a fresh database, and a browser-like client."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.testclient import TestClient

from rastrillo.actor import Actor
from rastrillo.app import App
from rastrillo.clock import as_instant
from rastrillo.loader import load_options
from rastrillo.options import Options
from rastrillo.registry.errors import ConfirmRequired
from rastrillo.sessions import cookie_name, create_session
from rastrillo.storage import Database

if TYPE_CHECKING:
    from rastrillo.tools.calls import Result


class TestApp:
    """An app folder's app on a fresh SQLite database under ``tmp_path``.

    ``client`` behaves like a same-origin browser (it sends the app's
    ``Origin``), so forms pass the CSRF check as they would for a real user.
    Used as a context manager (``with TestApp(...) as t:``) it also runs the
    app's lifespan, as a server would: ``/mcp`` (``Options.mcp``) needs it.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, app_dir: Path, tmp_path: Path, **overrides: Any) -> None:
        options = load_options(Path(app_dir))
        overrides.setdefault("db", str(Path(tmp_path) / "test.db"))
        self.app: App = App(dataclasses.replace(options, **overrides)).start()
        self.client = self.browser()

    def __enter__(self) -> TestApp:
        self.client.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.__exit__(*exc)

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

    def agent(self, name: str, user_id: str | int) -> Agent:
        """Act as agent ``name`` for ``user_id``: call tools, expect and give approvals."""
        return Agent(self, name, str(user_id))


class Agent:
    """An agent acting for one user in a test, through the same dispatch and consent path
    as production: a write needs the user's approval, given on the real approval page.

    ::

        agent = app.agent("concierge", user_id=3)
        pending = agent.needs_confirmation("orders_id_cancel_post", {"id": "7"},
                                           sentence="Cancel order 7? Its tickets go back on sale.")
        agent.approve(pending)
        assert agent.call("orders_id_cancel_post", {"id": "7"}, approval=pending).status == 200
    """

    __test__ = False

    def __init__(self, test_app: TestApp, name: str, user_id: str) -> None:
        self.test_app = test_app
        self.actor = Actor.agent(name)
        self.user_id = user_id
        self.session = create_session(test_app.db, user_id, agent_only=True)

    def call(
        self,
        tool: str,
        args: Mapping[str, str] | None = None,
        *,
        approval: str | ConfirmRequired | None = None,
    ) -> Result:
        """Dispatch ``tool`` and return the app's response; a refusal raises its ToolError."""
        from rastrillo.tools.calls import Call, dispatch_sync  # a test's app starts without it

        if isinstance(approval, ConfirmRequired):
            approval = approval.approval_id
        call = Call(
            tool=tool,
            args=dict(args or {}),
            actor=self.actor,
            session=self.session,
            approval=approval,
        )
        return dispatch_sync(self.test_app.app, self.test_app.app.options.tools, call)

    def needs_confirmation(
        self, tool: str, args: Mapping[str, str] | None = None, *, sentence: str | None = None
    ) -> ConfirmRequired:
        """Assert the call waits for the user's approval (showing ``sentence``); return it."""
        try:
            result = self.call(tool, args)
        except ConfirmRequired as pending:
            if sentence is not None and pending.sentence != sentence:
                raise AssertionError(
                    f"{tool} asks {pending.sentence!r}, expected {sentence!r}"
                ) from None
            return pending
        raise AssertionError(f"{tool} ran without approval: {result.status} {result.text[:200]}")

    def approve(self, pending: ConfirmRequired) -> None:
        """Approve as the user, from their own browser session, on the approval page."""
        self._decide(pending, "approve")

    def decline(self, pending: ConfirmRequired) -> None:
        """Decline as the user, from their own browser session, on the approval page."""
        self._decide(pending, "decline")

    def _decide(self, pending: ConfirmRequired, decision: str) -> None:
        browser = self.test_app.browser()
        self.test_app.sign_in(browser, self.user_id)
        page = browser.get(pending.url)
        assert page.status_code == 200, f"approval page: {page.status_code}"
        done = browser.post(pending.url, data={"decision": decision}, follow_redirects=False)
        assert done.status_code == 303, f"{decision}: {done.status_code} {done.text[:200]}"


@contextmanager
def live_server(options: Options, *, host: str = "127.0.0.1", **config: Any) -> Iterator[App]:
    """The app served by uvicorn in a thread on a free loopback port, for tests over real HTTP.

    The app's origin is set to the address served, so the CSRF check sees the
    same origin a browser on that address would send. ``host`` names that origin
    (the server listens on 127.0.0.1 whatever it says: a test's browser is told to
    resolve the name there); ``config`` goes to ``uvicorn.Config``, and with TLS
    files (``ssl_certfile``, ``ssl_keyfile``) the origin is ``https``.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # else ~40 ms per request
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    scheme = "https" if "ssl_certfile" in config else "http"
    origin = f"{scheme}://{host}:{sock.getsockname()[1]}"
    app = App(dataclasses.replace(options, origin=origin)).start()
    server = _PromptServer(uvicorn.Config(app, lifespan="on", log_config=None, **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        if not server.settled.wait(10) or not server.started:
            raise RuntimeError("the test server did not start") from server.error
        yield app
    finally:
        server.stop()
        thread.join(10)
        sock.close()
        app.db.dispose()


class _PromptServer(uvicorn.Server):
    """Uvicorn's server, which starts to stop as soon as the test is done with it.

    Uvicorn looks at ``should_exit`` once every 0.1 s: a suite stops hundreds of these
    servers, and each stop waited out the rest of that tick."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken = asyncio.Event()
        self.settled = threading.Event()
        """Set once the server has started, or has ended without starting."""
        self.error: BaseException | None = None
        """What ended it before it started, raised in the test rather than lost in its
        thread."""

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            super().run(sockets=sockets)
        except BaseException as exc:  # a SystemExit from a failed startup too
            if self.started:
                raise  # the thread's own error, as pytest reports one
            self.error = exc
        finally:
            self.settled.set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.settled.set()

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        ticking = asyncio.ensure_future(super().main_loop())
        woken = asyncio.ensure_future(self._woken.wait())
        await asyncio.wait({ticking, woken}, return_when=asyncio.FIRST_COMPLETED)
        woken.cancel()
        if ticking.done():
            ticking.result()  # uvicorn's own end, or its error
        else:
            ticking.cancel()

    def stop(self) -> None:
        """Stop from another thread. ``should_exit`` first: a loop not yet in
        ``main_loop`` sees it at its first tick."""
        self.should_exit = True
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop has closed: stopped already
                self._loop.call_soon_threadsafe(self._woken.set)


class ManualClock:
    """A clock that moves only when told to: give it as ``Options(clock=...)`` to test expiry.

    ``advance`` moves both clocks, as time passing does; ``step`` moves only the
    wall clock, as setting the system time does.
    """

    def __init__(self, start: datetime = datetime(2030, 1, 1, tzinfo=UTC)) -> None:
        self._now = as_instant(start, "ManualClock was given")
        self._monotonic = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds

    def step(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
