"""Security headers for pages a person sees: never framed, never cached, never sniffed.

A page on another origin (another port of the same host included) must not
frame a page with a button on it, or one click there lands on our button
(clickjacking). ``frame-ancestors 'none'`` says so to current browsers and
``X-Frame-Options: DENY`` to old ones. ``no-store`` keeps a signed-in page out
of shared and back-button caches, ``nosniff`` stops a browser from reading a
text answer as HTML or script, and ``same-origin`` keeps the page's URL (an
approval id, say) out of the ``Referer`` sent to other sites.

Every response under :data:`FRAMEWORK_PREFIX` gets them whatever the app
does; ``Options.security_headers`` adds them to the app's own responses,
where a header the app set itself is kept.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rastrillo.routing import FRAMEWORK_PREFIX, raw_path

__all__ = ["FRAMEWORK_PREFIX", "HEADERS", "SecurityHeaders", "secured"]

"""The framework's own pages (approvals, console, agents) all live under this path."""

HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", "frame-ancestors 'none'"),
    ("X-Frame-Options", "DENY"),
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
)


_RAW = tuple((name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in HEADERS)
_NAMES = frozenset(name for name, _ in _RAW)


def secured(send: Send, *, override: bool) -> Send:
    """``send`` that adds :data:`HEADERS` to the response; ``override`` replaces the
    app's own values of those headers, else they are kept."""

    async def send_secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            # The raw list, not MutableHeaders: five lookups there are five scans of it.
            headers = list(message.get("headers", ()))
            if override:
                headers = [h for h in headers if h[0].lower() not in _NAMES]
                headers += _RAW
            else:
                present = {name.lower() for name, _ in headers}
                headers += [h for h in _RAW if h[0] not in present]
            message["headers"] = headers
        await send(message)

    return send_secured


class SecurityHeaders:
    """Middleware: :data:`HEADERS` on the framework's pages always, forced; on every
    other response too when ``app_pages`` (except raw paths starting with one of
    ``exempt``, as the router reads them: ``/%73tatic/…`` is no static file), where the
    app's own values win."""

    def __init__(self, app: ASGIApp, *, app_pages: bool, exempt: tuple[str, ...] = ()) -> None:
        self.app = app
        self.app_pages = app_pages
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if scope["path"].startswith(FRAMEWORK_PREFIX):
                send = secured(send, override=True)
            elif self.app_pages and not raw_path(scope).startswith(self.exempt):
                send = secured(send, override=False)
        await self.app(scope, receive, send)
