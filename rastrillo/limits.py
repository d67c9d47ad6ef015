"""Limits on what a client may send: the request body, and the connection (timeouts, count).

A body is refused with 413 before any of it is read when ``Content-Length``
says it is too big, and the moment the bytes received pass the limit when it
does not (chunked). The limit is ``Options.max_body`` (1 MiB, plenty for any
form a person fills in); an action that takes more, an upload say, says so
with ``@rastrillo.body_limit(bytes)`` above its ``handle``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from starlette.types import Message, Receive, Scope

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_BODY",
    "BodyTooLarge",
    "Limits",
    "body_limit",
    "declared_too_large",
    "limited",
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
