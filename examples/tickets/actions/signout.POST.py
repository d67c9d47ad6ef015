"""POST /signout: end this browser's session."""

import rastrillo
from rastrillo import sessions


def handle(ctx: rastrillo.Context):
    sessions.sign_out(ctx)
    return ctx.redirect("/")
