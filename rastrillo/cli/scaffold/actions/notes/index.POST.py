"""POST /notes: add a note."""

import rastrillo

TOOL = rastrillo.Tool(
    description="Add a note.",
    access=rastrillo.ToolWrite,
    args={"body": rastrillo.Arg("the text of the note", min_length=1, max_length=2000)},
    confirm="Add the note {body}?",
)


def handle(ctx: rastrillo.Context):
    # ctx.args checks the form of a browser and the call of a model by the one declaration
    # above: a missing, empty or too long body is a 400 that says so, before this line.
    body = ctx.args["body"].strip()
    if not body:
        return ctx.text("A note needs some text.", status=400)
    ctx.db.execute("INSERT INTO notes (body) VALUES (:body)", body=body)
    if ctx.actor.human:
        return ctx.redirect("/")
    return ctx.json({"added": body}, status=201)
