"""`Options`: every setting an app has, with its default.

It sits below the runtime (sessions, the sidecar, ``ctx``, the app), so each
of them can name a setting's type or default without importing the app; they
take the values they use, never the whole `Options`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from rastrillo import limits
from rastrillo.awaitable import is_async_callable
from rastrillo.clock import SYSTEM_CLOCK, Clock
from rastrillo.drain import DEFAULT_DRAIN_TIMEOUT
from rastrillo.errors import ConfigError, one_line_if_it_ends_the_script, refuse_unknown_fields
from rastrillo.storage import POOL_SIZE, database_url

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from rastrillo.registry.declare import ToolDef
    from rastrillo.routing import Route
    from rastrillo.sidecar import Sidecar
    from rastrillo.storage import Database

__all__ = [
    "DEFAULT_ADDR",
    "DEFAULT_APPROVAL_TTL",
    "DEFAULT_RECENT_SIGN_IN",
    "DEFAULT_SESSION_IDLE",
    "DEFAULT_SESSION_LIFETIME",
    "Options",
    "RateLimit",
]

DEFAULT_ADDR = "127.0.0.1:8000"
DEFAULT_SESSION_IDLE = timedelta(days=2)
DEFAULT_SESSION_LIFETIME = timedelta(days=14)
DEFAULT_APPROVAL_TTL = timedelta(minutes=10)
DEFAULT_RECENT_SIGN_IN = timedelta(minutes=15)


@dataclass(frozen=True)
class RateLimit:
    """How many failed attempts are allowed per ``window``, per account and per address."""

    per_account: int = 5
    per_address: int = 50
    window: timedelta = timedelta(minutes=15)


@dataclass(kw_only=True)
class Options:
    """Everything that makes an app; the scaffold's ``app.py`` builds it with keywords."""

    routes: Sequence[Route] = ()
    """The route table, usually ``gen.routes()``."""
    tools: Sequence[ToolDef] = ()
    """The tool registry, usually ``gen.tools()``; kept as a tuple, so that
    ``dispatch(app, OPTIONS.tools, call)`` checks a registry that cannot change under
    it, planned once."""
    wrap: Callable[[ASGIApp], ASGIApp] | None = None
    """The app's one middleware seam: given the router, return an ASGI app."""
    app_dir: Path = field(default_factory=Path.cwd)
    """Where ``templates/``, ``static/`` and ``migrations/`` are, and relative paths start."""
    db: str = "app.db"
    """A SQLite file (relative to ``app_dir``) or any SQLAlchemy URL."""
    db_pool_size: int = POOL_SIZE
    """PostgreSQL connections each server process may open, kept open for reuse."""
    db_max_overflow: int = 0
    """Connections a process may open beyond ``db_pool_size`` under load (closed after)."""
    version: str = "dev"
    """Reported by ``GET /api/version``."""
    origin: str | None = None
    """The app's public origin (``https://tickets.example``), the base of CSRF checks.
    Unset: ``RASTRILLO_ORIGIN``, else the address it serves on."""
    sidecar: Callable[..., Any] | Sidecar | None = None
    """One pass of scheduled work, run by ``sidecar run``: a function given a
    ``PassContext``, or a ``rastrillo.sidecar.Sidecar`` (see docs/sidecar.md)."""
    next_due: Callable[[Database], Any] | None = None
    """Given the database, when the app next needs waking (an aware ``datetime``, or
    ``None``), sync or async, for ``GET /api/next-due``; unset, the sidecar's record."""
    setup: Callable[[Database], None] | None = None
    """Called once with the database after migrations (demo data, for example)."""
    console: bool = False
    """Serve the tool console at ``/_rastrillo/console`` (signed-in users only); also on
    whenever ``RASTRILLO_DEV=1``, as under ``rastrillo dev`` and ``make demo``."""
    demo: bool = False
    """Demo mode: the sign-in page lists the demo accounts."""
    sign_in_path: str = "/signin"
    """Where ``@sessions.require`` sends a browser without a session."""
    session_idle: timedelta = DEFAULT_SESSION_IDLE
    """A session unused this long ends (two days by default)."""
    session_lifetime: timedelta = DEFAULT_SESSION_LIFETIME
    """A session ends this long after sign-in however much it is used (two weeks)."""
    recent_sign_in: timedelta = DEFAULT_RECENT_SIGN_IN
    """Giving an agent access (a token on the agents page, Allow on the consent page) needs
    a session made by a sign-in no longer ago than this (a quarter of an hour); an older
    one is sent to sign in again. Why: the access outlives the session, so whoever holds
    a user's cookie (stolen, or a shared computer left signed in) must not be able to
    give it; a thief has the password far more rarely than the cookie. Revoking needs no
    recent sign-in."""
    sign_in_rate_limit: RateLimit = field(default_factory=RateLimit)
    """Failed password attempts allowed per account and per client address."""
    approval_ttl: timedelta = DEFAULT_APPROVAL_TTL
    """How long an agent's proposed write waits for the user's approval (ten minutes)."""
    clock: Clock = SYSTEM_CLOCK
    """The time sessions, approvals, the audit log, sign-in limits and the sidecar go by;
    a test gives a settable one (``rastrillo.testing.ManualClock``)."""
    header_timeout: float = limits.DEFAULT_LIMITS.header_timeout
    """Seconds a client has to send a request's line and headers (10): a slow client
    cannot hold a connection open without asking anything."""
    body_timeout: float = limits.DEFAULT_LIMITS.body_timeout
    """Seconds a client has to send a request's body once its headers arrived (60)."""
    max_connections: int = limits.DEFAULT_LIMITS.max_connections
    """Connections served at once (1,000); at the limit, the one that has waited longest
    for its headers is closed to make room."""
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    """Seconds a stopping server lets requests finish before it refuses their first
    write with 503 (10); see docs/app.md for the whole bound."""
    max_body: int = limits.DEFAULT_MAX_BODY
    """The largest request body read, in bytes (1 MiB): a bigger one is answered 413 before
    it is read. An action that takes more says so with ``@rastrillo.body_limit(n)``."""
    security_headers: bool = False
    """Send the framework pages' security headers (no framing, ``no-store``, ``nosniff``,
    ``Referrer-Policy: same-origin``) on the app's own responses too, static files
    excepted; a header the app sets itself wins. The framework's pages always get them."""
    mcp: bool = False
    """Serve the tools to MCP clients at ``/mcp``, each acting for the user who granted
    it a token, with the app as its own OAuth authorization server (docs/mcp.md)."""
    mcp_call_limit: limits.CallLimit | None = limits.DEFAULT_CALL_LIMIT
    """Tool calls each agent grant may make over ``/mcp`` (120 a minute, counted in each
    server process); past it a call is refused, runs nothing and says when to call again.
    ``None``: no limit (docs/mcp.md)."""

    def __new__(cls, *args: Any, **settings: Any) -> Self:
        """A misspelt setting is one line naming the statement, the keyword and the
        setting meant (``aproval_ttl``: did you mean ``approval_ttl``?)."""
        refuse_unknown_fields("rastrillo.Options", settings, _NAMES)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        """A setting of the wrong kind is refused here, where it was written, rather than
        failing at a later request (``approval_ttl=5``, ``mcp="yes"``, ``max_body=-1``)."""
        for name, accepts, wanted in _SETTINGS:
            value = getattr(self, name)
            if not accepts(value):
                one_line_if_it_ends_the_script()
                raise ConfigError(f"Options.{name} is {wanted}, not {value!r}")
        object.__setattr__(self, "tools", tuple(self.tools))

    def resolved_origin(self, addr: str = DEFAULT_ADDR) -> str:
        origin = self.origin or os.environ.get("RASTRILLO_ORIGIN") or f"http://{addr}"
        return origin.rstrip("/")

    def database_url(self) -> str:
        """``db`` as a SQLAlchemy URL, a file path taken relative to ``app_dir``."""
        return database_url(self.db, self.app_dir)


DB_ENV = "RASTRILLO_DB"
"""The database for every process of an app (a SQLite path or a URL), set once by a platform."""


def select_database(options: Options, flag: str | None) -> Options:
    """``options`` on the database ``--db`` names, else ``RASTRILLO_DB``, else its own:
    the one rule by which every process of an app (a server, its workers, the sidecar,
    each command line tool) picks its database.

    A path given on the command line or in the environment is relative to the
    working directory, as a shell user expects; ``Options.db`` is relative to
    the app folder.
    """
    chosen = flag if flag is not None else os.environ.get(DB_ENV) or None
    if chosen is None:
        return options
    return dataclasses.replace(options, db=database_url(chosen, Path.cwd()))


def _number(least: float, *, whole: bool = False, above: bool = False) -> Callable[[Any], bool]:
    """A finite number (an int when ``whole``; never a bool) at least ``least``, or above it."""

    def accepts(value: Any) -> bool:
        kinds = int if whole else int | float
        if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
            return False
        return value > least if above else value >= least

    return accepts


def _optional(accepts: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or accepts(value)


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _listed(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _span(value: Any) -> bool:
    return isinstance(value, timedelta) and value > timedelta(0)


_HOOK = (
    _optional(lambda value: callable(value) and not is_async_callable(value)),
    "a function (def, not async def: it is called, never awaited) or None",
)
_SECONDS = (_number(0, above=True), "a number of seconds above 0")
_DURATION = (_span, "a datetime.timedelta longer than zero")
_YES_NO = (_flag, "True or False")
_SETTINGS: list[tuple[str, Callable[[Any], bool], str]] = [
    (name, *check)
    for name, check in {
        "routes": (_listed, "a list of routes, usually gen.routes()"),
        "tools": (_listed, "a list of tools, usually gen.tools()"),
        "wrap": _HOOK,
        "app_dir": (lambda value: isinstance(value, Path), "a pathlib.Path"),
        "db": (_text, "a SQLite file name or a SQLAlchemy URL"),
        "db_pool_size": (_number(1, whole=True), "a number of connections of at least 1"),
        "db_max_overflow": (_number(0, whole=True), "a number of connections of at least 0"),
        "version": (_text, "a string"),
        "origin": (_optional(_text), "an origin such as 'https://tickets.example', or None"),
        "setup": _HOOK,
        "console": _YES_NO,
        "demo": _YES_NO,
        "sign_in_path": (
            lambda value: isinstance(value, str) and value.startswith("/"),
            "a path on this site, starting with /",
        ),
        "session_idle": _DURATION,
        "session_lifetime": _DURATION,
        "recent_sign_in": _DURATION,
        "sign_in_rate_limit": (lambda value: isinstance(value, RateLimit), "a RateLimit"),
        "approval_ttl": _DURATION,
        "header_timeout": _SECONDS,
        "body_timeout": _SECONDS,
        "max_connections": (_number(1, whole=True), "a number of connections of at least 1"),
        "drain_timeout": (_number(0), "a number of seconds of at least 0"),
        "max_body": (_number(0, whole=True), "a number of bytes of at least 0"),
        "security_headers": _YES_NO,
        "mcp": _YES_NO,
        "mcp_call_limit": (
            _optional(lambda value: isinstance(value, limits.CallLimit)),
            "a rastrillo.limits.CallLimit(calls=..., window=...), or None",
        ),
    }.items()
]
"""Each setting checked when `Options` is made, what accepts a value, and what it wants.
(``sidecar`` and ``next_due`` are checked when the app is built, with what they take;
``clock`` is any `Clock`.)"""
_NAMES = tuple(f.name for f in fields(Options))
"""Every setting, in declaration order."""
