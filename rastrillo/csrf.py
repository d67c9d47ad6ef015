"""CSRF: a request that changes state must come from the app's own pages.

For every method but GET, HEAD and OPTIONS, the first of these headers that
is present decides:

1. ``Sec-Fetch-Site``: ``same-origin`` or ``none`` passes, anything else is refused;
2. ``Origin``: passes only when equal to the app's origin (``null`` never is);
3. ``Referer``: passes only when it is a URL on the app's origin.

With none of them, the request is refused. The app's origin comes from
configuration, never from the request's ``Host``, which the client chooses.
A dispatched tool call passes on its in-process scope marker, which no HTTP
client can set. See docs/csrf.md.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from rastrillo.clock import SYSTEM_CLOCK, Clock
from rastrillo.context import is_tool_call
from rastrillo.errors import ConfigError
from rastrillo.logs import Repeats

log = logging.getLogger("rastrillo.csrf")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_ORIGIN_FETCH = ("same-origin", "none")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_NAME = re.compile(r"[a-z0-9_.-]+")


def canonical_origin(origin: str) -> str:
    """``scheme://host[:port]`` as browsers send it: lower case, no default port, no path."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"bad origin {origin!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if (
        scheme not in _DEFAULT_PORTS
        or not parts.hostname
        or parts.username is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise ConfigError(f"bad origin {origin!r}: want scheme://host[:port], http or https")
    if not _is_host(parts.hostname):
        # A browser sends an international name as its xn-- form, and nothing else as a
        # host: compared with any other spelling, every form post would be refused.
        raise ConfigError(
            f"bad origin {origin!r}: write the host as browsers send it, in ASCII letters, "
            "digits, '.', '-' (an international name as its xn-- form) or an IP address"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def _is_host(hostname: str) -> bool:
    """Whether ``hostname`` (lower case, no brackets) is a host as a browser's Origin names
    it: an IPv6 address, or ASCII letters, digits, dots, hyphens and underscores."""
    if ":" in hostname:
        try:
            ipaddress.IPv6Address(hostname)
        except ValueError:
            return False
        return True
    return _HOST_NAME.fullmatch(hostname) is not None


def refusal(method: str, headers: Headers, origin: str) -> str | None:
    """Why a request is refused, or None when it may pass; ``origin`` is canonical."""
    why = _refusal(method, headers, origin)
    return None if why is None else why[0] % why[1]


def _refusal(method: str, headers: Headers, origin: str) -> tuple[str, tuple[object, ...]] | None:
    """:func:`refusal`'s reason as a log message's template and arguments, so the log
    escapes the header's value once, as it escapes an argument."""
    if method in SAFE_METHODS:
        return None
    for name in ("sec-fetch-site", "origin", "referer"):
        values = headers.getlist(name)
        if len(values) > 1:
            return "%s sent %d times", (name, len(values))
        if values:
            return _judge(name, values[0], origin)
    return "no Sec-Fetch-Site, Origin or Referer header", ()


def _judge(name: str, value: str, origin: str) -> tuple[str, tuple[object, ...]] | None:
    if name == "sec-fetch-site":
        ok = value in _SAME_ORIGIN_FETCH
    elif name == "origin":
        ok = value == origin
    else:
        ok = value.startswith(origin + "/")
    return None if ok else ("%s %r is not %s", (name, value[:200], origin))


class CSRFMiddleware:
    """Refuse cross-site state-changing requests with a 403, and log the refusals: a
    client's first, then at most one a minute of that client's, saying how many were held
    back (anyone may send them as fast as they like, and needs no account to)."""

    def __init__(self, app: ASGIApp, origin: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self.app = app
        self.origin = canonical_origin(origin)
        self._clock = clock
        self._refused = Repeats()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] not in SAFE_METHODS
            and not is_tool_call(scope)
        ):
            reason = _refusal(scope["method"], Headers(scope=scope), self.origin)
            if reason is not None:
                # The client is whatever a trusted proxy's X-Forwarded-For said: any byte
                # a header allows, C1 controls included: it is written with %r, escaped
                # by repr in any logging, and once by the framework's own (logs.py).
                address = (scope.get("client") or ("?", 0))[0]
                due = self._refused.due(address, self._clock.monotonic())
                if due is not None:
                    why, args = reason
                    log.warning(
                        f"CSRF refused %s %r from %r: {why}%s",
                        scope["method"],
                        scope["path"],
                        address,
                        *args,
                        due.since("refusals", "of this client", "of this and other clients"),
                    )
                response = PlainTextResponse("Cross-site request refused.", status_code=403)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
