"""`rastrillo.run(options, argv)`: serve the app with uvicorn, or run its sidecar.

argv ``[]``, ``["serve"]`` or the flags ``--addr HOST:PORT``, ``--socket PATH``,
``--db PATH`` and ``--workers N`` serve; ``["sidecar", "run"]``, optionally with ``--db PATH``,
runs the sidecar; anything else is a usage error (exit 2). The database is
``--db``, else ``RASTRILLO_DB``, else ``Options.db``, for serving, the sidecar
and the command line alike (:func:`select_database`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import logging
import re
import signal
import socket
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from rastrillo.app import App
from rastrillo.connections import BACKLOG, fit_open_files, protocol_class
from rastrillo.errors import RastrilloError
from rastrillo.limits import Limits
from rastrillo.logs import configure_logging
from rastrillo.options import DEFAULT_ADDR, Options, select_database
from rastrillo.registry.validate import parse_int
from rastrillo.storage import Database
from rastrillo.tools import audit
from rastrillo.workers import listen, supervise

log = logging.getLogger("rastrillo.serve")

USAGE = """\
usage: python app.py [serve] [--addr HOST:PORT | --socket PATH] [--db PATH] [--workers N]
       python app.py sidecar run [--db PATH]
"""


@dataclass(frozen=True)
class ServeArgs:
    host: str
    port: int
    socket: str | None
    db: str | None
    workers: int = 1


@dataclass(frozen=True)
class SidecarArgs:
    db: str | None


class UsageError(RastrilloError):
    """The command line is not one ``run`` understands."""


class ListenError(RastrilloError):
    """The address or socket to serve on cannot be listened on (taken, not ours)."""


def parse_argv(argv: Sequence[str]) -> ServeArgs | SidecarArgs:
    """Parsed serve or ``sidecar run`` flags; raises UsageError."""
    args = list(argv)
    parser = _Parser(add_help=False, allow_abbrev=False)
    parser.add_argument("--db", default=None)
    if args[:2] == ["sidecar", "run"]:
        return SidecarArgs(parser.parse_args(args[2:]).db)
    if args[:1] == ["serve"]:
        args = args[1:]
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--addr", default=None)
    target.add_argument("--socket", default=None)
    parser.add_argument("--workers", default="1")
    ns = parser.parse_args(args)
    host, port = split_addr(ns.addr or DEFAULT_ADDR)
    if not re.fullmatch(r"[1-9][0-9]{0,2}", ns.workers):
        raise UsageError(f"--workers wants a number of processes from 1 to 999, got {ns.workers!r}")
    return ServeArgs(host, port, ns.socket, ns.db, int(ns.workers))


def split_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[v6]:PORT`` → (host, port); raises UsageError."""
    host, sep, text = addr.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    port = parse_int(text)  # ASCII digits only: str.isdigit() also takes superscripts
    if not sep or not host or port is None or not 0 <= port <= 65535:
        raise UsageError(f"--addr wants HOST:PORT, got {addr!r}")
    return host, port


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def run(options: Options, argv: Sequence[str] | None = None) -> int:
    """Serve the app or run its sidecar, as argv says; return the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        parsed = parse_argv(argv)
    except UsageError as exc:
        sys.stderr.write(f"error: {_shown(exc)}\n{USAGE}")
        return 2
    try:
        if isinstance(parsed, SidecarArgs):
            from rastrillo.sidecar import run_sidecar

            options = select_database(options, parsed.db)
            db = Database(options.database_url(), clock=options.clock)
            return run_sidecar(options.sidecar, db, options.app_dir / "migrations")
        return serve(options, parsed)
    except RastrilloError as exc:
        sys.stderr.write(f"error: {_shown(exc)}\n")
        return 1


def _shown(error: Exception) -> str:
    """An error's message as the command line prints one: escaped for the terminal."""
    from rastrillo.visible import for_terminal  # only to print an error (as the CLI does)

    return for_terminal(str(error))


def _serve_until_stopped(
    config: uvicorn.Config, sockets: list[socket.socket] | None = None
) -> None:
    """Run one server (a worker's, with ``--workers``) to its end, then log in full the
    audit rows still queued.

    The app's lifespan already gave them its flush (up to 10 s): waiting again would take
    the stop past its bound (docs/app.md, "Stopping") and into the platform's kill, which
    loses them unsaid. Here too when the server raises, and for a worker, which ends by
    ``os._exit`` and so runs no exit handler."""
    try:
        with _signals_end_quietly():
            DrainingServer(config).run(sockets=sockets)
    finally:
        audit.shutdown(timeout=0)


def serve(options: Options, args: ServeArgs) -> int:
    """Serve with uvicorn until SIGTERM or SIGINT, letting requests in flight finish."""
    configure_logging()
    options = select_database(options, args.db)
    if options.origin is None and args.socket is None:
        options = dataclasses.replace(
            options, origin=options.resolved_origin(_origin_addr(args.host, args.port))
        )
    app = App(options).start()
    config = server_config(app, host=args.host, port=args.port, uds=args.socket)
    if args.workers == 1:
        _serve_until_stopped(config)
        app.db.dispose()
        return 0
    app.db.dispose()  # each worker opens connections of its own, never the parent's
    try:
        sockets = listen(args.host, args.port, args.socket, args.workers)
    except OSError as exc:
        where = args.socket or _origin_addr(args.host, args.port)
        raise ListenError(f"cannot listen on {where}: {exc.strerror}") from exc

    try:
        return supervise(sockets, lambda sock: _serve_until_stopped(config, [sock]))
    finally:
        if args.socket is not None:
            Path(args.socket).unlink(missing_ok=True)


def server_config(app: App, **listen: Any) -> uvicorn.Config:
    """Uvicorn's config for ``app``: its connection limits and timeouts, and its lifespan
    (where ``/mcp``'s session manager runs)."""
    options = app.options
    limits = Limits(
        header_timeout=options.header_timeout,
        body_timeout=options.body_timeout,
        max_connections=fit_open_files(options.max_connections),
    )
    return _Config(
        app,
        **listen,
        # On a unix socket the proxy is whoever connects: SocketProxyHeaders, not uvicorn's
        # FORWARDED_ALLOW_IPS, says who the client is.
        proxy_headers=listen.get("uds") is None,
        http=protocol_class(limits),
        backlog=BACKLOG,
        lifespan="on",
        timeout_graceful_shutdown=None,  # never abandon a request: see rastrillo/drain.py
        log_config=None,
        server_header=False,
    )


class _Config(uvicorn.Config):
    """Uvicorn's config, with :class:`SocketProxyHeaders` around the app on a unix socket."""

    def load(self) -> None:
        super().load()
        if self.uds is not None:
            self.loaded_app = SocketProxyHeaders(self.loaded_app)


class SocketProxyHeaders:
    """On a unix socket, the client is the address the proxy added to X-Forwarded-For last.

    Only the proxy can connect to the socket (its permissions say so), and a proxy
    appends the address it saw to whatever X-Forwarded-For the client sent (nginx's
    ``$proxy_add_x_forwarded_for``): every earlier entry is the client's own choice.
    Uvicorn sees no peer address on a socket, so it either believes nothing (every
    client one address, "unknown": one client's failed sign-ins lock out everyone) or,
    with ``FORWARDED_ALLOW_IPS='*'``, the first entry, which lets a client write a
    fresh address for every guess. The scheme is the proxy's X-Forwarded-Proto.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            forwarded = _last_header(scope, b"x-forwarded-for")
            host = forwarded.rsplit(",", 1)[-1].strip() if forwarded else ""
            if host:
                scope["client"] = (host, 0)
            proto = (_last_header(scope, b"x-forwarded-proto") or "").strip().lower()
            if proto in ("http", "https"):
                ws = scope["type"] == "websocket"
                scope["scheme"] = proto.replace("http", "ws") if ws else proto
        await self.app(scope, receive, send)


def _last_header(scope: Any, name: bytes) -> str | None:
    """The last value of header ``name``: the one the proxy set, after any the client sent."""
    found = None
    for key, value in scope["headers"]:
        if key == name:
            found = value
    return None if found is None else found.decode("latin-1")


class DrainingServer(uvicorn.Server):
    """Uvicorn's server that freezes what start-up loaded out of the garbage collector's
    way and, once stopping has taken ``drain_timeout``, has the app refuse the first write
    of every request still running (``Drain.close``)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # What start-up loaded (the app, its libraries, their caches, some 100,000 objects)
        # lives as long as the process: frozen, the collector's full passes skip it instead
        # of stopping every request for tens of milliseconds to look it over again.
        gc.freeze()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        app = self.config.app
        assert isinstance(app, App)
        timer = asyncio.get_running_loop().call_later(app.options.drain_timeout, _close, app)
        try:
            await super().shutdown(sockets)
        finally:
            timer.cancel()


def _close(app: App) -> None:
    log.info("still draining after %.0f s: refusing new writes", app.options.drain_timeout)
    app.drain.close()


def _origin_addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@contextlib.contextmanager
def _signals_end_quietly() -> Iterator[None]:
    """Uvicorn re-raises the signal that stopped it; make that a clean exit 0."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, lambda *_: None)
    try:
        yield
    finally:
        for sig, handler_ in previous.items():
            signal.signal(sig, handler_)
