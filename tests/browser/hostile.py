"""A hostile site: one page served from another port of the same host (same site,
another origin), for the framing and cross-origin tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def hostile_site(html: str, headers: Sequence[tuple[str, str]] = ()) -> Iterator[str]:
    """Another site on another port of the same host, serving one page with ``headers``
    (each value sent as its Latin-1 bytes, as a server may send any byte)."""
    with loopback_site(html.encode(), "text/html; charset=utf-8", headers) as root:
        yield root


@contextmanager
def loopback_site(
    body: bytes,
    content_type: str,
    headers: Sequence[tuple[str, str]] = (),
    seen: list[str] | None = None,
) -> Iterator[str]:
    """A server on a free port of this host answering every GET with ``body``: its root
    URL. ``seen`` gets the URL of each request it answered."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if seen is not None:
                seen.append(f"http://127.0.0.1:{self.server.server_address[1]}{self.path}")
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
