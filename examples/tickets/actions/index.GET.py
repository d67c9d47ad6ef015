"""GET /: upcoming events with the tickets left."""

import rastrillo
import ticketing

TOOL = rastrillo.Tool(description="List upcoming events with how many tickets are left for each.")


def handle(ctx: rastrillo.Context):
    return ctx.respond("events.html", events=ticketing.list_events(ctx.db))
