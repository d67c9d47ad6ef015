"""POST /events/{id}/buy: hold tickets for the signed-in user."""

import rastrillo
import ticketing
from rastrillo import sessions

TOOL = rastrillo.Tool(
    description="Buy tickets for an event. The order is held for 15 minutes until it is paid.",
    access=rastrillo.ToolWrite,
    args={
        "id": "the event id",
        "quantity": rastrillo.Arg("how many tickets", type=int, minimum=1, maximum=10),
    },
    confirm="Buy {quantity} ticket(s) for event {id}?",
)


@sessions.require
def handle(ctx: rastrillo.Context):
    event = ticketing.get_event(ctx.db, ctx.params["id"])
    if event is None:
        return ctx.not_found()
    try:
        order_id = ticketing.buy(ctx.db, ctx.user_id, event["id"], ctx.args["quantity"])
    except rastrillo.ArgError as exc:
        return ctx.respond(
            "event.html",
            status=400,
            event=event,
            error=exc.errors["quantity"],
            max_per_order=ticketing.MAX_PER_ORDER,
        )
    except ticketing.OrderError as exc:
        return ctx.respond(
            "event.html",
            status=409,
            event=event,
            error=str(exc),
            max_per_order=ticketing.MAX_PER_ORDER,
        )
    if ctx.actor.human:
        return ctx.redirect(f"/orders/{order_id}")
    return ctx.json({"order": ticketing.get_order(ctx.db, ctx.user_id, str(order_id))}, status=201)
