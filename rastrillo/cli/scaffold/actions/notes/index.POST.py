"""POST /notes: add a note."""

import rastrillo

TOOL = rastrillo.Tool(
    description="Add a note.",
    access=rastrillo.ToolWrite,
    args={"body": "the text of the note"},
    confirm="Add the note {body}?",
)


def handle(ctx: rastrillo.Context):
    body = (ctx.form.get("body") or "").strip()
    if not body:
        return ctx.text("A note needs some text.", status=400)
    ctx.db.execute("INSERT INTO notes (body) VALUES (:body)", body=body)
    if ctx.actor.human:
        return ctx.redirect("/")
    return ctx.json({"added": body}, status=201)
