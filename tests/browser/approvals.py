"""An approval page to look at in Chromium: one write tool served, a call of it proposed by
an agent for user 1, and user 1's browser on the page that asks them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import rastrillo
from rastrillo.app import App
from rastrillo.registry.declare import ToolDef, tool_id
from rastrillo.routing import Route
from rastrillo.sessions import cookie_name, create_session, require
from rastrillo.testing import live_server
from rastrillo.tools import Call, ConfirmRequired, dispatch_sync

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@contextlib.contextmanager
def write_tool_served(
    folder: Path,
    path: str,
    description: str,
    args: Mapping[str, str | rastrillo.Arg],
    confirm: str,
    ran: list[dict[str, object]] | None = None,
) -> Iterator[App]:
    """An app whose one tool is a write, ``POST path`` (its handle answers ``done``, and
    adds its ``ctx.args`` to ``ran``), served."""

    @require
    def handle(ctx: rastrillo.Context) -> object:
        if ran is not None:
            ran.append(dict(ctx.args))
        return ctx.text("done")

    defn = ToolDef(
        id=tool_id("POST", path),
        method="POST",
        path=path,
        description=description,
        access=rastrillo.ToolWrite,
        args=args,
        confirm=confirm,
    )
    options = rastrillo.Options(
        app_dir=folder,
        db=str(folder / "app.db"),
        routes=[Route("POST", path, "handle", handle)],
        tools=[defn],
    )
    with live_server(options) as served:
        yield served


def approval_page(browser: Browser, app: App, args: Mapping[str, object]) -> Page:
    """An agent proposes the app's tool for user 1; user 1's browser opens its approval page
    (scripts off, as the pages must work without them)."""
    session = create_session(app.db, "1")
    [tool] = app.tools
    call = Call(
        tool=tool.id, args=dict(args), actor=rastrillo.Actor.agent("helper"), session=session
    )
    with ThreadPoolExecutor(1) as thread:  # Playwright holds an event loop in this one
        refused = thread.submit(dispatch_sync, app, call).exception()
    assert isinstance(refused, ConfirmRequired)
    context = browser.new_context(java_script_enabled=False)
    context.add_cookies([{"name": cookie_name(app.origin), "value": session, "url": app.origin}])
    page = context.new_page()
    page.goto(refused.url)
    return page
