"""`ctx`: everything one request's ``handle`` needs, built fresh per request."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from .actor import Actor

if TYPE_CHECKING:
    from .app import App, Options
    from .storage import Database

TOOL_CALL_SCOPE_KEY = "rastrillo.tool_call"
"""ASGI scope key of the in-process marker a dispatched tool call carries.

Only code in the same process can put a key in the scope; no HTTP header,
cookie or form field can, which is what makes the marker trustworthy."""

USER_SCOPE_KEY = "rastrillo.user_id"
"""ASGI scope key where the session middleware puts the signed-in user's id."""


class Context:
    """The request, its path parameters and form, the actor, the user and the database.

    A new ``Context`` is made for every request and belongs to it alone.
    """

    __slots__ = ("_app", "actor", "form", "params", "request", "user_id")

    def __init__(
        self,
        app: App,
        request: Request,
        params: dict[str, str],
        form: Mapping[str, str],
    ) -> None:
        self._app = app
        self.request = request
        self.params = params
        self.form = form
        self.user_id: str | None = request.scope.get(USER_SCOPE_KEY)
        marker = request.scope.get(TOOL_CALL_SCOPE_KEY)
        if marker is None:
            self.actor: Actor = Actor(human=True, user_id=self.user_id)
        elif marker.actor.user_id != self.user_id:
            # A read's session is resolved by the session middleware, after dispatch.
            self.actor = dataclasses.replace(marker.actor, user_id=self.user_id)
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
