"""The session tests' small app: its routes and how to build its options."""

from __future__ import annotations

from pathlib import Path

from starlette.responses import Response

import rastrillo
from rastrillo import sessions
from rastrillo.context import Context
from rastrillo.routing import Route
from rastrillo.testing import ManualClock
from tests.support import LIGHT

PASSWORD = "correct horse battery"
USERS = {"ada@example.com": "1", "bob@example.com": "2"}
_HASH = LIGHT.hash(PASSWORD)  # signing in costs 0.5 ms, not 0.2 s


def whoami(ctx: Context) -> Response:
    return ctx.text(ctx.user_id or "-")


def change(ctx: Context) -> Response:
    return ctx.text("changed")


def sign_in_as(ctx: Context) -> Response:
    return ctx.text(sessions.sign_in(ctx, ctx.form["user"]))


async def sign_out(ctx: Context) -> Response:
    await sessions.sign_out_async(ctx)
    return ctx.text("signed out")


async def sign_in_on_the_loop(ctx: Context) -> Response:
    """An async handle calling the sync ``sign_in``: refused, never a write on the loop."""
    return ctx.text(sessions.sign_in(ctx, ctx.form["user"]))


async def sign_in_async(ctx: Context) -> Response:
    return ctx.text(await sessions.sign_in_async(ctx, ctx.form["user"]))


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
    Route("POST", "/signin-on-the-loop", "sign_in_on_the_loop", sign_in_on_the_loop),
    Route("POST", "/signin-async", "sign_in_async", sign_in_async),
    Route("POST", "/signin", "password_sign_in", password_sign_in),
    Route("GET", "/private", "private", private),
    Route("POST", "/private", "private_post", private_post),
]


def make_options(tmp_path: Path, **overrides: object) -> rastrillo.Options:
    return rastrillo.Options(
        app_dir=tmp_path, db=str(tmp_path / "test.db"), routes=ROUTES, **overrides
    )


Clock = ManualClock
