"""GET /signup: the form that creates an account."""

import rastrillo


def handle(ctx: rastrillo.Context):
    return ctx.render("signup.html")
