"""POST /signup: create an account with a hashed password and sign it in."""

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

import rastrillo
from rastrillo import sessions

MIN_PASSWORD = 10


def handle(ctx: rastrillo.Context):
    email = (ctx.form.get("email") or "").strip().lower()
    name = (ctx.form.get("name") or "").strip()
    password = ctx.form.get("password") or ""
    error = None
    if "@" not in email or not name:
        error = "Give a name and an email address."
    elif len(password) < MIN_PASSWORD:
        error = f"Choose a password of at least {MIN_PASSWORD} characters."
    if error is None:
        try:
            with ctx.db.write() as conn:
                user_id = conn.execute(
                    text(
                        "INSERT INTO users (email, name, password_hash)"
                        " VALUES (:email, :name, :hash) RETURNING id"
                    ),
                    {"email": email, "name": name, "hash": sessions.hash_password(password)},
                ).scalar_one()
        except IntegrityError:
            error = "That email address already has an account: sign in instead."
    if error is not None:
        return ctx.render("signup.html", status=400, email=email, name=name, error=error)
    sessions.sign_in(ctx, user_id)
    return ctx.redirect("/")
