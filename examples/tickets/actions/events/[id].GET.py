"""GET /events/{id}: one event, with a form to buy tickets."""

import rastrillo
import ticketing

TOOL = rastrillo.Tool(
    description="Show one event: name, venue, start time and tickets left.",
    args={"id": "the event id, from the list of events"},
)


def handle(ctx: rastrillo.Context):
    event = ticketing.get_event(ctx.db, ctx.params["id"])
    if event is None:
        return ctx.not_found()
    return ctx.respond("event.html", event=event, max_per_order=ticketing.MAX_PER_ORDER)
