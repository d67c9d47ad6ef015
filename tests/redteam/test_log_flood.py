"""What anyone may send floods no log.

Presenting a session made for an agent's calls outside a tool call is worth a warning,
once: it says the id leaked. Each such request wrote one, so whoever holds the id (no
account needed) wrote a line of the app's log per request, in any app that configured its
own logging (``python app.py``'s held repeats back by message, not by session). Now: the
first, then at most one a minute per session, saying how many were held back; in bounded
memory whatever is sent. So too a cross-site POST's refusal. On a fake clock, no waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from rastrillo.logs import Due, Repeats
from rastrillo.sessions import create_session
from rastrillo.sessions.store import find_session
from rastrillo.storage import Database
from rastrillo.testing import ManualClock, TestApp
from tests.agents.mcp_app import make_app


@pytest.fixture
def db(tmp_path) -> Iterator[Database]:
    database = Database(str(tmp_path / "app.db"), clock=ManualClock())
    database.start(None)
    yield database
    database.dispose()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "rastrillo.sessions" and r.levelno == logging.WARNING
    ]


def test_a_leaked_agent_session_presented_again_and_again_is_one_line_a_minute(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    leaked, other = (create_session(db, "3", agent_only=True) for _ in range(2))
    clock = db.clock
    assert isinstance(clock, ManualClock)
    with caplog.at_level(logging.WARNING, logger="rastrillo.sessions"):
        for _ in range(500):
            assert find_session(db, leaked, tool_call=False) is None
        assert len(warnings(caplog)) == 1
        assert find_session(db, other, tool_call=False) is None  # another session: its own
        assert len(warnings(caplog)) == 2
        clock.advance(59)
        find_session(db, leaked, tool_call=False)
        assert len(warnings(caplog)) == 2
        clock.advance(1)
        find_session(db, leaked, tool_call=False)
    first, _, later = warnings(caplog)
    assert "held back" not in first and leaked not in first + later
    assert later.endswith("(500 more presentations of it held back since the last line)")
    assert find_session(db, leaked, tool_call=True) is not None  # the agent's calls act on


def test_no_number_of_keys_grows_the_memory_or_the_lines_past_a_bound() -> None:
    repeats = Repeats(window=60, most=100)
    written = [k for k in range(100_000) if repeats.due(str(k), now=0.0) is not None]
    # The first 100 keys are remembered; every other shares one count, written once.
    assert len(written) == 101 and len(repeats) <= 101
    assert [repeats.due(str(k), now=30.0) for k in (5, 99_999)] == [None, None]
    # A window later the keys whose window passed are forgotten and make room.
    later = [k for k in range(1000, 1300) if repeats.due(str(k), now=61.0) is not None]
    assert len(later) == 101 and len(repeats) <= 101
    assert repeats.due("0", now=61.0) is None  # no room left: it counts with the others


def test_a_key_is_forgotten_the_moment_its_window_passes_though_none_had_room_before() -> None:
    """Found full, the memory is not searched again till its oldest key's window passes
    (a flood of new keys then costs no pass over the remembered ones): not a moment later."""
    repeats = Repeats(window=60, most=3)
    for key, now in (("a", 0.0), ("b", 10.0), ("c", 20.0)):
        assert repeats.due(key, now=now) is not None
    assert repeats.due("d", now=30.0) is not None  # no room: the shared count's first line
    assert repeats.due("e", now=59.9) is None  # still none: it counts with "d"
    assert repeats.due("a", now=59.9) is None  # and "a" is remembered, inside its window
    assert repeats.due("f", now=60.0) == Due(0, False)  # "a"'s window passed: "f" has its room
    assert repeats.due("g", now=60.0) is None  # full again: with the others
    assert repeats.due("h", now=70.0) == Due(0, False)  # "b"'s passed
    assert repeats.due("a", now=70.0) is None  # "a" forgotten: it counts with the others now


def test_cross_site_posts_from_one_client_write_one_warning_a_minute(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    """Any program, no account needed, may post with a foreign ``Origin`` as fast as it
    likes: each refusal wrote a warning, in any app that configured its own logging. Now
    the first from a client, then at most one a minute from it, with how many were held."""
    clock = ManualClock()
    app = TestApp(make_app(tmp_path / "app"), tmp_path, clock=clock)
    hostile = {"Origin": "http://evil.example"}
    with caplog.at_level(logging.WARNING, logger="rastrillo.csrf"):
        for _ in range(300):
            assert app.client.post("/notes", data={"body": "x"}, headers=hostile).status_code == 403
        assert len(csrf_warnings(caplog)) == 1
        clock.advance(60)
        app.client.post("/notes", data={"body": "x"}, headers=hostile)
    first, later = csrf_warnings(caplog)
    assert "evil.example" in first and "held back" not in first
    assert later.endswith("(299 more refusals of this client held back since the last line)")


def csrf_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "rastrillo.csrf"]
