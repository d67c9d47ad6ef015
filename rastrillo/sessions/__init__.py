"""Server-side sessions, the `require` guard, and passwords for apps that keep them.

A session is a row in the app's database, so signing out and revoking are
real: the cookie of a deleted row is worth nothing. See docs/sessions.md.
"""

from rastrillo.options import RateLimit
from rastrillo.sessions.guard import (
    require,
    requires_session,
    safe_next,
    sign_in_url,
    signed_in_recently,
)
from rastrillo.sessions.middleware import (
    SESSION_SCOPE_KEY,
    SessionMiddleware,
    cookie_name,
    sign_in,
    sign_in_async,
    sign_out,
    sign_out_async,
)
from rastrillo.sessions.passwords import (
    check_password,
    hash_password,
    needs_rehash,
    verify_password,
)
from rastrillo.sessions.store import create_session, end_sessions, revoke_user
from rastrillo.sessions.throttle import TooManyAttempts

__all__ = [
    "SESSION_SCOPE_KEY",
    "RateLimit",
    "SessionMiddleware",
    "TooManyAttempts",
    "check_password",
    "cookie_name",
    "create_session",
    "end_sessions",
    "hash_password",
    "needs_rehash",
    "require",
    "requires_session",
    "revoke_user",
    "safe_next",
    "sign_in",
    "sign_in_async",
    "sign_in_url",
    "sign_out",
    "sign_out_async",
    "signed_in_recently",
    "verify_password",
]
