"""The server's log holds back a message repeated within a minute and counts it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from rastrillo import visible
from rastrillo.logs import RepeatFilter
from tests.support import Server, write_app


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


def test_python_app_py_logs_a_hostile_client_address_escaped_on_one_line(
    tmp_path: Path, serve: Callable[..., Server]
) -> None:
    """``python app.py`` logs every request (uvicorn's access line) and every CSRF refusal
    with the client's address, which is what X-Forwarded-For says when the peer is a
    trusted proxy: any byte a header allows. A C1 CSI (0x9b) drives a terminal, a NEL
    (0x85) starts a line; both reach the log escaped, one record one line."""
    index = "def handle(ctx):\n    return ctx.text('hi')\n"
    app_dir = write_app(tmp_path / "app", {"index.GET.py": index})
    server = serve(app_dir)
    forged = b"\x9b2J\x85forged"
    with server.client(headers={"X-Forwarded-For": forged}) as client:
        assert client.get("/").status_code == 200
        assert client.post("/").status_code == 403  # refused by CSRF, and logged
    server.stop()
    log = server.log.read_bytes().decode()
    lines = [line for line in log.splitlines() if "forged" in line]
    assert any("uvicorn.access" in line for line in lines), log
    assert any("rastrillo.csrf" in line for line in lines), log
    for line in lines:
        assert "\\x9b2J\\x85forged" in line
        assert not any(visible.is_hidden(c) for c in line), line
