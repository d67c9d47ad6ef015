"""Passwords, for apps that keep them: argon2id hashes and a rate-limited check.

The framework knows users only by id; the app keeps its users table and
calls :func:`check_password` with the hash it looked up (or None when there
is no such account). An unknown account costs the same hash verification as
a wrong password, so timing does not tell the two apart.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from rastrillo.sessions import throttle

if TYPE_CHECKING:
    from rastrillo.context import Context

_hasher = PasswordHasher()


def hash_password(password: str) -> str:
    """An argon2id hash of ``password``, with its salt and parameters, for the users table."""
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """Whether ``password`` matches; None (no such account) is checked against a dummy hash."""
    try:
        matched = _hasher.verify(password_hash or _dummy_hash(), password)
    except (VerificationError, InvalidHashError):
        return False
    return matched and password_hash is not None


def needs_rehash(password_hash: str) -> bool:
    """Whether a stored hash uses weaker parameters than today's; rehash at the next sign-in."""
    return _hasher.check_needs_rehash(password_hash)


def check_password(ctx: Context, account: str, password: str, password_hash: str | None) -> bool:
    """Check a sign-in attempt, rate-limited per account and per client address.

    Raises :class:`TooManyAttempts` (with ``retry_after``) once either limit
    is used up, without checking the password at all.
    """
    limit = ctx.options.sign_in_rate_limit
    address = ctx.request.client.host if ctx.request.client else "unknown"
    limits = {
        throttle.account_key(account): limit.per_account,
        throttle.address_key(address): limit.per_address,
    }
    throttle.take_attempt(ctx.db, limits, limit.window)
    ok = verify_password(password_hash, password)
    if ok:
        throttle.give_back(ctx.db, list(limits))
    return ok


@cache
def _dummy_hash() -> str:
    return _hasher.hash("not a password anyone has")
