"""The tool console, ``/_rastrillo/console``: be the agent, from a browser, with no model key.

It shows the registry with each tool's schema in any provider's format, and a
form per tool that dispatches the call exactly as a model's call would be:
as a named agent, with the signed-in user's own session, through consent and
audit. So a newcomer sees the whole loop (a read runs, a write waits for the
approval page, the approved call runs once, the audit log says who) in a
browser. The console is a dev tool: on when ``Options.console`` is set or
under ``rastrillo dev`` (``RASTRILLO_DEV=1``), off otherwise, and always for
signed-in users only. Plain forms behind the app's CSRF and session
middleware; no JavaScript.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from starlette.responses import Response

from rastrillo import threads
from rastrillo.actor import Actor, describe
from rastrillo.context import Context
from rastrillo.registry.declare import Arg, ToolDef
from rastrillo.registry.errors import ConfirmRequired, ToolError
from rastrillo.registry.schemas import FORMATS, schemas
from rastrillo.registry.validate import call_args, wire
from rastrillo.routing import Route
from rastrillo.sessions import SESSION_SCOPE_KEY, require
from rastrillo.storage import Database
from rastrillo.tools import audit, consent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rastrillo.tools.calls import Result, Target

__all__ = ["CONSOLE_PATH", "console_routes", "enabled"]

CONSOLE_PATH = "/_rastrillo/console"
DEV_ENV = "RASTRILLO_DEV"
"""``rastrillo dev`` sets it to ``1`` in the process it serves: the console turns on."""
AGENT = "console"
"""The console's calls are always ``agent:console``: its rows can never pass for
another agent's, and it can run only what it proposed itself."""
AUDIT_ROWS = 10
_ARG = "arg."
"""Form fields named ``arg.<name>`` are the call's args; the rest drive the console."""
_SOURCE = "rastrillo/pages/console.py"


def enabled(asked: bool) -> bool:
    """Whether the app serves the console: asked for (``Options.console``), or under
    ``rastrillo dev``."""
    return asked or os.environ.get(DEV_ENV) == "1"


@dataclass(frozen=True)
class Outcome:
    """What one call from the console came to, as the page shows it."""

    tool: str
    args: Mapping[str, object]
    result: Result | None = None
    error: ToolError | None = None

    @property
    def approval_path(self) -> str | None:
        """The approval page's path (not the absolute URL, which names the configured origin)."""
        if isinstance(self.error, ConfirmRequired):
            return consent.approval_path(self.error.approval_id)
        return None

    @property
    def body(self) -> str:
        """The response body, JSON indented for reading (as sent when it does not parse)."""
        assert self.result is not None
        if self.result.headers.get("content-type", "").startswith("application/json"):
            with contextlib.suppress(ValueError):
                return json.dumps(self.result.json(), indent=2, ensure_ascii=False)
        return self.result.text


@dataclass(frozen=True)
class Row:
    """One audit row, who acted in words, and for a proposed write its approval as it is now."""

    record: audit.AuditRecord
    who: str
    approval: consent.ApprovalRecord | None
    approval_state: str | None


def console_routes(app: Target) -> list[Route]:
    """The console's routes for ``app`` and its registry (``app.tools``), for the app's
    router (behind its CSRF and session middleware)."""

    @require
    def show(ctx: Context) -> Response:
        return _page(app.db, app.tools, ctx, ctx.query.get("format", FORMATS[0]), None)

    @require
    async def run(ctx: Context) -> Response:
        if not ctx.actor.human:  # only a person drives the console, never a tool call
            return ctx.not_found()
        form = ctx.form
        approval_id = form.get("approval") or None
        if approval_id is None:
            tool = form.get("tool", "")
            defn = next((d for d in app.tools if d.id == tool), None)
            args: Mapping[str, object] = _form_args(defn, form)
        else:
            # Re-run an approved call exactly as it was proposed: taken from the
            # approval itself, so no form encoding can change a byte of it. As the
            # console, always: another agent's approval is refused as such.
            proposed = consent.get(app.db, approval_id)
            if proposed is None or proposed.user_id != ctx.user_id:
                return ctx.not_found()
            tool, args = proposed.tool, proposed.args
        from rastrillo.tools.calls import Call, dispatch  # the first call, not the app's start

        call = Call(
            tool=tool,
            args=args,
            actor=Actor.agent(AGENT),
            session=ctx.request.scope.get(SESSION_SCOPE_KEY),
            approval=approval_id,
        )
        try:
            result = await dispatch(app, call)
            outcome = Outcome(tool, args, result=result)
        except ToolError as exc:
            outcome = Outcome(tool, args, error=exc)
        page_format = form.get("format", FORMATS[0])
        return await threads.in_thread(_page, app.db, app.tools, ctx, page_format, outcome)

    return [
        Route("GET", CONSOLE_PATH, _SOURCE, show),
        Route("POST", CONSOLE_PATH, _SOURCE, run),
    ]


def _form_args(defn: ToolDef | None, form: Mapping[str, str]) -> dict[str, object]:
    """The call's args from the console's form, typed as a model would send them.

    A checkbox sends a bool (unchecked: false when the arg is required, else
    left out); the other fields go through `call_args`, the command line's rule.
    """
    fields = {k.removeprefix(_ARG): v for k, v in form.items() if k.startswith(_ARG)}
    if defn is None:
        return dict(fields)
    checkboxes = {name: arg for name, arg in defn.args.items() if _input_kind(arg) == "checkbox"}
    args = call_args(defn.args, {k: v for k, v in fields.items() if k not in checkboxes})
    for name, arg in checkboxes.items():
        if name in fields or arg.required:
            args[name] = name in fields
    return args


def _input_kind(arg: Arg) -> str:
    """The form control for an arg: a select for choices, a checkbox, a number or text."""
    if arg.choices is not None:
        return "select"
    if arg.type is bool:
        return "checkbox"
    return "number" if arg.type in (int, float) else "text"


def _field_text(value: object) -> str:
    """A value as its form field shows it: the wire text of a typed value."""
    if isinstance(value, bool | int | float | str):
        return wire(value)
    return ""


def _page(
    db: Database, defs: Sequence[ToolDef], ctx: Context, fmt: str, outcome: Outcome | None
) -> Response:
    try:
        rendered = schemas(defs, fmt)
    except ValueError as exc:
        return ctx.text(str(exc), status=400)
    return ctx.render(
        "_rastrillo/console.html",
        path=CONSOLE_PATH,
        formats=FORMATS,
        format=fmt,
        tools=[
            (d, json.dumps(s, indent=2, ensure_ascii=False))
            for d, s in zip(defs, rendered, strict=True)
        ],
        outcome=outcome,
        agent=AGENT,
        rows=_rows(db, ctx.user_id),
        arg_prefix=_ARG,
        field_text=_field_text,
        input_kind=_input_kind,
        int_type=int,
    )


def _rows(db: Database, user_id: str | None) -> list[Row]:
    rows = []
    now = db.clock.now()
    for record in audit.latest(db, AUDIT_ROWS, user_id=user_id):
        who = describe(record.actor, record.user_id, record.approved_by, record.approved_at)
        approval = None
        proposed = record.refusal_kind == ConfirmRequired.__name__
        if record.approval_id and proposed and record.agent == AGENT:
            approval = consent.get(db, record.approval_id)
        state = approval.state(now) if approval is not None else None
        rows.append(Row(record, who, approval, state))
    return rows
