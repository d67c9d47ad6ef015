"""Headless Chromium over the tickets demo, served by uvicorn on loopback.

Debian's ``chromium-headless-shell`` is driven through Playwright's ``executable_path``
(no browser download); ``make test`` installs it first. JavaScript is off in
every page: the pages must work as plain links and forms. Every test gets a
fresh server on its own SQLite file, and the page it ends on is saved as
``test-artifacts/<test>.png``.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rastrillo.app import App
from rastrillo.loader import load_options
from rastrillo.testing import live_server
from tests.browser.chromium import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, DESKTOP, TICKETS
from tests.support import LIGHT

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

_driver: list[Playwright] = []
_chromium: list[Browser] = []


@pytest.fixture(scope="module")
def playwright() -> Playwright:
    """Playwright's driver (a node process, about 0.85 s of CPU to start), one for the
    browser modules a worker runs one after another (tests/conftest.py hands them to one
    worker together); stopped after the last of them, below."""
    from playwright.sync_api import sync_playwright

    if not _driver:
        _driver.append(sync_playwright().start())
    return _driver[0]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The driver stops once the worker moves on to a module that does not use it, after
    the module's own fixtures (its Chromium) are torn down: Playwright's sync API holds an
    event loop in this thread while it runs, which other tests' event loops must not meet."""
    try:
        return (yield)
    finally:
        if _chromium:  # what a test opened in the shared Chromium goes with it
            for context in _chromium[0].contexts:
                context.close()
        if _driver and (
            nextitem is None
            or (nextitem.path != item.path and "playwright" not in nextitem.fixturenames)
        ):
            if _chromium:
                _chromium.pop().close()
            _driver.pop().stop()


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Browser:
    """One Chromium for the browser modules that run on the driver one after another, closed
    with it (above), where each module launched its own (about 0.7 s of CPU a launch). A
    test's pages are in contexts of their own (cookies, storage and cache apart), and the
    contexts a test leaves open are closed when it ends."""
    if not _chromium:
        _chromium.append(playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS))
    return _chromium[0]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    """The tickets demo with its console, on a fresh database; its users' password is the
    demo's, stored as a light hash (tests.support.LIGHT): a sign-in costs 0.5 ms of CPU,
    not 0.2 s."""
    options = dataclasses.replace(
        load_options(TICKETS), db=str(tmp_path / "tickets.db"), console=True
    )
    with live_server(options) as served:
        password = importlib.import_module("ticketing").DEMO_PASSWORD  # loaded by app.py
        served.db.execute("UPDATE users SET password_hash = :h", h=LIGHT.hash(password))
        yield served


@pytest.fixture
def person(
    browser: Browser, app: App, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Page]]:
    """Open a page for one more person (own cookies) on the app; the last page opened is
    screenshotted when the test ends, pass or fail."""
    contexts = []

    def open_page(viewport: dict[str, int] = DESKTOP, scripts: bool = False) -> Page:
        """Scripts are off unless asked for: every page works without them."""
        context = browser.new_context(
            base_url=app.origin, viewport=viewport, java_script_enabled=scripts
        )
        context.set_default_timeout(5000)
        contexts.append(context)
        return context.new_page()

    yield open_page
    if contexts and contexts[-1].pages:
        last = contexts[-1].pages[-1]
        last.screenshot(path=ARTIFACTS / f"{request.node.name}.png", full_page=True)
    for context in contexts:
        context.close()
