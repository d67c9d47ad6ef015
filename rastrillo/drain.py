"""Stopping a server without telling a client its write failed when it happened.

On SIGTERM the server stops accepting connections and waits for every request
in flight; it never abandons one (an abandoned handler thread would go on and
commit after its client was told 500). So that waiting has an end, once
``drain_timeout`` has passed a request that has not written yet is refused
at its first write transaction: the transaction never begins, and the request
is answered 503 with ``Retry-After`` (nothing of it was saved; a retry reaches
the next server). A request that has already committed a write goes on to the
end, so its client is told what happened.

The process therefore exits within ``drain_timeout`` plus the longest single
wait for the database's write lock (SQLite's busy timeout, 10 s), plus
whatever a handler does outside the database; a second signal exits at once.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from dataclasses import dataclass

from rastrillo.errors import RastrilloError

__all__ = ["DEFAULT_DRAIN_TIMEOUT", "Drain", "ShuttingDown"]

DEFAULT_DRAIN_TIMEOUT = 10.0


class ShuttingDown(RastrilloError):
    """The server is stopping; the request had written nothing and its write was refused."""


@dataclass
class _Request:
    wrote: bool = False


_current: ContextVar[_Request | None] = ContextVar("rastrillo_drain_request", default=None)


class _InRequest:
    """``with``: the request's state set for the block (a class, not a generator: every
    request enters one)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _current.set(_Request())

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


class Drain:
    """The write gate of one app's database: ``Database.write`` asks it before each write
    transaction and tells it after each commit."""

    def __init__(self) -> None:
        self.closing = threading.Event()

    def request(self) -> _InRequest:
        """Around one request's handler (the handler's threads inherit it)."""
        return _InRequest()

    def before_write(self) -> None:
        """Refuse the write of a request that has written nothing once draining ran out."""
        state = _current.get()
        if self.closing.is_set() and state is not None and not state.wrote:
            raise ShuttingDown("the server is shutting down; nothing was saved, try again")

    def committed(self) -> None:
        state = _current.get()
        if state is not None:
            state.wrote = True

    def close(self) -> None:
        """The drain time is over: from now on, refuse requests' first writes."""
        self.closing.set()
