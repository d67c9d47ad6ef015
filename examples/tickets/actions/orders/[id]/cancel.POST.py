"""POST /orders/{id}/cancel: cancel an order and release its tickets."""

import rastrillo
import ticketing
from rastrillo import sessions

TOOL = rastrillo.Tool(
    description="Cancel one of my orders and release its tickets.",
    access=rastrillo.ToolWrite,
    args={"id": "the order id"},
    confirm="Cancel order {id}? Its tickets go back on sale.",
)


@sessions.require
def handle(ctx: rastrillo.Context):
    order_id = ctx.params["id"]
    if ticketing.get_order(ctx.db, ctx.user_id, order_id) is None:
        return ctx.not_found()
    try:
        ticketing.cancel(ctx.db, ctx.user_id, order_id, by=ctx.actor.describe())
    except ticketing.OrderError as exc:
        return ctx.text(str(exc), status=409)
    if ctx.actor.human:
        return ctx.redirect(f"/orders/{order_id}")
    return ctx.json({"order": ticketing.get_order(ctx.db, ctx.user_id, order_id)})
