"""GET /orders/{id}/cancel: the page that asks a person to confirm a cancellation."""

import rastrillo
import ticketing
from rastrillo import sessions


@sessions.require
def handle(ctx: rastrillo.Context):
    order = ticketing.get_order(ctx.db, ctx.user_id, ctx.params["id"])
    if order is None:
        return ctx.not_found()
    return ctx.render("cancel.html", order=order)
