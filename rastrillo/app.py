"""The app: `handler(options)`, the ASGI app that is served (`Options` is in options.py).

The request path, from the outside in:

1. framework endpoints answered outside the app's middleware
   (``/healthz``, ``/readyz``, ``/api/version``, ``/api/next-due``, and with
   ``Options.mcp`` ``/mcp`` and the OAuth metadata and endpoints, whose
   credentials are bearer tokens and PKCE, never a cookie);
2. the framework's middleware (CSRF, then sessions);
3. ``Options.wrap``, the app's one middleware seam;
4. the router, which builds ``ctx`` and calls the action's ``handle``.

A browser request and a dispatched tool call both enter at the top, so both
pass every layer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PackageLoader
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from rastrillo import limits, sessions, threads
from rastrillo.agents import MCP_PATH
from rastrillo.agents.endpoints import PATHS as AGENT_PATHS
from rastrillo.agents.endpoints import AgentEndpoints, Built
from rastrillo.availability import UnavailableMiddleware, readiness, retryable, unavailable
from rastrillo.awaitable import refuse_awaitable
from rastrillo.context import (
    TOOL_CALL_SCOPE_KEY,
    USER_SCOPE_KEY,
    Context,
    is_tool_call,
    tool_call_marker,
)
from rastrillo.csrf import CSRFMiddleware, canonical_origin
from rastrillo.drain import Drain
from rastrillo.errors import ConfigError
from rastrillo.options import Options
from rastrillo.pages import console
from rastrillo.pages.agents import agents_routes
from rastrillo.pages.approvals import approval_routes
from rastrillo.pages.authorize import authorize_routes
from rastrillo.pages.headers import SecurityHeaders
from rastrillo.registry.declare import ToolDef
from rastrillo.registry.validate import ArgError
from rastrillo.router import Match, Router
from rastrillo.routing import (
    HEALTH_PATH,
    NEXT_DUE_PATH,
    READY_PATH,
    STATIC_PREFIX,
    VERSION_PATH,
    Route,
    raw_path,
)
from rastrillo.sessions.middleware import RequestSession, pending_session
from rastrillo.sidecar import next_due_endpoint
from rastrillo.storage import Database
from rastrillo.tools import audit

log = logging.getLogger("rastrillo.app")

_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class App:
    """The ASGI app for one `Options`: framework endpoints, middleware, router.

    Building it only wires it; `start()` does the I/O (open the database, apply
    migrations, run ``setup``), once, from the serve path, the lifespan
    startup, `TestApp` or `handler()`.
    """

    def __init__(self, options: Options) -> None:
        self.options = options
        self.origin = canonical_origin(options.resolved_origin())
        self.db = Database(
            options.database_url(),
            clock=options.clock,
            pool_size=options.db_pool_size,
            max_overflow=options.db_max_overflow,
        )
        self.drain = Drain()
        self.db.gate = self.drain
        self._started = False
        self._start_lock = threading.Lock()
        self.templates = Environment(
            loader=ChoiceLoader(
                [
                    FileSystemLoader(options.app_dir / "templates"),
                    PackageLoader("rastrillo", "templates"),
                ]
            ),
            autoescape=True,
        )
        framework_routes = approval_routes()
        self._agents: AgentEndpoints | None = None
        if options.mcp:
            # Their tables, made at start with the framework's others; the endpoints
            # themselves are built at the first request to one.
            import rastrillo.agents.tables  # noqa: F401

            framework_routes += agents_routes(self.origin + MCP_PATH)
            framework_routes += authorize_routes(self.origin, options.tools, self.templates)
            self._agents = AgentEndpoints(self._build_agents)
        if console.enabled(options.console):
            framework_routes += console.console_routes(self)
            self.templates.globals["console_path"] = console.CONSOLE_PATH
        self.router = Router([*options.routes, *framework_routes])
        self._registry = tuple(options.tools)
        self._tools = {(defn.method, defn.path): defn for defn in options.tools}
        self._checked_in_handle = (
            {(r.method, r.path) for r in options.routes if not r.is_async}
            if options.wrap is None
            else set()
        )
        self._static = _static_files(options.app_dir / "static")
        inner: ASGIApp = self._route
        if options.wrap is not None:
            inner = options.wrap(inner)
            refuse_awaitable(inner, "Options.wrap")
        # With no middleware of the app's between, the router checks the session itself,
        # in the worker thread a sync handle runs in (one thread hop a request).
        inner = sessions.SessionMiddleware(
            inner,
            self.db,
            self.origin,
            deferred=options.wrap is None,
        )
        self._stack: ASGIApp = SecurityHeaders(
            UnavailableMiddleware(CSRFMiddleware(inner, self.origin, self.db.clock)),
            app_pages=options.security_headers,
            # Only where the static files answer: elsewhere /static/… is an app page.
            exempt=(STATIC_PREFIX,) if self._static is not None else (),
        )
        # The OAuth endpoints under /_rastrillo/ are framework pages as much as the approval
        # page is: they get its headers, their 503s too, though they skip its middleware.
        self._agent_stack = SecurityHeaders(self._agent_endpoint, app_pages=False)
        self._endpoints: dict[str, Callable[[Request], Any]] = {
            HEALTH_PATH: _healthz,
            READY_PATH: _get_only(readiness(self.db)),
            VERSION_PATH: _get_only(self._version),
        }
        if options.next_due is not None or options.sidecar is not None:
            self._endpoints[NEXT_DUE_PATH] = _get_only(
                next_due_endpoint(self.db, next_due=options.next_due, sidecar=options.sidecar)
            )

    @property
    def approval_ttl(self) -> timedelta:
        """How long an agent's proposed write waits for approval (``Options.approval_ttl``)."""
        return self.options.approval_ttl

    @property
    def tools(self) -> Sequence[ToolDef]:
        """The app's tool registry (``Options.tools``): what ``dispatch(app, call)`` checks.

        A tuple, so dispatch works out what each tool's call takes once, not per call."""
        return self._registry

    def checks_in_handle(self, defn: ToolDef) -> bool:
        """Whether a tool call's ``ToolCallMarker.check`` is run in the worker thread its
        ``handle`` runs in, just before it: a sync ``handle`` with no ``Options.wrap``."""
        return (defn.method, defn.path) in self._checked_in_handle

    def _build_agents(self) -> Built:
        """``/mcp`` and the OAuth endpoints, at the first request to one (the MCP SDK is
        imported here, not at start: see :mod:`rastrillo.agents.endpoints`)."""
        from rastrillo.agents.mcp import McpEndpoint
        from rastrillo.agents.oauth import Authority

        options = self.options
        endpoint = McpEndpoint(
            self,
            options.tools,
            self.db,
            self.origin,
            name=options.app_dir.name or "rastrillo",
            version=options.version,
            state_ttl=options.approval_ttl.total_seconds(),
            call_limit=options.mcp_call_limit,
            max_body=options.max_body,
        )
        oauth = {r.path: r.handle for r in Authority(self.db, self.origin).routes()}
        return Built(endpoint, oauth)

    def start(self) -> App:
        """Open the database, apply migrations and run ``setup``; later calls do nothing.

        A database that does not answer (a server down, a wrong host) raises
        `DatabaseUnavailable` saying so, which ``python app.py`` prints as one line.
        """
        with self._start_lock:
            if not self._started:
                self.db.start(self.options.app_dir / "migrations", self.options.setup)
                self._started = True
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        # A tool call goes to its tool's route only, never /mcp or a framework endpoint.
        if scope["type"] == "http" and not is_tool_call(scope):
            path = raw_path(scope)
            if self._agents is not None and path in AGENT_PATHS:
                await self._agent_stack(scope, receive, send)
                return
            endpoint = self._endpoints.get(path)
        else:
            endpoint = None
        if endpoint is not None:
            response = await endpoint(Request(scope, receive))
            await response(scope, receive, send)
            return
        await self._stack(scope, receive, send)

    async def _agent_endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._agents is not None
        try:
            endpoint = await self._agents.app_for(raw_path(scope))
        except Exception as exc:
            if not retryable(exc):
                raise
            await unavailable(exc)(scope, receive, send)
            return
        await endpoint(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async with AsyncExitStack() as running:
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    try:
                        await threads.in_thread(self.start)
                        if self._agents is not None:
                            # Where /mcp's session manager runs, once an agent comes.
                            await running.enter_async_context(self._agents.serving())
                    except BaseException as exc:
                        await send({"type": "lifespan.startup.failed", "message": str(exc)})
                        raise
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    break
        await threads.in_thread(self._audit_written)
        await send({"type": "lifespan.shutdown.complete"})

    def _audit_written(self) -> None:
        """At the end of the lifespan, the calls' audit rows still queued are written:
        the app may stop without its process ending (a test's, one mounted in another)."""
        try:
            audit.flush(self.db)
        except audit.AuditNotWritten as exc:  # each row is logged in full, or still retried
            log.warning("at shutdown: %s", exc)

    async def _version(self, request: Request) -> Response:
        return JSONResponse({"version": self.options.version})

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        marker = tool_call_marker(scope)
        tool_route = None if marker is None else marker.route
        if marker is None or tool_route is None:
            path = raw_path(scope)
            if self._static is not None and path.startswith(STATIC_PREFIX):
                await self._static(scope, receive, send)
                return
            found = self.router.match(scope["method"], path)
        else:
            found = self.router.match_route(scope["method"], tool_route, marker.params or {})
        if found is not None:
            response: Response = await self._call(found, scope, receive)
        elif tool_route is None and (allowed := self.router.allowed_methods(path)):
            response = PlainTextResponse(
                "Method not allowed", status_code=405, headers={"Allow": ", ".join(allowed)}
            )
        else:
            response = PlainTextResponse("Not found", status_code=404)
        await response(scope, receive, send)

    async def _call(self, match: Match, scope: Scope, receive: Receive) -> Response:
        route = match.route
        max_body = limits.limit_of(route.handle, self.options.max_body)
        if limits.declared_too_large(scope, max_body):
            return limits.too_large(max_body)
        request = Request(scope, limits.limited(receive, max_body))
        pending = pending_session(scope)
        if pending is not None and route.is_async:
            # An async handle's session is checked first (on SQLite on the event loop); a
            # sync handle's in the hop it runs in, by _checked_handle, after its form is
            # read here.
            await pending.check_now(scope)
            pending = None
        try:
            form = await _read_form(request, route, max_body, pending is not None)
        except limits.BodyTooLarge:
            return limits.too_large(max_body)
        except (MultiPartException, HTTPException) as exc:
            return PlainTextResponse(f"Bad form: {_detail(exc)}", status_code=400)
        except ClientDisconnect:  # nobody is left to read an answer
            return Response(status_code=400)
        tool = self._tools.get((route.method, route.path))
        try:
            with self.drain.request():
                if route.is_async:
                    if (marker := tool_call_marker(scope)) is not None and marker.check:
                        raise RuntimeError("a tool call's check reached an async handle")
                    response = await route.handle(Context(self, request, match.params, form, tool))
                else:
                    response = await threads.in_thread(
                        self._checked_handle, route, pending, request, match.params, form, tool
                    )
        except limits.BodyTooLarge:
            return limits.too_large(max_body)
        except ClientDisconnect:
            return Response(status_code=400)
        except ArgError as exc:
            return PlainTextResponse(str(exc), status_code=400)
        except Exception as exc:
            if retryable(exc):
                return unavailable(exc)
            log.exception("%s %s (%s) raised", route.method, route.path, route.source)
            return PlainTextResponse("Internal Server Error", status_code=500)
        if not isinstance(response, Response):
            log.error("%s: handle returned %r, not a Response", route.source, type(response))
            return PlainTextResponse("Internal Server Error", status_code=500)
        return response

    def _checked_handle(
        self,
        route: Route,
        pending: RequestSession | None,
        request: Request,
        params: dict[str, str],
        form: Mapping[str, str],
        tool: ToolDef | None,
    ) -> Any:
        """A sync ``handle``, in a worker thread: the session's row checked first, there (a
        dispatched write's with its consent: ``ToolCallMarker.check``), and a dispatched
        write's outcome written to its audit row after it (``ToolCallMarker.handled``)."""
        marker = tool_call_marker(request.scope)
        if marker is not None and marker.check is not None:
            checked = marker = marker.check()
            if checked is None:  # refused: handle does not run, and dispatch says why
                return PlainTextResponse("Refused", status_code=403)
            request.scope[TOOL_CALL_SCOPE_KEY] = checked
            if pending is not None:
                pending.found(request.scope, checked.session)
        elif pending is not None:
            pending.check(request.scope)
        response = route.handle(Context(self, request, params, form, tool))
        # With no Options.wrap, nothing of the app's stands between: this is the response.
        if marker is not None and marker.handled is not None and self.options.wrap is None:
            marker.handled(response)
        return response


def _has_form(request: Request) -> bool:
    return request.method not in ("GET", "HEAD") and request.headers.get(
        "content-type", ""
    ).startswith(_FORM_TYPES)


async def _read_form(
    request: Request, route: Route, max_body: int, unchecked_session: bool
) -> Mapping[str, str]:
    """The form fields of a form POST; none (and no byte read) when ``handle`` needs a
    session and the request presents none, for it will refuse without looking. A presented
    session still ``unchecked_session`` is checked after this, before ``handle``. One
    field may fill the whole body; the parser keeps its limits of 1,000 fields and 1,000
    files. A dispatched call's fields come with its marker, the very ones its body
    carries, so they are not parsed again."""
    if not _has_form(request):
        return {}
    marker = tool_call_marker(request.scope)
    if marker is not None and marker.form is not None:
        return marker.form
    if (
        not unchecked_session
        and request.scope.get(USER_SCOPE_KEY) is None
        and sessions.requires_session(route.handle)
    ):
        return {}
    parsed = await request.form(max_part_size=max_body)
    return {k: v for k, v in parsed.multi_items() if isinstance(v, str)}


def _detail(exc: MultiPartException | HTTPException) -> str:
    return exc.message if isinstance(exc, MultiPartException) else str(exc.detail)


def handler(options: Options) -> App:
    """The app's ASGI app, started: what is served, and what tool calls are dispatched to.

    `App(options)` then `start()`, for a script or a test that uses the app at
    once with no server and no lifespan.
    """
    if not isinstance(options, Options):
        raise ConfigError("handler() takes a rastrillo.Options")
    return App(options).start()


def _get_only(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
    async def guarded(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return PlainTextResponse(
                "Method not allowed", status_code=405, headers={"Allow": "GET, HEAD"}
            )
        return await endpoint(request)

    return guarded


@_get_only
async def _healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


def _static_files(directory: Path) -> ASGIApp | None:
    if not directory.is_dir():
        return None
    files = StaticFiles(directory=directory)

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        segments = raw_path(scope)[len(STATIC_PREFIX) :].split("/")
        path = "/".join(unquote(s) for s in segments)
        if path.count("/") != len(segments) - 1:  # an encoded slash names no file
            response: Response = PlainTextResponse("Not found", status_code=404)
        else:
            try:
                response = await files.get_response(path, scope)
            except HTTPException as exc:  # a missing file or a POST: the client's mistake
                response = PlainTextResponse(exc.detail, exc.status_code, headers=exc.headers)
        await response(scope, receive, send)

    return serve
