"""Passwords, for apps that keep them: argon2id hashes and a rate-limited check.

The framework knows users only by id; the app keeps its users table and
calls :func:`check_password` with the hash it looked up (or None when there
is no such account). An unknown account costs the same hash verification as
a wrong password, so timing does not tell the two apart.

Each argon2 computation (a hash, a verification) holds the hash's memory cost
(64 MiB with argon2-cffi's defaults) while it runs. A flood of sign-ins from
many addresses, each under its limit, would otherwise have every worker thread
verifying at once; :data:`ARGON2` lets one per core run at a time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING

from rastrillo.sessions import throttle

if TYPE_CHECKING:
    from argon2 import PasswordHasher

    from rastrillo.context import Context

_hasher: PasswordHasher | None = None


def _argon2() -> PasswordHasher:
    """argon2's hasher, made at the first hash or check: a start and most requests need
    none, and importing argon2 is a tenth of the framework's import. (Two threads may
    both make one: it holds only its parameters.)"""
    global _hasher
    if _hasher is None:
        from argon2 import PasswordHasher

        _hasher = PasswordHasher()
    return _hasher


class Turns:
    """At most ``size`` holders at once; the others wait for a turn.

    ``running`` and ``waiting`` say how many hold a turn and how many wait for one.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.running = 0
        self.waiting = 0
        self._changed = threading.Condition()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Hold one of the turns for the ``with`` block, waiting for one first if need be."""
        with self._changed:
            self.waiting += 1
            try:
                self._changed.wait_for(lambda: self.running < self.size)
            finally:
                self.waiting -= 1
            self.running += 1
        try:
            yield
        finally:
            with self._changed:
                self.running -= 1
                self._changed.notify()


ARGON2 = Turns(max(1, getattr(os, "process_cpu_count", os.cpu_count)() or 1))
"""The argon2 computations of this process running at once, at most one per core: each is
CPU work, so more at once would finish none sooner, only hold more memory. A wait is
short: only the worker threads (``rastrillo.threads.MAX_THREADS``) can be waiting, so it
lasts a few verifications at most, the same for an unknown account as for a wrong
password. Each process (``--workers N``) has its own."""


def hash_password(password: str) -> str:
    """An argon2id hash of ``password``, with its salt and parameters, for the users table."""
    hasher = _argon2()
    with ARGON2.turn():
        return hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """Whether ``password`` matches; None (no such account) is checked against a dummy hash."""
    dummy = _dummy_hash()  # made once per process, whichever attempt comes first
    hasher = _argon2()
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        with ARGON2.turn():
            matched = hasher.verify(password_hash or dummy, password)
    except (VerificationError, InvalidHashError):
        return False
    return matched and password_hash is not None


def needs_rehash(password_hash: str) -> bool:
    """Whether a stored hash uses weaker parameters than today's; rehash at the next sign-in."""
    return _argon2().check_needs_rehash(password_hash)


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
    return hash_password("not a password anyone has")
