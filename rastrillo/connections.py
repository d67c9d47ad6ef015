"""Connections: how long a client may take to send its request, and how many are served.

Uvicorn times out an idle keep-alive connection but not a client that sends its
request slowly: a thousand connections that each send half a request line hold
a thousand file descriptors forever, and the server can accept no one else. So:

- the request line and headers must arrive within ``header_timeout`` of the
  connection (or of the first byte after a keep-alive wait), and come to at most
  :data:`MAX_HEAD_BYTES`;
- the body must arrive within ``body_timeout`` of the headers;
- at most ``max_connections`` connections are open at once: one more closes
  the connection that has waited longest for its headers, so slow clients
  cannot starve quick ones. The process's open-file limit is raised to fit
  them where the system allows, else the limit is lowered to fit it.

A connection that runs out of time is closed without an answer (the client
has not finished asking) and without a log line (a flood of slow clients must
not become a flood of log lines). Requests are parsed by httptools, uvicorn's C
parser, which costs a request far less CPU than h11, its pure-Python one.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import resource

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from rastrillo.limits import Limits

__all__ = ["BACKLOG", "MAX_HEAD_BYTES", "fit_open_files", "protocol_class"]

log = logging.getLogger("rastrillo.serve")

BACKLOG = 128
"""Connections the kernel queues before they are accepted; asyncio accepts up to this
many at each turn of its event loop."""
_SPARE_FILES = 4 * BACKLOG + 64
"""Files the process needs besides its connections: the database, logs, and the accepted
connections the limit below cannot close yet. asyncio makes a connection's protocol two
turns after accepting it, and a connection the limit closes frees its file one turn
later; on a busy server the kernel queue fills again between turns, so up to four turns'
batches hold files above the limit at once."""

MAX_HEAD_BYTES = 16 * 1024
"""A request line and headers longer than this are answered 431 (h11's limit, uvicorn's
other parser). It is checked after each read, so a head read at once may pass it by up
to one read (256 KiB): memory stays bounded, which is what the limit is for."""

_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\ncontent-length: 28\r\n"
    b"connection: close\r\n\r\nRequest headers too large.\r\n"
)


class _Phase(enum.Enum):
    HEAD = "the request line and headers"
    BODY = "the body"


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


def protocol_class(limits: Limits) -> type[HttpToolsProtocol]:
    """Uvicorn's httptools protocol with the timeouts and the connection limit of ``limits``.

    At the limit, a new connection closes the one that has waited longest for its
    request's headers (a slow client's, for a browser sends them at once); when no
    connection is waiting, the new one is closed instead.
    """
    waiting: dict[TimedProtocol, None] = {}  # oldest first

    class TimedProtocol(HttpToolsProtocol):
        _phase: _Phase | None = None  # what the client is sending now; None: nothing
        _timed: _Phase | None = None  # what the running timer waits for
        _timer: asyncio.TimerHandle | None = None
        _head_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                victim = next(iter(waiting), None)
                (victim or self)._expire()
                if victim is None:
                    return
            self._phase = _Phase.HEAD
            self._watch()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._phase is _Phase.HEAD:
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEAD_BYTES:
                    self._refuse_head()
                    return
            self._watch()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._phase, self._head_bytes = _Phase.HEAD, 0

        def on_headers_complete(self) -> None:
            self._phase = _Phase.BODY
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._phase = None
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_timer()
            super().connection_lost(exc)

        def _watch(self) -> None:
            if self._phase is None:
                self._stop_timer()
            elif self._timed is not self._phase:
                self._stop_timer()
                head = self._phase is _Phase.HEAD
                seconds = limits.header_timeout if head else limits.body_timeout
                self._timer = self.loop.call_later(seconds, self._expire)
                self._timed = self._phase
                if head:
                    waiting[self] = None

        def _stop_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None
            self._timed = None
            waiting.pop(self, None)

        def _refuse_head(self) -> None:
            self._stop_timer()
            if not self.transport.is_closing():
                if self.cycle is None or self.cycle.response_complete:  # not mid-answer
                    self.transport.write(_TOO_LARGE)
                self.transport.close()

        def _expire(self) -> None:
            self._stop_timer()
            if not self.transport.is_closing():
                self.transport.close()

    return TimedProtocol
