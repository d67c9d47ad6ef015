"""`rastrillo.run(options, argv)`: serve the app with uvicorn, or run its sidecar.

argv ``[]``, ``["serve"]`` or the flags ``--addr HOST:PORT``, ``--socket PATH``,
``--db PATH`` and ``--workers N`` serve; exactly ``["sidecar", "run"]`` runs the sidecar;
anything else is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import re
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from .app import DEFAULT_ADDR, App, Options
from .errors import RastrilloError
from .logs import configure_logging
from .storage import database_url
from .workers import listen, supervise

USAGE = """\
usage: python app.py [serve] [--addr HOST:PORT | --socket PATH] [--db PATH] [--workers N]
       python app.py sidecar run
"""

DRAIN_SECONDS = 10


@dataclass(frozen=True)
class ServeArgs:
    host: str
    port: int
    socket: str | None
    db: str | None
    workers: int = 1


class UsageError(RastrilloError):
    """The command line is not one ``run`` understands."""


def parse_argv(argv: Sequence[str]) -> ServeArgs | None:
    """Parsed serve flags, or None for exactly ``sidecar run``; raises UsageError."""
    args = list(argv)
    if args == ["sidecar", "run"]:
        return None
    if args[:1] == ["serve"]:
        args = args[1:]
    parser = _Parser(add_help=False, allow_abbrev=False)
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--addr", default=None)
    target.add_argument("--socket", default=None)
    parser.add_argument("--db", default=None)
    parser.add_argument("--workers", default="1")
    ns = parser.parse_args(args)
    host, port = split_addr(ns.addr or DEFAULT_ADDR)
    if not re.fullmatch(r"[1-9][0-9]{0,2}", ns.workers):
        raise UsageError(f"--workers wants a number of processes from 1 to 999, got {ns.workers!r}")
    return ServeArgs(host, port, ns.socket, ns.db, int(ns.workers))


def split_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[v6]:PORT`` → (host, port); raises UsageError."""
    host, sep, port = addr.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--addr wants HOST:PORT, got {addr!r}")
    return host, int(port)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def run(options: Options, argv: Sequence[str] | None = None) -> int:
    """Serve the app or run its sidecar, as argv says; return the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        parsed = parse_argv(argv)
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n{USAGE}")
        return 2
    try:
        if parsed is None:
            from .sidecar import run_sidecar

            return run_sidecar(options)
        return serve(options, parsed)
    except RastrilloError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1


def serve(options: Options, args: ServeArgs) -> int:
    """Serve with uvicorn until SIGTERM or SIGINT, letting requests in flight finish."""
    configure_logging()
    changes: dict[str, object] = {}
    if args.db is not None:  # a path on the command line is relative to where it was typed
        changes["db"] = database_url(args.db, Path.cwd())
    if options.origin is None and args.socket is None:
        changes["origin"] = options.resolved_origin(_origin_addr(args.host, args.port))
    app = App(dataclasses.replace(options, **changes)).start()
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        uds=args.socket,
        lifespan="off",
        timeout_graceful_shutdown=DRAIN_SECONDS,
        log_config=None,
        server_header=False,
    )
    if args.workers == 1:
        with _signals_end_quietly():
            uvicorn.Server(config).run()
        app.db.dispose()
        return 0
    app.db.dispose()  # each worker opens connections of its own, never the parent's
    sock = listen(args.host, args.port, args.socket)

    def serve_one() -> None:
        with _signals_end_quietly():
            uvicorn.Server(config).run(sockets=[sock])

    try:
        return supervise(args.workers, sock, serve_one, grace=DRAIN_SECONDS + 5)
    finally:
        if args.socket is not None:
            Path(args.socket).unlink(missing_ok=True)


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
