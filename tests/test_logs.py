"""The server's log holds back a message repeated within a minute and counts it."""

from __future__ import annotations

import logging

from rastrillo.logs import RepeatFilter


def test_a_repeated_message_is_written_once_a_window_with_a_count() -> None:
    now = [0.0]
    repeat = RepeatFilter(window=60, clock=lambda: now[0])
    written: list[str] = []

    def log(msg: str, *args: object, exc: type[BaseException] | None = None) -> None:
        record = logging.LogRecord("rastrillo.app", logging.ERROR, __file__, 1, msg, args,
                                   (exc, exc(), None) if exc else None)
        if repeat.filter(record):
            written.append(record.getMessage())

    for i in range(1000):
        log("accept failed: %s", i, exc=OSError)
    log("accept failed: %s", "other error type", exc=ValueError)
    log("another message")
    for _ in range(3):
        info = logging.LogRecord("notes", logging.INFO, __file__, 1, "saved %s", ("a",), None)
        assert repeat.filter(info)
    now[0] = 61.0
    log("accept failed: %s", "again", exc=OSError)
    assert written == [
        "accept failed: 0",
        "accept failed: other error type",
        "another message",
        "accept failed: again (999 more like this in the last 60 s)",
    ]
