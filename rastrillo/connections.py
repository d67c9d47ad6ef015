"""Connections: how long a client may take to send its request, and how many are served.

Uvicorn times out an idle keep-alive connection but not a client that sends its
request slowly: a thousand connections that each send half a request line hold
a thousand file descriptors forever, and the server can accept no one else. So:

- the request line and headers must arrive within ``header_timeout`` of the
  connection (or of the first byte after a keep-alive wait);
- the body must arrive within ``body_timeout`` of the headers;
- at most ``max_connections`` connections are open at once: one more closes
  the connection that has waited longest for its headers, so slow clients
  cannot starve quick ones. The process's open-file limit is raised to fit
  them where the system allows, else the limit is lowered to fit it.

A connection that runs out of time is closed without an answer (the client
has not finished asking) and without a log line (a flood of slow clients must
not become a flood of log lines).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .limits import Limits

__all__ = ["BACKLOG", "fit_open_files", "protocol_class"]

log = logging.getLogger("rastrillo.serve")

BACKLOG = 128
"""Connections the kernel queues before they are accepted; asyncio accepts up to this
many at once, before the limit below can close any, so they need files to spare."""
_SPARE_FILES = BACKLOG + 64
"""Files the process needs besides its connections: an accept batch, the database, logs."""


def fit_open_files(max_connections: int) -> int:
    """Raise the open-file limit to fit ``max_connections`` where the hard limit allows;
    return the connections that fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + _SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft != resource.RLIM_INFINITY and soft < wanted:
        fitted = max(1, soft - _SPARE_FILES)
        log.warning(
            "the open-file limit is %d: serving at most %d connections, not %d",
            soft,
            fitted,
            max_connections,
        )
        return fitted
    return max_connections


def protocol_class(limits: Limits) -> type[H11Protocol]:
    """Uvicorn's h11 protocol with the timeouts and the connection limit of ``limits``.

    At the limit, a new connection closes the one that has waited longest for its
    request's headers (a slow client's, for a browser sends them at once); when no
    connection is waiting, the new one is closed instead.
    """
    waiting: dict[TimedH11Protocol, None] = {}  # oldest first

    class TimedH11Protocol(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _waiting_for: Any = None  # h11.IDLE (headers) or h11.SEND_BODY (body)

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                victim = next(iter(waiting), None)
                (victim or self)._expire()
                if victim is None:
                    return
            self._watch()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_timer()
            super().connection_lost(exc)

        def _watch(self) -> None:
            state = self.conn.their_state
            if state is h11.IDLE and self.timeout_keep_alive_task is not None:
                self._stop_timer()  # between requests: uvicorn's keep-alive timeout
            elif state in (h11.IDLE, h11.SEND_BODY):
                if self._waiting_for is not state:
                    self._stop_timer()
                    seconds = limits.header_timeout if state is h11.IDLE else limits.body_timeout
                    self._timer = self.loop.call_later(seconds, self._expire)
                    self._waiting_for = state
                    if state is h11.IDLE:
                        waiting[self] = None
            else:
                self._stop_timer()

        def _stop_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None
            self._waiting_for = None
            waiting.pop(self, None)

        def _expire(self) -> None:
            self._stop_timer()
            if not self.transport.is_closing():
                self.transport.close()

    return TimedH11Protocol
