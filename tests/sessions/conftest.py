"""A small app with session routes, served on loopback by uvicorn in a thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.responses import Response

import rastrillo
from rastrillo import sessions
from rastrillo.app import App
from rastrillo.context import Context
from rastrillo.routing import Route
from rastrillo.testing import ManualClock, live_server

PASSWORD = "correct horse battery"
USERS = {"ada@example.com": "1", "bob@example.com": "2"}
_HASH = sessions.hash_password(PASSWORD)


def whoami(ctx: Context) -> Response:
    return ctx.text(ctx.user_id or "-")


def change(ctx: Context) -> Response:
    return ctx.text("changed")


def sign_in_as(ctx: Context) -> Response:
    return ctx.text(sessions.sign_in(ctx, ctx.form["user"]))


async def sign_out(ctx: Context) -> Response:
    sessions.sign_out(ctx)
    return ctx.text("signed out")


def password_sign_in(ctx: Context) -> Response:
    email = ctx.form.get("email", "")
    user_id = USERS.get(email)
    try:
        ok = sessions.check_password(
            ctx, email, ctx.form.get("password", ""), _HASH if user_id else None
        )
    except sessions.TooManyAttempts as exc:
        return Response(str(exc), 429, headers={"Retry-After": str(exc.retry_after)})
    if not ok or user_id is None:
        return ctx.text("wrong email or password", status=400)
    sessions.sign_in(ctx, user_id)
    return ctx.text("welcome")


@sessions.require
def private(ctx: Context) -> Response:
    return ctx.text(f"private for {ctx.user_id}")


@sessions.require
async def private_post(ctx: Context) -> Response:
    return ctx.text(f"posted by {ctx.user_id}")


ROUTES = [
    Route("GET", "/", "whoami", whoami),
    *(Route(m, "/change", "change", change) for m in ("POST", "PUT", "PATCH", "DELETE")),
    Route("POST", "/signin-as", "sign_in_as", sign_in_as),
    Route("POST", "/signout", "sign_out", sign_out),
    Route("POST", "/signin", "password_sign_in", password_sign_in),
    Route("GET", "/private", "private", private),
    Route("POST", "/private", "private_post", private_post),
]


def make_options(tmp_path: Path, **overrides: object) -> rastrillo.Options:
    return rastrillo.Options(
        app_dir=tmp_path, db=str(tmp_path / "test.db"), routes=ROUTES, **overrides
    )


Clock = ManualClock


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
        client = httpx.Client(base_url=app.origin, headers={"Sec-Fetch-Site": "same-origin"})
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
