"""One in-process ASGI request: how dispatch sends a checked tool call into the app.

The request enters the app at the top, as a browser's does, so it passes the same
middleware; what it carries beyond a browser's request is the marker, under
``TOOL_CALL_SCOPE_KEY``, which only code in this process can put in a scope. The
response is collected whole; nothing here follows a redirect or reads a cookie.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from urllib.parse import quote_plus, urlsplit

import anyio
from starlette.types import ASGIApp, Message, Scope

from rastrillo.context import TOOL_CALL_SCOPE_KEY, ToolCallMarker

FORM_HEADER = (b"content-type", b"application/x-www-form-urlencoded")


@dataclass(frozen=True)
class _Origin:
    """What every request to one origin shares: worked out once per origin, not per call."""

    scheme: str
    server: tuple[str | None, int]
    host: tuple[bytes, bytes]


@functools.lru_cache(maxsize=64)
def _origin(origin: str) -> _Origin:
    parts = urlsplit(origin)
    return _Origin(
        scheme=parts.scheme,
        server=(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)),
        host=(b"host", parts.netloc.encode("idna")),
    )


def request_scope(
    origin: str,
    method: str,
    raw_path: str,
    path: str,
    query: bytes,
    form: bytes | None,
    marker: ToolCallMarker,
) -> Scope:
    """The scope of one request with ``marker`` to the app at ``origin``: ``form`` its
    form-encoded body, or None for a request whose args are in the query (a GET)."""
    where = _origin(origin)
    headers = [where.host]
    if form is not None:
        headers.append(FORM_HEADER)
        headers.append((b"content-length", str(len(form)).encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": where.scheme,
        "path": path,
        "raw_path": raw_path.encode("ascii"),
        "root_path": "",
        "query_string": query,
        "headers": headers,
        "client": None,
        "server": where.server,
        "extensions": {},
        TOOL_CALL_SCOPE_KEY: marker,
    }


async def send_request(app: ASGIApp, scope: Scope, body: bytes) -> Exchange:
    """Send the request of ``scope``, with ``body``, through ``app``; the exchange holding
    its response (its ``status`` None if the app sent none). What the app raises is
    raised."""
    exchange = Exchange(body)
    try:
        await app(scope, exchange.receive, exchange.send)
    finally:
        if not exchange.finished:  # the app ended without a whole response
            exchange.finish()
    return exchange


class Exchange:
    """One request's ``receive`` and ``send``: the body it sends, and the response it
    collects."""

    __slots__ = ("body", "chunks", "ended", "finished", "headers", "sent", "status")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent = False
        self.finished = False
        self.ended: anyio.Event | None = None
        """Made only if the app waits for the disconnect before its response ends (a
        streaming response listens for it); most never do."""
        self.status: int | None = None
        """None: the app sent no response."""
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []

    async def receive(self) -> Message:
        if not self.sent:
            self.sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        if not self.finished:
            if self.ended is None:
                self.ended = anyio.Event()
            await self.ended.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = message["status"]
            self.headers = message.get("headers", [])
        elif kind == "http.response.body":
            self.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                self.finish()

    def finish(self) -> None:
        """The response is complete (or the app is done): a waiting ``receive`` returns."""
        self.finished = True
        if self.ended is not None:
            self.ended.set()


_FORM_SAFE = re.compile(r"[A-Za-z0-9_.~-]*")


def form_quote(text: str) -> str:
    """`urlencode`'s encoding of one key or value, without its cost for text that needs none."""
    return text if _FORM_SAFE.fullmatch(text) else quote_plus(text)
