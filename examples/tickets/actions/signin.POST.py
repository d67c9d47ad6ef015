"""POST /signin: check the email and password, start a session, go where the user was going."""

import rastrillo
import ticketing
from rastrillo import sessions


def handle(ctx: rastrillo.Context):
    email = (ctx.form.get("email") or "").strip().lower()
    next_url = sessions.safe_next(ctx.form.get("next"))
    user = ctx.db.query_one("SELECT id, password_hash FROM users WHERE email = :email", email=email)
    try:
        ok = sessions.check_password(
            ctx, email, ctx.form.get("password") or "", user.password_hash if user else None
        )
    except sessions.TooManyAttempts as exc:
        response = ticketing.sign_in_page(ctx, 429, next=next_url, email=email, error=str(exc))
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
    if not ok:
        error = "Wrong email or password."
        return ticketing.sign_in_page(ctx, 400, next=next_url, email=email, error=error)
    sessions.sign_in(ctx, user.id)
    return ctx.redirect(next_url)
