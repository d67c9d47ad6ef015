"""The approval page, ``/_rastrillo/approvals/{id}``: where a human approves an agent's write.

Both routes sit in the app's router, behind the same CSRF and session
middleware as the app's own pages: the page is shown only to the signed-in user
the call acts for (404 for anyone else, as if it did not exist), and the
decision is a CSRF-checked POST from that user's own browser session. Plain
HTML forms, no JavaScript; the app can restyle it by providing
``templates/_rastrillo/approval.html``.
"""

from __future__ import annotations

import contextlib

from starlette.responses import Response

from rastrillo import visible
from rastrillo.agents import grants
from rastrillo.context import Context
from rastrillo.registry.confirm import confirm_parts
from rastrillo.registry.errors import ApprovalInvalid
from rastrillo.registry.validate import wire
from rastrillo.routing import Route
from rastrillo.sessions import require
from rastrillo.tools import consent

__all__ = ["approval_routes"]

_PATH = consent.APPROVAL_PATH + "{id}"


@require
def show_approval(ctx: Context) -> Response:
    """GET: the approval page, for the user the call acts for."""
    record = _own(ctx)
    if record is None:
        return ctx.not_found()
    return ctx.render(
        "_rastrillo/approval.html",
        approval=record,
        state=record.state(ctx.db.clock.now()),
        sentence=_sentence(ctx, record),
        args=[(name, *_typed(value)) for name, value in record.args.items()],
        clients=_clients(ctx, record),
    )


def _sentence(
    ctx: Context, record: consent.ApprovalRecord
) -> list[tuple[list[visible.Part], bool]]:
    """The approved sentence in pieces, each value marked (``confirm_parts``) and split for
    the page, which isolates each value's text direction; each piece's look-alikes are
    judged in the words it makes with the pieces around it (``www.{host}.com``). The
    pieces are rendered again from the tool's template and the approved values, and used
    only if they make the very sentence approved (else, a template changed since, the
    sentence is one piece)."""
    defn = next((d for d in ctx.options.tools if d.id == record.tool), None)
    pieces = [(record.sentence, False)]
    if defn is not None:
        again = confirm_parts(defn, {name: wire(value) for name, value in record.args.items()})
        if "".join(text for text, _ in again) == record.sentence:
            pieces = again
    last = len(pieces) - 1
    texts = [text for text, _ in pieces]
    return [
        (
            visible.parts(
                text,
                leading=i == 0,
                trailing=i == last,
                before="".join(texts[:i]),
                after="".join(texts[i + 1 :]),
            ),
            value,
        )
        for i, (text, value) in enumerate(pieces)
    ]


def _clients(ctx: Context, record: consent.ApprovalRecord) -> list[tuple[list[visible.Part], str]]:
    """The client of the live grant that acts as the approval's agent and was there when
    the approval was asked, shown as the agents page shows it, and when it was connected:
    which program asked. A grant made later under the name (the first one revoked, which
    ends its approvals) asked nothing here. None for an agent no grant acts as (the tool
    console, an app's own loop); more than one only for grants made before an agent name
    was kept to one live grant."""
    if record.agent is None:
        return []
    return [
        (visible.parts(grant.client), f"{grant.created_at:%Y-%m-%d %H:%M} UTC")
        for grant in grants.live_grants_named(ctx.db, record.user_id, record.agent)
        if grant.agent == record.agent and grant.created_at <= record.created_at
    ]


_KIND = {bool: "true/false", int: "whole number", float: "number", str: "text"}


def _typed(value: object) -> tuple[str, list[visible.Part]]:
    """An arg's type in words and its value exactly as it runs, split for the page.

    Text is shown between quotes and numbers and bools bare, so the human tells
    `2` from `"2"` at a glance.
    """
    kind = _KIND.get(type(value), type(value).__name__)
    if isinstance(value, str):
        return kind, [visible.Part('"'), *visible.parts(value), visible.Part('"')]
    if isinstance(value, bool | int | float):
        return kind, visible.parts(wire(value))
    return kind, visible.parts(repr(value))


@require
def post_decision(ctx: Context) -> Response:
    """POST: the page's form, Approve or Decline, recorded by `consent.decide`."""
    if _own(ctx) is None:
        return ctx.not_found()
    decision = ctx.form.get("decision")
    if decision not in ("approve", "decline"):
        return ctx.text("Choose Approve or Decline.", status=400)
    with contextlib.suppress(ApprovalInvalid):  # decided or expired: the page shows which
        consent.decide(ctx.db, ctx.request, ctx.params["id"], decision == "approve")
    return ctx.redirect(consent.APPROVAL_PATH + ctx.params["id"])


def _own(ctx: Context) -> consent.ApprovalRecord | None:
    """The approval, if the signed-in human is the user it acts for; else None."""
    if not ctx.actor.human:
        return None
    record = consent.get(ctx.db, ctx.params["id"])
    if record is None or record.user_id != ctx.user_id:
        return None
    return record


def approval_routes() -> list[Route]:
    """The approval page's routes, added to every app's router."""
    return [
        Route("GET", _PATH, "rastrillo/pages/approvals.py", show_approval),
        Route("POST", _PATH, "rastrillo/pages/approvals.py", post_decision),
    ]
