"""A small app for the dispatch, consent and audit tests, built in code (no generate).

Each handler records what it saw in ``seen``, so a test can assert exactly
which handler ran, with which params, form, query, actor and user.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rastrillo
from rastrillo.registry.declare import ToolDef, tool_id
from rastrillo.routing import Route
from rastrillo.sessions import create_session, require

CANCEL = "Cancel order {id}? Its tickets go back on sale."


@dataclass
class Fixture:
    app: rastrillo.App
    options: rastrillo.Options
    defs: list[ToolDef]
    seen: list[dict[str, Any]] = field(default_factory=list)

    def session(self, user_id: str) -> str:
        return create_session(self.app.db, user_id)

    def ran(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.seen if s["handler"] == name]


def build(tmp_path: Path, **options: Any) -> Fixture:
    opts, defs, seen = _made(tmp_path, **options)
    return Fixture(rastrillo.handler(opts), opts, defs, seen)


def app_options(tmp_path: Path, **options: Any) -> rastrillo.Options:
    """The app's options, for a test that serves them itself (``live_server`` starts the
    app): no app started here on a database the test does not use."""
    return _made(tmp_path, **options)[0]


def _made(
    tmp_path: Path, **options: Any
) -> tuple[rastrillo.Options, list[ToolDef], list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def record(name: str, ctx: rastrillo.Context) -> None:
        seen.append(
            {
                "handler": name,
                "method": ctx.request.method,
                "params": dict(ctx.params),
                "form": dict(ctx.form),
                "query": dict(ctx.query),
                "actor": ctx.actor,
                "user_id": ctx.user_id,
            }
        )

    def order(ctx: rastrillo.Context):
        record("order", ctx)
        return ctx.text(f"order {ctx.params['id']}")

    @require
    def cancel(ctx: rastrillo.Context):
        record("cancel", ctx)
        return ctx.redirect(f"/orders/{ctx.params['id']}")

    @require
    async def me(ctx: rastrillo.Context):
        record("me", ctx)
        return ctx.json({"user": ctx.user_id, "actor": str(ctx.actor)})

    def search(ctx: rastrillo.Context):
        record("search", ctx)
        return ctx.json(dict(ctx.query))

    def boom(ctx: rastrillo.Context):
        record("boom", ctx)
        raise RuntimeError("boom")

    def secret(ctx: rastrillo.Context):
        record("secret", ctx)
        return ctx.text("secret")

    def delete_note(ctx: rastrillo.Context):
        record("delete_note", ctx)
        return ctx.text("", status=204)

    def note(ctx: rastrillo.Context):
        record("note", ctx)
        return ctx.text(f"note {ctx.params['id']}")

    def export(ctx: rastrillo.Context):  # a literal sibling of /notes/{id}: no tool
        record("export", ctx)
        return ctx.text("every note")

    @require
    def erase(ctx: rastrillo.Context):
        record("erase", ctx)
        return ctx.text(f"erased {ctx.params['id']}")

    @require
    def erase_all(ctx: rastrillo.Context):  # a literal sibling of /notes/{id}/erase: no tool
        record("erase_all", ctx)
        return ctx.text("erased every note")

    def page(ctx: rastrillo.Context):
        record("page", ctx)
        return ctx.text(f"page {ctx.params['name']}")

    routes = [
        Route("GET", "/orders/{id}", "order", order),
        Route("POST", "/orders/{id}/cancel", "cancel", cancel),
        Route("GET", "/me", "me", me),
        Route("GET", "/search", "search", search),
        Route("GET", "/boom", "boom", boom),
        Route("GET", "/secret", "secret", secret),
        Route("POST", "/secret", "secret", secret),
        Route("DELETE", "/notes/{id}", "delete_note", delete_note),
        Route("GET", "/notes/{id}", "note", note),
        Route("GET", "/notes/export", "export", export),
        Route("POST", "/notes/{id}/erase", "erase", erase),
        Route("POST", "/notes/all/erase", "erase_all", erase_all),
        Route("GET", "/{name}", "page", page),
    ]

    def tool(method: str, path: str, access=rastrillo.ToolRead, args=None, confirm=""):
        return ToolDef(
            id=tool_id(method, path),
            method=method,
            path=path,
            description=f"{method} {path}",
            access=access,
            args=args or {},
            confirm=confirm,
        )

    defs = [
        tool("GET", "/orders/{id}", args={"id": "the order id"}),
        tool(
            "POST",
            "/orders/{id}/cancel",
            rastrillo.ToolWrite,
            {"id": "the order id", "reason": "why"},
            CANCEL,
        ),
        tool("GET", "/me"),
        tool("GET", "/search", args={"q": "what", "page": "which page"}),
        tool("GET", "/boom"),
        tool("DELETE", "/notes/{id}", rastrillo.ToolWrite, {"id": "note"}, "Delete note {id}?"),
        tool("GET", "/notes/{id}", args={"id": "note"}),
        tool("POST", "/notes/{id}/erase", rastrillo.ToolWrite, {"id": "note"}, "Erase note {id}?"),
        tool("GET", "/{name}", args={"name": "a page"}),
    ]
    options.setdefault("origin", "http://testserver.local")
    options.setdefault("db", str(tmp_path / "app.db"))
    return rastrillo.Options(app_dir=tmp_path, routes=routes, tools=defs, **options), defs, seen
