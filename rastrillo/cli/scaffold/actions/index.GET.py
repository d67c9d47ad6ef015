"""GET /: the notes, newest first, with a form to add one."""

import rastrillo

TOOL = rastrillo.Tool(description="List the notes, newest first.")


def handle(ctx: rastrillo.Context):
    notes = ctx.db.query("SELECT id, body FROM notes ORDER BY id DESC")
    if ctx.actor.human:
        return ctx.render("index.html", notes=notes)
    return ctx.json([{"id": n.id, "body": n.body} for n in notes])
