"""POST /orders/{id}/pay: pay for a held order (the demo's stand-in for a payment)."""

import rastrillo
import ticketing
from rastrillo import sessions


@sessions.require
def handle(ctx: rastrillo.Context):
    order_id = ctx.params["id"]
    if ticketing.get_order(ctx.db, ctx.user_id, order_id) is None:
        return ctx.not_found()
    try:
        ticketing.pay(ctx.db, ctx.user_id, order_id)
    except ticketing.OrderError as exc:
        return ctx.text(str(exc), status=409)
    return ctx.redirect(f"/orders/{order_id}")
