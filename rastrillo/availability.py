"""When the database cannot serve: 503 with ``Retry-After``, and the readiness probe.

A database that is unreachable, or a lock wait that ran out, is not a bug in
the app: the request may well succeed in a moment, so it is answered 503 with
``Retry-After`` (never 500) and logged as one WARNING line, no traceback. A
server that is stopping refuses new writes the same way (see ``drain.py``).

``GET /readyz`` asks the database (``Database.check``): 200 ``ready``, or 503 when
it cannot answer or its SQLite file was deleted or replaced. ``GET /healthz``
stays a liveness probe that never touches the database: a platform should route
traffic by ``/readyz`` and restart by ``/healthz``, so a database outage does not
restart every server.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rastrillo import threads
from rastrillo.drain import ShuttingDown
from rastrillo.storage import Database, DatabaseUnavailable, is_unavailable

__all__ = ["RETRY_AFTER", "UnavailableMiddleware", "readiness", "retryable", "unavailable"]

RETRY_AFTER = 5
"""Seconds a client is asked to wait before retrying a 503."""

log = logging.getLogger("rastrillo.app")


def retryable(exc: BaseException) -> bool:
    """Whether ``exc`` means "not now" (database unavailable, server stopping), not a bug."""
    return isinstance(exc, ShuttingDown) or is_unavailable(exc)


def unavailable(exc: BaseException) -> Response:
    """The 503 for a :func:`retryable` error, logged as one line."""
    if isinstance(exc, ShuttingDown):
        log.info("refused a write: %s", exc)
        text = "The server is shutting down; nothing was saved. Try again."
    else:
        log.warning("database unavailable: %s", _first_line(exc))
        text = "The service is unavailable for a moment. Try again."
    return PlainTextResponse(text, status_code=503, headers={"Retry-After": str(RETRY_AFTER)})


class UnavailableMiddleware:
    """Answer 503 for a :func:`retryable` error raised before the response started
    (the session lookup, say); any other error goes on up."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracked)
        except Exception as exc:
            if started or scope["type"] != "http" or not retryable(exc):
                raise
            await unavailable(exc)(scope, receive, send)


def readiness(db: Database) -> Callable[[Request], Awaitable[Response]]:
    """``GET /readyz``: 200 when the database answers (and, on SQLite, is still the file
    first opened), else 503."""

    async def ready(request: Request) -> Response:
        try:
            await threads.in_thread(db.check)
        except DatabaseUnavailable as exc:
            return unavailable(exc)
        return PlainTextResponse("ready", headers={"Cache-Control": "no-store"})

    return ready


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
