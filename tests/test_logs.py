"""The log `rastrillo.run` configures: a message repeated within a minute held back and
counted, each message on one line, each traceback line indented under its record."""

from __future__ import annotations

import ast
import io
import itertools
import logging
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rastrillo import visible
from rastrillo.logs import IndentingFormatter, OneLineFilter, RepeatFilter
from rastrillo.testing import ManualClock
from tests.support import Server, free_port, until, write_app


def test_a_repeated_message_is_written_once_a_window_with_a_count() -> None:
    clock = ManualClock()
    repeat = RepeatFilter(window=60, clock=clock)
    written: list[str] = []

    def log(msg: str, *args: object, exc: type[BaseException] | None = None) -> None:
        record = logging.LogRecord(
            "rastrillo.app",
            logging.ERROR,
            __file__,
            1,
            msg,
            args,
            (exc, exc(), None) if exc else None,
        )
        if repeat.filter(record):
            written.append(record.getMessage())

    for i in range(1000):
        log("accept failed: %s", i, exc=OSError)
    log("accept failed: %s", "other error type", exc=ValueError)
    log("another message")
    for _ in range(3):
        info = logging.LogRecord("notes", logging.INFO, __file__, 1, "saved %s", ("a",), None)
        assert repeat.filter(info)
    clock.advance(61)
    log("accept failed: %s", "again", exc=OSError)
    assert written == [
        "accept failed: 0",
        "accept failed: other error type",
        "another message",
        "accept failed: again (999 more like this in the last 60 s)",
    ]


INDEX = "def handle(ctx):\n    return ctx.text('hi')\n"
RAISES = """\
def handle(ctx):
    raise ValueError(f"bad value {ctx.query['v']}")
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``python app.py`` for the tests that send it a request and read what it logged
    (a start is about a second of CPU); each reads its own part of the log. After the last,
    the server exits 0 and its whole log is records and their indented lines."""
    actions = {"index.GET.py": INDEX, "raises.GET.py": RAISES}
    app_dir = write_app(tmp_path_factory.mktemp("logs") / "app", actions)
    port = free_port()
    server = Server(app_dir, ["--addr", f"127.0.0.1:{port}"], f"http://127.0.0.1:{port}")
    try:
        yield server
    finally:
        assert server.stop() == 0
    assert_records_and_continuations(server.log.read_bytes().decode())


def logged_since(server: Server, start: int) -> str:
    return server.log.read_bytes()[start:].decode()


def test_python_app_py_logs_a_hostile_client_address_escaped_on_one_line(served: Server) -> None:
    """``python app.py`` logs every request (uvicorn's access line) and every CSRF refusal
    with the client's address, which is what X-Forwarded-For says when the peer is a
    trusted proxy: any byte a header allows. A C1 CSI (0x9b) drives a terminal, a NEL
    (0x85) starts a line; both reach the log escaped, one record one line, and escaped
    once: the CSRF message writes the address with ``%r``, and the line shows its repr
    as it is, ``'\\x9b2J\\x85forged'``, not with the escapes' backslashes doubled."""
    forged = b"\x9b2J\x85forged"
    start = served.log.stat().st_size
    with served.client(headers={"X-Forwarded-For": forged}) as client:
        assert client.get("/").status_code == 200
        assert client.post("/").status_code == 403  # refused by CSRF, and logged

    def lines_of_both() -> list[str]:
        log = logged_since(served, start)
        lines = [line for line in log.splitlines() if "forged" in line]
        access = [line for line in lines if "uvicorn.access" in line]
        return lines if len(access) == 2 and len(lines) == 3 and log.endswith("\n") else []

    lines = until(
        lines_of_both,
        "both requests' access lines and the CSRF refusal",
        show=lambda: logged_since(served, start),
    )
    log = "\n".join(lines)
    assert any("uvicorn.access" in line for line in lines), log
    assert any("rastrillo.csrf" in line for line in lines), log
    for line in lines:
        csrf = "rastrillo.csrf" in line
        assert ("from '\\x9b2J\\x85forged':" if csrf else "\\x9b2J\\x85forged") in line, line
        assert "\\\\" not in line, line
        assert not any(visible.is_hidden(c) for c in line), line


def test_a_value_logged_with_r_or_s_shows_once_escaped_and_reads_back_as_itself() -> None:
    """Python's repr already writes a backslash as ``\\\\`` and a control as ``\\x1b``: the
    line does not escape those escapes again (a person read ``'\\\\x1b'`` for a value that
    was one ESC), and escapes what repr leaves and a terminal must not show (a look-alike,
    U+3164) the same way. ``%s`` is escaped once, as it was. So the ``%r`` field is the
    value's literal, and the ``%s`` field its terminal form, on one line."""
    value = "ESC \x1b, text \\x1b, quote \" and ', p\u0430ypal \u3164\n2026-01-01 forged"
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(IndentingFormatter("%(message)s"))
    handler.addFilter(OneLineFilter())
    log = logging.getLogger("tests.one_escaping")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("as repr %r and as text %s (%d)", value, value, 7)
        log.warning("in a mapping %(v)r", {"v": [value]})
    finally:
        log.removeHandler(handler)
    first, second = stream.getvalue().splitlines()
    shown = re.fullmatch(r"as repr (.*) and as text (.*) \(7\)", first)
    assert shown is not None, first
    assert ast.literal_eval(shown[1]) == value
    assert "\\u0430" in shown[1] and "\\u3164" in shown[1]
    assert shown[2] == visible.for_terminal(value)
    assert ast.literal_eval(second.removeprefix("in a mapping ")) == [value]


def test_a_record_with_nothing_to_escape_keeps_its_template_and_arguments() -> None:
    """Escaping changes a record only where it must: another handler of the app's reading
    the record after the framework's (grouping by template, say) still finds the template
    and its arguments."""
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "got %r from %s", ("a", 3), None)
    assert OneLineFilter().filter(record)
    assert (record.msg, record.args) == ("got %r from %s", ("a", 3))
    hostile = logging.LogRecord("x", logging.WARNING, __file__, 1, "got %s", ("\x1b",), None)
    assert OneLineFilter().filter(hostile)
    assert (hostile.msg, hostile.args) == ("got \\x1b", None)


def test_what_the_parts_of_a_message_show_only_together_is_escaped_too() -> None:
    """Each part escaped alone can miss what only the whole shows: a number written with
    ``%c`` is a character (an ESC), and a Cyrillic a alone reads as written but, put into
    the template's Latin word, passes for an ASCII one. The whole is escaped then."""
    for template, args, shown in (
        ("key %c pressed", (27,), "key \\x1b pressed"),
        ("pay p%sypal.com", ("\u0430",), "pay p\\u0430ypal.com"),
    ):
        record = logging.LogRecord("x", logging.WARNING, __file__, 1, template, args, None)
        assert OneLineFilter().filter(record)
        assert record.getMessage() == shown


FORGED = "1999-12-31 23:59:59,999 ERROR rastrillo.app forged record"
HOSTILE = f"\n{FORGED}\r\x1b[2J\x9b2J\x85{FORGED}\u2028{FORGED}"
CONTINUATION = "  | "
"""What begins each line of a record after its first."""
RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+ ")


def assert_records_and_continuations(log: str) -> list[str]:
    """Each line of ``log`` begins a record or is indented under one, holds no hidden
    character, and no forged record begins a line; returns the lines."""
    lines = log.split("\n")  # the terminal's lines: \r, NEL, U+2028 must not be there
    assert lines[-1] == ""
    for line in lines[:-1]:
        assert not any(visible.is_hidden(c) for c in line), line
        assert RECORD.match(line) or line.startswith(CONTINUATION), line
        assert not line.startswith(FORGED[:23]), line
    return lines[:-1]


def test_a_traceback_holding_hostile_text_is_indented_and_escaped_line_by_line(
    served: Server,
) -> None:
    """A handler's exception is logged with its traceback, and an exception's message is
    often made of what a client sent. A newline there began a line that read as a record
    of its own; a CSI drove the terminal. Each line of a traceback is now indented under
    its record and escaped like a message, and still says all it said."""
    start = served.log.stat().st_size
    with served.client() as client:
        assert client.get("/raises", params={"v": HOSTILE}).status_code == 500
    logged = until(
        lambda: (
            (log := logged_since(served, start)).endswith("\n") and 'HTTP/1.1" 500' in log and log
        ),
        "the traceback's record and the request's access line",
    )
    lines = assert_records_and_continuations(logged)
    raised = next(i for i, line in enumerate(lines) if "(actions/raises.GET.py) raised" in line)
    traceback = list(itertools.takewhile(lambda line: not RECORD.match(line), lines[raised + 1 :]))
    assert traceback[0] == CONTINUATION + "Traceback (most recent call last):"
    assert any('raises.GET.py", line 2, in handle' in line for line in traceback)
    assert traceback[-2:] == [
        f"{CONTINUATION}ValueError: bad value ",
        f"{CONTINUATION}{FORGED}\\r\\x1b[2J\\x9b2J\\x85{FORGED}\\u2028{FORGED}",
    ]


def test_the_sidecar_logs_a_failing_pass_s_hostile_traceback_the_same_way(tmp_path: Path) -> None:
    """``python app.py sidecar run`` logs a failed pass with its traceback, configured as
    the server's log is."""
    sweep = f"""
    def sweep(ctx):
        raise RuntimeError("the dependency said: " + {HOSTILE!r})
    """
    app_dir = write_app(tmp_path / "app", {"index.GET.py": INDEX}, "sidecar=sweep,", prelude=sweep)
    log = app_dir / "sidecar.log"
    with log.open("wb") as out:
        sidecar = subprocess.Popen(
            [sys.executable, str(app_dir / "app.py"), "sidecar", "run"],
            cwd=app_dir,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        until(lambda: "outcome=error" in log.read_text(errors="replace"), "the failed pass", 120)
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(timeout=120) == 0
    finally:
        if sidecar.poll() is None:
            sidecar.kill()
            sidecar.wait()
    lines = assert_records_and_continuations(log.read_bytes().decode())
    assert f"{CONTINUATION}RuntimeError: the dependency said: " in lines
    assert f"{CONTINUATION}{FORGED}\\r\\x1b[2J\\x9b2J\\x85{FORGED}\\u2028{FORGED}" in lines
