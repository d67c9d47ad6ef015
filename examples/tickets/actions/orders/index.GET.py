"""GET /orders: the signed-in user's orders."""

import rastrillo
import ticketing
from rastrillo import sessions

TOOL = rastrillo.Tool(description="List my orders, newest first, with their status.")


@sessions.require
def handle(ctx: rastrillo.Context):
    return ctx.respond("orders.html", orders=ticketing.list_orders(ctx.db, ctx.user_id))
