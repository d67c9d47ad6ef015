"""Shared fixtures: real servers on loopback for throwaway app folders."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.scheduler.protocol import Scheduling

from tests.support import Relay, Server, free_port, missing

# Timing is measured in bench/, never in tests: no per-example deadline, which
# would only make property tests flaky on a loaded CI machine.
settings.register_profile("rastrillo", deadline=None, print_blob=True)
settings.load_profile("rastrillo")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Which characters UTF-8 encodes (``st.text()``'s alphabet) hypothesis works out once
    per checkout, about 3 s of CPU, and keeps in .hypothesis/: here, in ``make test``'s one
    collection beside mypy, not in each worker at once on a fresh clone. (After
    hypothesis's own start of the session: not while pytest loads plugins.)"""
    st.text().validate()


POSTGRES_URL_ENV = "RASTRILLO_TEST_POSTGRES_URL"
TOGETHER = {
    # the browser modules: one Playwright driver (tests/browser/conftest.py)
    "tests/browser/": "tests/browser/",
    # the two that import the Anthropic and OpenAI SDKs (about 3 s of CPU a process, and on
    # a fresh clone their first import compiles them too): imported once
    "tests/registry/test_schemas.py": "provider SDKs",
    "tests/docs/test_agents_fragments.py": "provider SDKs",
}


@contextlib.contextmanager
def _postgres_database() -> Iterator[str]:
    base = os.environ.get(POSTGRES_URL_ENV)
    if not base:
        missing(f"no PostgreSQL: set {POSTGRES_URL_ENV} or run `make test`")
    name = f"t_{secrets.token_hex(6)}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL database of the test's own, dropped after it.

    Under CI a missing server fails the test: a PostgreSQL test never skips there.
    """
    with _postgres_database() as url:
        yield url


@pytest.fixture(scope="module")
def module_pg_url() -> Iterator[str]:
    """Like ``pg_url``, one database for all the tests of a module (they share servers)."""
    with _postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The test runs twice: on a SQLite file, and on a PostgreSQL database of its own."""
    if request.param == "sqlite":
        return str(tmp_path / "app.db")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def relayed_url(pg_url: str, tmp_path: Path) -> Iterator[tuple[str, Relay]]:
    url = make_url(pg_url)
    folder = tmp_path / "relay"
    folder.mkdir()
    relay = Relay(folder, str(Path(str(url.query["host"])) / ".s.PGSQL.5432"))
    yield url.set(query={"host": str(folder)}).render_as_string(hide_password=False), relay
    with contextlib.suppress(Exception):
        relay.cut()


@pytest.fixture
def serve() -> Iterator:
    """Start ``python app.py`` for an app folder on a free loopback port."""
    servers: list[Server] = []

    def start(app_dir: Path, *args: str) -> Server:
        port = free_port()
        server = Server(app_dir, ["--addr", f"127.0.0.1:{port}", *args], f"http://127.0.0.1:{port}")
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()


class _Together(LoadScopeScheduling):
    """``make test``'s ``--dist loadscope``, where the modules under one key of ``TOGETHER``
    are one unit of work: one worker runs them one after another and pays once for what
    they share (Playwright's driver, the providers' SDKs), where each module's worker paid
    for it again."""

    def _split_scope(self, nodeid: str) -> str:
        for start, scope in TOGETHER.items():
            if nodeid.startswith(start):
                return scope
        return super()._split_scope(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    return _Together(config, log) if config.getvalue("dist") == "loadscope" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules of many server processes (the slowest) first: when ``make test`` runs
    the suite on several workers, they then finish together rather than one idling
    while another runs the longest module last."""
    items.sort(key=lambda item: item.get_closest_marker("processes") is None)
