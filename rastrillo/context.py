"""`ctx`: everything one request's ``handle`` needs, built fresh per request."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from rastrillo.actor import Actor
from rastrillo.errors import ConfigError
from rastrillo.registry.declare import ArgValue, ToolDef
from rastrillo.registry.validate import read_args

if TYPE_CHECKING:
    from jinja2 import Environment

    from rastrillo.options import Options
    from rastrillo.storage import Database

TOOL_CALL_SCOPE_KEY = "rastrillo.tool_call"
"""ASGI scope key of the in-process marker a dispatched tool call carries.

Only code in the same process can put a key in the scope; no HTTP header,
cookie or form field can, which is what makes the marker trustworthy."""

USER_SCOPE_KEY = "rastrillo.user_id"
"""ASGI scope key where the session middleware puts the signed-in user's id."""


def is_tool_call(scope: Mapping[str, Any]) -> bool:
    """Whether a request is a dispatched tool call: its scope carries the marker.

    The one test of it, for every layer that treats a tool call apart (CSRF, sign-in, the
    approval of a write, the framework's own endpoints); a layer that reads the marker's
    fields takes the marker itself from the scope."""
    return scope.get(TOOL_CALL_SCOPE_KEY) is not None


class FoundSession(Protocol):
    """A session found live (``sessions.store.Session``, of the layer above, is one)."""

    @property
    def id(self) -> str: ...
    @property
    def user_id(self) -> str: ...


class ToolCallMarker(NamedTuple):
    """What the dispatcher puts in the ASGI scope under ``TOOL_CALL_SCOPE_KEY``.

    Only in-process code can put it there, never an HTTP client: the CSRF
    middleware lets a request through because of it, ``ctx.actor`` is its
    ``actor`` (the agent, the user it acts for, and the approval of a write),
    and the router sends the request to its ``route`` and no other. Immutable,
    and a tuple: one is made for every call, and a tuple is the cheapest to make.
    """

    actor: Actor
    session: FoundSession | None = None
    """The call's session as the dispatcher found it (a write's), so the session
    middleware need not look it up again; None, and it looks it up as for a browser."""
    route: str | None = None
    """The tool's route path (``/notes/{id}``): the router sends the request to that
    route alone, so a value can never reach a literal sibling (``/notes/export``)."""
    params: Mapping[str, str] | None = None
    """With ``route``: its path parameters' values, as dispatch put them in the path
    (``ctx.params``); the router need not take them from the path again."""
    session_id: str | None = None
    """The session id the call presents (its session cookie's value), already known to be
    one: the session middleware takes it from here rather than parse the cookie header.
    None: the middleware reads the cookie, as for a browser's request."""
    args: Mapping[str, ArgValue | None] | None = None
    """Every declared arg's canonical value as dispatch checked it (None for an
    optional one left out): ``ctx.args`` of the request, which it then need not
    parse again from the query or form that carries the same values."""
    handled: Callable[[object], None] | None = None
    """For an approved write: called with what a sync ``handle`` returned, in the
    worker thread that ran it, when nothing of the app's stands between the router and
    the response (no ``Options.wrap``). It writes the call's outcome to its audit row
    there, so the outcome costs no thread hop of its own."""
    form: Mapping[str, str] | None = None
    """The form fields the request's body carries (not for a GET): the router takes them
    from here rather than parse the body dispatch itself encoded."""
    check: Callable[[], ToolCallMarker | None] | None = None
    """For an approved write sent to a sync ``handle`` with nothing of the app's between
    (``Target.checks_in_handle``): its session and consent are still to be checked. The
    router calls this in the worker thread that is to run ``handle``, before it, and runs
    ``handle`` only with the marker it returns; None means refused, and ``handle`` does not
    run. This marker itself carries no user, approval or args."""


def tool_call_marker(scope: Mapping[str, Any]) -> ToolCallMarker | None:
    """The request's :class:`ToolCallMarker`, for a layer that reads its fields; None for
    a request that is not a dispatched tool call."""
    marker: ToolCallMarker | None = scope.get(TOOL_CALL_SCOPE_KEY)
    return marker


class Host(Protocol):
    """What ``ctx`` reads of the app serving the request (`rastrillo.App` is one)."""

    db: Database
    options: Options
    templates: Environment


class Context:
    """The request, its path parameters and form, the actor, the user and the database.

    A new ``Context`` is made for every request and belongs to it alone.
    """

    __slots__ = ("_app", "_args", "_tool", "actor", "form", "params", "request", "user_id")

    def __init__(
        self,
        app: Host,
        request: Request,
        params: dict[str, str],
        form: Mapping[str, str],
        tool: ToolDef | None = None,
    ) -> None:
        self._app = app
        self._tool = tool
        self._args: Mapping[str, ArgValue | None] | None = None
        self.request = request
        self.params = params
        self.form = form
        self.user_id: str | None = request.scope.get(USER_SCOPE_KEY)
        marker = tool_call_marker(request.scope)
        if marker is None:
            self.actor: Actor = Actor(human=True, user_id=self.user_id)
        elif marker.actor.user_id != self.user_id:
            # A read's session is resolved by the session middleware, after dispatch.
            made = marker.actor
            self.actor = Actor(made.human, made.name, self.user_id, made.approval, made.grant)
        else:
            self.actor = marker.actor

    @property
    def db(self) -> Database:
        return self._app.db

    @property
    def options(self) -> Options:
        """The app's options, read-only by convention (``ctx.options.demo``, say)."""
        return self._app.options

    @property
    def query(self) -> QueryParams:
        return self.request.query_params

    @property
    def args(self) -> Mapping[str, ArgValue | None]:
        """The action's declared args, typed and validated from this request.

        Read from the path, then the query string for GET and HEAD or the form
        body otherwise, by the same declaration dispatch checks a tool call
        against: a browser form and a tool call get the same validation. An
        optional arg that is absent or empty is None. Raises
        ``rastrillo.ArgError`` (``.errors``: arg → problem) naming every bad
        arg; left uncaught, the app answers 400 with that message.
        """
        if self._args is None:
            if self._tool is None:
                raise ConfigError(
                    "ctx.args reads the args a TOOL declares, and this action declares none"
                )
            marker = tool_call_marker(self.request.scope)
            checked = None if marker is None else marker.args
            if checked is not None:
                # A dispatched call: dispatch checked these very values by the same
                # declaration and sent their canonical texts, which would parse back to them.
                self._args = MappingProxyType(checked)
                return self._args
            if self.request.method in ("GET", "HEAD"):
                source: Mapping[str, str] = self.request.query_params
            else:
                source = self.form
            params = self.params

            def text_of(name: str) -> str | None:
                return params[name] if name in params else source.get(name)

            self._args = MappingProxyType(read_args(self._tool.args, text_of, params))
        return self._args

    def arg(self, name: str, default: str | None = None) -> str | None:
        """A named value from the path, then the form body, then the query string."""
        for source in (self.params, self.form, self.request.query_params):
            if name in source:
                return source[name]
        return default

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """Render a Jinja2 template (autoescaped) with ``ctx`` available as ``ctx``."""
        html = self._app.templates.get_template(template).render(ctx=self, **context)
        return HTMLResponse(html, status_code=status)

    def respond(self, template: str, status: int = 200, **data: Any) -> Response:
        """One answer for both callers: JSON of ``data`` for an agent, the page for a human."""
        if self.actor.human:
            return self.render(template, status=status, **data)
        return self.json(data, status=status)

    def redirect(self, url: str, status: int = 303) -> RedirectResponse:
        """A redirect; 303 so a browser follows a POST with a GET."""
        return RedirectResponse(url, status_code=status)

    def json(self, data: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(data, status_code=status)

    def text(self, body: str, status: int = 200) -> Response:
        return Response(body, status_code=status, media_type="text/plain; charset=utf-8")

    def not_found(self) -> Response:
        return self.text("Not found", status=404)
