"""Limits on what a client may send: the request body, the connection (timeouts, count),
and how fast an agent grant may call tools.

A body is refused with 413 before any of it is read when ``Content-Length``
says it is too big, and the moment the bytes received pass the limit when it
does not (chunked). The limit is ``Options.max_body`` (1 MiB, plenty for any
form a person fills in); an action that takes more, an upload say, says so
with ``@rastrillo.body_limit(bytes)`` above its ``handle``.

An agent grant's tool calls over ``/mcp`` are paced by ``Options.mcp_call_limit``
(:class:`CallLimit`), counted by a :class:`CallCounter` in each server process.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.responses import PlainTextResponse, Response

if TYPE_CHECKING:
    from starlette.types import Message, Receive, Scope

    from rastrillo.clock import Clock

__all__ = [
    "DEFAULT_CALL_LIMIT",
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_BODY",
    "BodyTooLarge",
    "CallCounter",
    "CallLimit",
    "Limits",
    "Refused",
    "body_limit",
    "declared_too_large",
    "limited",
    "too_large",
]

DEFAULT_MAX_BODY = 1024 * 1024
"""``Options.max_body``: 1 MiB."""


@dataclass(frozen=True)
class Limits:
    """How long a request may take to arrive, and how many connections are served at once."""

    header_timeout: float = 10.0
    """Seconds for the request line and headers to arrive."""
    body_timeout: float = 60.0
    """Seconds for the whole body to arrive once the headers have."""
    max_connections: int = 1000
    """Connections open at once."""


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class CallLimit:
    """How many tool calls one agent grant may make: ``calls`` at once, and then ``calls``
    per ``window``, evenly (a bucket of ``calls`` that refills over ``window``).

    The default, 120 a minute, is more than a model waiting on each answer makes (a
    call or two a second, a few at once); a loop calling as fast as it can is refused
    after its first 120 calls, and then runs at two a second.
    """

    calls: int = 120
    window: timedelta = timedelta(minutes=1)

    def __post_init__(self) -> None:
        if isinstance(self.calls, bool) or not isinstance(self.calls, int) or self.calls < 1:
            raise ValueError(f"CallLimit.calls is a number of calls >= 1, not {self.calls!r}")
        if not isinstance(self.window, timedelta) or self.window <= timedelta(0):
            raise ValueError(
                f"CallLimit.window is a timedelta longer than zero, not {self.window!r}"
            )


DEFAULT_CALL_LIMIT = CallLimit()
"""``Options.mcp_call_limit``: 120 tool calls a minute per grant."""

_SLACK = 1e-9
"""Seconds of float rounding forgiven, so that exactly ``calls`` calls fit in a bucket."""


@dataclass(frozen=True)
class Refused:
    """A call over its key's limit, not counted."""

    retry_after: int
    """Whole seconds until the key's next call is allowed, at least one (as ``Retry-After``
    gives them)."""
    first: bool
    """The key's first refusal in a window: the one worth a log line."""


class CallCounter:
    """Calls counted per key (an agent grant) against a :class:`CallLimit`, in memory.

    A bucket per key, kept as the one instant at which it is empty again (the
    generic cell rate algorithm): a call is allowed when the bucket has room, and
    moves that instant on by ``window / calls``. So a key costs one float, and a key
    whose bucket has emptied is the same as no key and is dropped. Nothing is read
    or written but this process's memory, on the event loop (:meth:`take` never
    awaits, so calls at once are counted one by one): each process of an app
    counts alone. Time is the clock's ``monotonic()``, so a test moves it.
    """

    def __init__(self, limit: CallLimit, clock: Clock) -> None:
        self.limit = limit
        self._clock = clock
        self._window = limit.window.total_seconds()
        self._interval = self._window / limit.calls
        self._keys: dict[str, tuple[float, float]] = {}
        """key → (when its bucket is empty, until when its refusals go unreported)."""
        self._tidy_at = 1024

    def take(self, key: str) -> Refused | None:
        """Count one call of ``key``; or, when its bucket is full, count nothing and say
        how long until it has room."""
        now = self._clock.monotonic()
        empty, quiet = self._keys.get(key, (now, now))
        due = max(empty, now) + self._interval
        if due - now <= self._window + _SLACK:
            self._keys[key] = (due, quiet)
            if len(self._keys) >= self._tidy_at:
                self._tidy(now)
            return None
        first = now >= quiet
        if first:
            self._keys[key] = (empty, now + self._window)
        return Refused(max(1, math.ceil(due - now - self._window)), first)

    def _tidy(self, now: float) -> None:
        """Drop the keys whose bucket is empty and whose refusals are reported again: so
        memory holds the keys that called within a window, not every key that ever did."""
        self._keys = {k: v for k, v in self._keys.items() if max(v) > now}
        self._tidy_at = max(1024, 2 * len(self._keys))


_ATTRIBUTE = "rastrillo_max_body"

H = TypeVar("H", bound=Callable[..., Any])


class BodyTooLarge(Exception):
    """The request body passed its limit while it was read; answered 413."""


def body_limit(max_bytes: int) -> Callable[[H], H]:
    """Above ``handle``: this action accepts request bodies of up to ``max_bytes``."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"body_limit takes a number of bytes >= 0, not {max_bytes!r}")

    def mark(handle: H) -> H:
        setattr(handle, _ATTRIBUTE, max_bytes)
        return handle

    return mark


def limit_of(handle: Callable[..., Any], default: int) -> int:
    """The body limit of the action whose ``handle`` this is."""
    limit = getattr(handle, _ATTRIBUTE, None)
    return default if limit is None else int(limit)


def declared_too_large(scope: Scope, max_bytes: int) -> bool:
    """Whether ``Content-Length`` already says the body is over ``max_bytes``."""
    for key, value in scope["headers"]:
        if key == b"content-length":
            try:
                return int(value) > max_bytes
            except ValueError:
                return False
    return False


def limited(receive: Receive, max_bytes: int) -> Receive:
    """``receive`` that raises :class:`BodyTooLarge` once more than ``max_bytes`` arrived."""
    received = 0

    async def receive_limited() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > max_bytes:
                raise BodyTooLarge(f"the request body is over {max_bytes} bytes")
        return message

    return receive_limited


def too_large(max_bytes: int) -> Response:
    """The 413 for a body over ``max_bytes``, on a form's route and on ``/mcp`` alike."""
    return PlainTextResponse(
        f"Request body too large: at most {max_bytes} bytes here.", status_code=413
    )
