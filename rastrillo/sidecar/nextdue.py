"""``GET /api/next-due``: when a scale-to-zero platform should wake the app.

The platform's activator asks a running instance before hibernating it. The
answer must never be wrong in the dangerous direction: ``{"due": 0}`` means
"nothing scheduled, sleep as long as you like", so a failure to compute the
answer is a 5xx, never 0, and an instant is floored so the app is woken at
worst a second early, never late.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import logging
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from rastrillo import threads
from rastrillo.awaitable import is_async_callable
from rastrillo.errors import ConfigError
from rastrillo.sidecar.lease import read_state
from rastrillo.sidecar.loop import Sidecar, as_sidecar
from rastrillo.sidecar.planner import next_due_from

if TYPE_CHECKING:
    from rastrillo.storage import Database

TOKEN_ENV = "CARLOS_ADMIN_TOKEN"

log = logging.getLogger("rastrillo.sidecar")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NO_STORE = {"Cache-Control": "no-store"}


def bearer_matches(header: str | None, token: str | None) -> bool:
    """``Bearer <token>``, scheme in any case, exactly one space; no token configured → False.

    Both sides are hashed before the constant-time compare, so neither the
    token's length nor its content leaks through timing.
    """
    if not token or header is None:
        return False
    scheme, space, given = header.partition(" ")
    same = hmac.compare_digest(
        hashlib.sha256(given.encode("latin-1")).digest(),
        hashlib.sha256(token.encode()).digest(),
    )
    return same and space == " " and scheme.lower() == "bearer"


def unix_seconds(instant: datetime | None) -> int:
    """Floored Unix seconds of an aware instant; 0 for None (nothing scheduled)."""
    return 0 if instant is None else (instant - _EPOCH) // timedelta(seconds=1)


def next_due_endpoint(
    db: Database,
    *,
    next_due: Callable[[Database], Any] | None,
    sidecar: Callable[..., Any] | Sidecar | None,
) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint: ``next_due`` (``Options.next_due``) when set, else the sidecar's record;
    with no pass recorded yet, now, since the sidecar's first pass is due at once.

    The app mounts it only when one of the two is configured, and only for GET
    and HEAD.
    """
    provider = next_due
    if provider is not None:
        _check_takes_the_database(provider)
    sidecar = as_sidecar(sidecar)

    async def compute() -> datetime | None:
        if provider is None:
            assert sidecar is not None
            state = await threads.in_thread(read_state, db, sidecar.name)
            # No pass recorded: the first (the catch-up at the sidecar's start) is due now.
            return db.clock.now() if state is None else state.next_due
        if is_async_callable(provider):
            result = await provider(db)
        else:
            result = await threads.in_thread(provider, db)
        return next_due_from(result, "Options.next_due")

    async def endpoint(request: Request) -> Response:
        if not bearer_matches(request.headers.get("authorization"), os.environ.get(TOKEN_ENV)):
            return PlainTextResponse(
                "forbidden\n", status_code=403, headers={"X-Content-Type-Options": "nosniff"}
            )
        try:
            due = await compute()
        except Exception:
            log.exception("next-due: computing the next due instant failed")
            return PlainTextResponse("next due unavailable\n", status_code=500, headers=_NO_STORE)
        return JSONResponse({"due": unix_seconds(due)}, headers=_NO_STORE)

    return endpoint


def _check_takes_the_database(provider: Callable[..., Any]) -> None:
    """Refuse, when the app is built, a ``next_due`` the first poll could not call."""
    try:
        inspect.signature(provider).bind(None)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            "Options.next_due takes one argument, the database, and returns an aware "
            f"datetime or None (def next_due(db) -> datetime | None); {provider!r}: {exc}"
        ) from None
