"""GET /signin: the sign-in form; in demo mode it lists the demo accounts."""

import rastrillo
import ticketing
from rastrillo import sessions


def handle(ctx: rastrillo.Context):
    next_url = sessions.safe_next(ctx.query.get("next"))
    return ticketing.sign_in_page(ctx, next=next_url)
