"""A signed-in request crosses to a worker thread once: the session's row is checked in
the thread a sync ``handle`` runs in, still before ``handle`` and still on every request."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

import rastrillo
from rastrillo import sessions, threads
from rastrillo.app import App
from rastrillo.context import TOOL_CALL_SCOPE_KEY, USER_SCOPE_KEY
from rastrillo.testing import ManualClock
from rastrillo.tools import ToolCallMarker
from tests.sessions._sessions_app import make_options


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every function the request path sends to a worker thread, in order
    (the real hand-off still runs it; anyio's too, in case something sends work there)."""
    sent: list[str] = []

    def counting(real: Callable[..., Any]) -> Callable[..., Any]:
        async def counted(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            named = func.func if isinstance(func, functools.partial) else func
            sent.append(getattr(named, "__name__", repr(named)))
            return await real(func, *args, **kwargs)

        return counted

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting(anyio.to_thread.run_sync))
    monkeypatch.setattr(threads, "in_thread", counting(threads.in_thread))
    return sent


def get(app: ASGIApp, path: str, session: str | None, origin: str) -> httpx.Response:
    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=origin) as client:
            if session is not None:
                client.cookies.set(sessions.cookie_name(origin), session)
            return await client.get(path, follow_redirects=False)

    return asyncio.run(main())


def test_a_signed_in_sync_request_makes_one_thread_hop(tmp_path: Path, hops: list[str]) -> None:
    app = rastrillo.handler(make_options(tmp_path))
    session = sessions.create_session(app.db, "7")
    hops.clear()
    response = get(app, "/private", session, app.origin)
    assert response.text == "private for 7"
    assert hops == ["_checked_handle"]


def post_private(app: App, session: str) -> httpx.Response:
    """``POST /private``: an async ``@sessions.require`` handle."""

    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=app.origin) as client:
            client.cookies.set(sessions.cookie_name(app.origin), session)
            return await client.post("/private", headers={"Origin": app.origin})

    return asyncio.run(main())


def test_a_signed_in_async_request_on_sqlite_reads_its_session_on_the_loop(
    tmp_path: Path, hops: list[str]
) -> None:
    """A SQLite (WAL) read never waits on a lock, so an async handle's row is read on the
    event loop: no thread hop, still on every request, so a revoked session is refused on
    the very next one. Only the rare write the check makes (the idle expiry moved, at most
    once a minute a session) takes a worker thread."""
    clock = ManualClock()
    app = rastrillo.handler(make_options(tmp_path, clock=clock))
    session = sessions.create_session(app.db, "7")
    hops.clear()
    assert post_private(app, session).text == "posted by 7"
    assert hops == []
    clock.advance(120)
    assert post_private(app, session).text == "posted by 7"
    assert hops == ["find_session"]  # the idle expiry moved, in a worker thread
    assert post_private(app, session).text == "posted by 7"
    assert hops == ["find_session"]
    sessions.revoke_user(app.db, "7")
    assert post_private(app, session).status_code == 403
    assert hops == ["find_session"]


def test_an_expired_session_read_on_the_loop_is_refused_and_deleted_in_a_thread(
    tmp_path: Path, hops: list[str]
) -> None:
    clock = ManualClock()
    app = rastrillo.handler(make_options(tmp_path, clock=clock))
    session = sessions.create_session(app.db, "7")
    clock.advance(3 * 24 * 3600)  # past the idle expiry (two days by default)
    hops.clear()
    refused = post_private(app, session)
    assert refused.status_code == 403
    assert "Max-Age=0" in refused.headers["set-cookie"]
    assert hops == ["find_session"]  # the dead row's deletion, off the loop
    assert app.db.query_one("SELECT count(*) AS n FROM rastrillo_sessions").n == 0


def test_with_no_idle_connection_the_loop_does_not_wait_for_one(
    tmp_path: Path, hops: list[str]
) -> None:
    """Every pooled connection in use: reading on the event loop would wait for one (or
    open one there), so the session is checked in a worker thread instead."""
    app = rastrillo.handler(make_options(tmp_path))
    session = sessions.create_session(app.db, "7")
    held = []
    while app.db.engine.pool.checkedin():  # type: ignore[attr-defined]
        held.append(app.db.engine.raw_connection())
    try:
        hops.clear()
        assert post_private(app, session).text == "posted by 7"
        assert hops == ["find_session"]
    finally:
        for connection in held:
            connection.close()
    hops.clear()
    assert post_private(app, session).text == "posted by 7"
    assert hops == []


@pytest.mark.postgres
def test_a_signed_in_async_request_on_postgresql_checks_its_session_in_a_thread(
    tmp_path: Path, pg_url: str, hops: list[str]
) -> None:
    """A PostgreSQL query waits on the network: never on the event loop."""
    app = rastrillo.handler(dataclasses.replace(make_options(tmp_path), db=pg_url))
    try:
        session = sessions.create_session(app.db, "7")
        hops.clear()
        assert post_private(app, session).text == "posted by 7"
        assert hops == ["find_session"]
    finally:
        app.db.dispose()


@sessions.require
def note(ctx: rastrillo.Context) -> Any:
    return ctx.text(f"{ctx.form['text']} from {ctx.user_id}")


def post_note(app: App, session: str) -> httpx.Response:
    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=app.origin) as client:
            client.cookies.set(sessions.cookie_name(app.origin), session)
            return await client.post(
                "/note", data={"text": "hello"}, headers={"Origin": app.origin}
            )

    return asyncio.run(main())


def test_a_signed_in_form_post_to_a_sync_handle_makes_one_thread_hop(
    tmp_path: Path, hops: list[str]
) -> None:
    """The form is read on the event loop, then the session checked and ``handle`` run in
    one worker-thread hop; a revoked session is still refused there, before ``handle``."""
    routes = [rastrillo.routing.Route("POST", "/note", "note", note)]
    app = rastrillo.handler(
        rastrillo.Options(app_dir=tmp_path, db=str(tmp_path / "t.db"), routes=routes)
    )
    session = sessions.create_session(app.db, "7")
    hops.clear()
    assert post_note(app, session).text == "hello from 7"
    assert hops == ["_checked_handle"]
    sessions.revoke_user(app.db, "7")
    refused = post_note(app, session)
    assert refused.status_code == 403
    assert "Max-Age=0" in refused.headers["set-cookie"]
    assert hops == ["_checked_handle", "_checked_handle"]


def test_a_request_without_a_session_cookie_queries_nothing_for_it(
    tmp_path: Path, hops: list[str]
) -> None:
    app = rastrillo.handler(make_options(tmp_path))
    hops.clear()
    assert get(app, "/private", None, app.origin).status_code == 303
    assert get(app, "/nowhere", "A" * 43, app.origin).status_code == 404
    assert hops == ["_checked_handle"]


def test_a_revoked_session_is_refused_on_the_very_next_request(tmp_path: Path) -> None:
    app = rastrillo.handler(make_options(tmp_path))
    session = sessions.create_session(app.db, "7")
    assert get(app, "/private", session, app.origin).text == "private for 7"
    assert sessions.revoke_user(app.db, "7") == 1
    refused = get(app, "/private", session, app.origin)
    assert refused.status_code == 303
    assert "Max-Age=0" in refused.headers["set-cookie"]
    assert get(app, "/", session, app.origin).text == "-"


def test_the_session_is_checked_in_the_handles_thread_before_it_runs(tmp_path: Path) -> None:
    """The row is read in the very thread ``handle`` then runs in, so nothing of the check
    happens on the event loop's thread."""
    seen: list[tuple[int, str | None]] = []
    loop_thread: list[int] = []

    def handle(ctx: rastrillo.Context) -> Any:
        seen.append((threading.get_ident(), ctx.user_id))
        return ctx.text("ok")

    find = sessions.store.find_session
    checked_in: list[int] = []

    def recording_find(db: Any, session_id: str, **how: bool) -> Any:
        checked_in.append(threading.get_ident())
        return find(db, session_id, **how)

    routes = [rastrillo.routing.Route("GET", "/where", "where", handle)]
    app = rastrillo.handler(
        rastrillo.Options(app_dir=tmp_path, db=str(tmp_path / "t.db"), routes=routes)
    )
    session = sessions.create_session(app.db, "7")
    mp = pytest.MonkeyPatch()
    mp.setattr(rastrillo.sessions.middleware, "find_session", recording_find)
    try:

        async def main() -> httpx.Response:
            loop_thread.append(threading.get_ident())
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=app.origin) as client:
                client.cookies.set(sessions.cookie_name(app.origin), session)
                return await client.get("/where")

        assert asyncio.run(main()).text == "ok"
    finally:
        mp.undo()
    assert seen == [(checked_in[0], "7")]
    assert checked_in[0] != loop_thread[0]


def test_a_wrap_middleware_sees_the_user_before_the_router(tmp_path: Path) -> None:
    seen: list[str | None] = []

    def wrap(inner: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            seen.append(scope.get(USER_SCOPE_KEY))
            await inner(scope, receive, send)

        return middleware

    app: App = rastrillo.handler(make_options(tmp_path, wrap=wrap))
    session = sessions.create_session(app.db, "7")
    assert get(app, "/", session, app.origin).text == "7"
    sessions.revoke_user(app.db, "7")
    assert get(app, "/", session, app.origin).text == "-"
    assert seen == ["7", None]


def test_behind_a_wrap_a_signed_in_sync_request_on_sqlite_makes_one_thread_hop(
    tmp_path: Path, hops: list[str]
) -> None:
    """The row is read on the event loop before the app's middleware, and ``handle`` runs
    in the one worker-thread hop; a revoked session is refused on the very next request."""
    app = rastrillo.handler(make_options(tmp_path, wrap=lambda inner: inner))
    session = sessions.create_session(app.db, "7")
    hops.clear()
    assert get(app, "/private", session, app.origin).text == "private for 7"
    assert hops == ["_checked_handle"]
    sessions.revoke_user(app.db, "7")
    assert get(app, "/private", session, app.origin).status_code == 303
    assert hops == ["_checked_handle", "_checked_handle"]  # @require sends it to sign in


@pytest.mark.parametrize("presented", ["not a session id\n", "A" * 43, "A" * 5000])
def test_a_markers_session_id_that_is_no_live_session_signs_nobody_in(
    tmp_path: Path, presented: str
) -> None:
    """The session middleware takes a tool call's session id from its marker, unchecked
    for its form (dispatch checked that): an id no row has still finds no user, even with
    a live session's cookie beside it."""
    app = rastrillo.handler(make_options(tmp_path))
    live = sessions.create_session(app.db, "7")
    marker = ToolCallMarker(rastrillo.Actor.agent("x"), session_id=presented)

    async def marked(scope: Scope, receive: Receive, send: Send) -> None:
        scope[TOOL_CALL_SCOPE_KEY] = marker
        await app(scope, receive, send)

    assert get(marked, "/private", live, app.origin).status_code == 303
    assert get(app, "/private", live, app.origin).text == "private for 7"
