"""GET /orders/{id}: one of the signed-in user's orders."""

import rastrillo
import ticketing
from rastrillo import sessions

TOOL = rastrillo.Tool(
    description="Show one of my orders: event, quantity, status.",
    args={"id": "the order id"},
)


@sessions.require
def handle(ctx: rastrillo.Context):
    order = ticketing.get_order(ctx.db, ctx.user_id, ctx.params["id"])
    if order is None:
        return ctx.not_found()
    return ctx.respond("order.html", order=order)
