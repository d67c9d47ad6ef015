"""A flood of sign-ins holds at most ``passwords.ARGON2.size`` argon2 computations at once.

Each holds the hash's memory cost (64 MiB with argon2-cffi's defaults) while it runs;
a flood from many addresses, each under its limit, kept every worker thread verifying
at once. The hasher here is argon2-cffi's, every hash and verification done for real (at a
light cost: the turns are the same), held at a gate the test opens so the test sees who
runs and who waits, not how long.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from argon2 import PasswordHasher

from rastrillo import sessions, threads
from rastrillo.app import App
from rastrillo.sessions import passwords
from tests.sessions._sessions_app import PASSWORD
from tests.support import LIGHT, TLS, until


class GatedHasher(PasswordHasher):
    """argon2-cffi's hasher, each hash and verification held at ``gate`` and counted; at
    the light cost of tests.support.LIGHT, since the test counts turns, not memory."""

    def __init__(self) -> None:
        super().__init__(
            time_cost=LIGHT.time_cost, memory_cost=LIGHT.memory_cost, parallelism=LIGHT.parallelism
        )
        self.gate = threading.Event()
        self.inside = 0
        self.peak = 0
        self._count = threading.Lock()

    def hash(self, password: str | bytes, *, salt: bytes | None = None) -> str:
        with self._held():
            return super().hash(password, salt=salt)

    def verify(self, hash: str | bytes, password: str | bytes) -> bool:
        with self._held():
            return super().verify(hash, password)

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        with self._count:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
        try:
            self.gate.wait(300)  # opened by the test; the timeout only ends a failed test
            yield
        finally:
            with self._count:
                self.inside -= 1


@pytest.fixture
def hasher(monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedHasher]:
    passwords._dummy_hash()  # made with the real hasher, as a process makes it once
    gated = GatedHasher()
    monkeypatch.setattr(passwords, "_hasher", gated)
    yield gated
    gated.gate.set()


def all_arrived(hasher: GatedHasher, count: int) -> Callable[[], bool]:
    """Every one of ``count`` computations is running or waiting for its turn."""
    return lambda: hasher.inside + passwords.ARGON2.waiting == count


def test_a_sign_in_flood_from_many_addresses_verifies_at_most_argon2_size_at_once(
    serve: Callable[..., App], hasher: GatedHasher
) -> None:
    app = serve()
    flood = threads.MAX_THREADS  # every worker thread of the server in a sign-in
    bound = passwords.ARGON2.size
    assert bound < flood

    def attempt(n: int) -> httpx.Response:
        email, password = [
            ("ada@example.com", PASSWORD),  # the right password
            ("bob@example.com", "guess"),  # a wrong one
            (f"nobody{n}@example.com", PASSWORD),  # no such account
        ][n % 3]
        return httpx.post(
            app.origin + "/signin",
            data={"email": email, "password": password},
            headers={"Origin": app.origin, "X-Forwarded-For": f"198.51.100.{n + 1}"},
            timeout=60,
            verify=TLS,
        )

    with ThreadPoolExecutor(flood) as pool:
        answers = pool.map(attempt, range(flood))
        until(all_arrived(hasher, flood), "every sign-in verifying or waiting its turn", 120)
        assert hasher.inside == bound
        hasher.gate.set()
        responses = list(answers)
    assert hasher.peak == bound
    assert [r.text for r in responses[0::3]] == ["welcome"] * len(responses[0::3])
    assert {r.status_code for i, r in enumerate(responses) if i % 3} == {400}
    assert passwords.ARGON2.running == passwords.ARGON2.waiting == 0


def test_hashing_takes_its_turn_with_verifying(hasher: GatedHasher) -> None:
    """A sign-up hashes a password: it holds the same memory, and waits with the rest."""
    hashed = LIGHT.hash(PASSWORD)
    count = 3 * passwords.ARGON2.size
    with ThreadPoolExecutor(count) as pool:
        calls = [
            pool.submit(sessions.hash_password, PASSWORD)
            if n % 2
            else pool.submit(sessions.verify_password, hashed if n % 4 else None, PASSWORD)
            for n in range(count)
        ]
        until(all_arrived(hasher, count), "every computation running or waiting its turn", 120)
        assert hasher.inside == passwords.ARGON2.size
        hasher.gate.set()
        results = [call.result() for call in calls]
    assert hasher.peak == passwords.ARGON2.size
    for n, result in enumerate(results):
        if n % 2:
            assert sessions.verify_password(str(result), PASSWORD)
        else:
            assert result is bool(n % 4)
