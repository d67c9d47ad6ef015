"""GET /orders: the signed-in user's orders, optionally only those of one status."""

import rastrillo
import ticketing
from rastrillo import sessions

TOOL = rastrillo.Tool(
    description="List my orders, newest first, with their status.",
    args={
        "status": rastrillo.Arg(
            "only the orders with this status; leave out for all of them",
            choices=["held", "paid", "cancelled"],
            required=False,
        ),
    },
)


@sessions.require
def handle(ctx: rastrillo.Context):
    status = ctx.args["status"]
    orders = ticketing.list_orders(ctx.db, ctx.user_id, status=status)
    if not ctx.actor.human:
        return ctx.json({"orders": orders})
    return ctx.render(
        "orders.html", orders=orders, only=status, statuses=TOOL.args["status"].choices
    )
