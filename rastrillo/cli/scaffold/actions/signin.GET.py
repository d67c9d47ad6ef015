"""GET /signin: the sign-in form; `next` is where to go afterwards."""

import rastrillo
from rastrillo import sessions


def handle(ctx: rastrillo.Context):
    return ctx.render("signin.html", next=sessions.safe_next(ctx.query.get("next")))
