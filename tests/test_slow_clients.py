"""Slow clients against a real uvicorn server on loopback: a client that sends its request
slowly is cut off, and a thousand of them under a 1,024 open-file limit neither starve
a quick client nor flood the log."""

from __future__ import annotations

import concurrent.futures
import contextlib
import resource
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from rastrillo.connections import MAX_HEAD_BYTES
from tests.support import Server, free_port, write_app

ACTIONS = {
    "index.GET.py": """
        def handle(ctx):
            return ctx.text("home")
    """,
    "echo.POST.py": """
        async def handle(ctx):
            return ctx.text(f"{len(await ctx.request.body())} bytes")
    """,
}
TIMEOUTS = "header_timeout=1.0, body_timeout=1.0,"


@contextlib.contextmanager
def serving(tmp_path: Path, extra: str = "", prelude: str = "") -> Iterator[Server]:
    """The app served under a 1,024 open-file limit; when done, its log holds no
    traceback and stays short."""
    app_dir = write_app(tmp_path / "app", ACTIONS, extra=TIMEOUTS + extra, prelude=prelude)
    port = free_port()
    served = Server(
        app_dir, ["--addr", f"127.0.0.1:{port}"], f"http://127.0.0.1:{port}", open_files=1024
    )
    try:
        yield served
    finally:
        assert served.stop() == 0
    log = served.log.read_text()
    assert "Traceback" not in log, log[:3000]
    assert len(log) < 20_000, log[:3000]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("shared")) as served:
        yield served


@pytest.fixture
def server(shared: Server) -> Iterator[Server]:
    """One server for the tests of a few connections each, which close them all: what it
    logged while the test ran holds no traceback and stays short (and so does its whole log,
    and it exits 0, after the last of them)."""
    start = shared.log.stat().st_size
    yield shared
    log = shared.log.read_bytes()[start:].decode(errors="replace")
    assert "Traceback" not in log, log[:3000]
    assert len(log) < 20_000, log[:3000]


def connect(server: Server) -> socket.socket:
    port = int(server.base_url.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def closed_without_an_answer(s: socket.socket) -> bool:
    """Wait until the server closes ``s``; whether it sent nothing before."""
    return s.recv(65536) == b""


def test_a_client_slow_to_send_its_headers_is_cut_off(server: Server) -> None:
    with connect(server) as slow:
        slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        assert closed_without_an_answer(slow)


def test_a_client_slow_to_send_its_body_is_cut_off(server: Server) -> None:
    with connect(server) as slow:
        slow.sendall(
            f"POST /echo HTTP/1.1\r\nHost: x\r\nOrigin: {server.base_url}\r\n"
            "Content-Length: 10\r\n\r\n12345".encode()
        )
        assert closed_without_an_answer(slow)


def read_response(s: socket.socket) -> bytes:
    """One whole response (its head, then as many bytes as its Content-Length says)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += s.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_keep_alive_connection_serves_a_second_request_sent_in_time(server: Server) -> None:
    with connect(server) as c:
        for _ in range(2):
            c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = read_response(c)
            assert answer.startswith(b"HTTP/1.1 200 ")
            assert answer.endswith(b"home")


def test_a_thousand_slow_clients_do_not_starve_a_quick_one(tmp_path: Path) -> None:
    # A server of its own: the next test must not meet the connections it is closing.
    slow = []
    with serving(tmp_path) as server:
        try:
            for _ in range(1100):
                slow.append(slow_client(server))
            for _ in range(3):
                answer = quick_client(server)
                assert answer.startswith(b"HTTP/1.1 200 ")
                assert answer.endswith(b"home")
        finally:
            for s in slow:
                s.close()


def slow_client(server: Server) -> socket.socket:
    """A connection that sent part of a request line, and sends no more."""
    s = connect(server)
    s.sendall(b"GET / HT")
    return s


def quick_client(server: Server) -> bytes:
    """The whole answer to a request sent at once."""
    with connect(server) as quick:
        quick.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := quick.recv(65536):
            answer += chunk
    return answer


def test_a_head_over_the_limit_is_answered_431_and_closed(server: Server) -> None:
    with connect(server) as greedy:
        # A little over the limit, in one send that the server reads whole: no byte is
        # left unread when it closes, so its answer is not lost to a reset.
        pads = "".join(f"X-Pad-{i}: {'x' * 1000}\r\n" for i in range(MAX_HEAD_BYTES // 1000 + 2))
        greedy.sendall(f"GET / HTTP/1.1\r\nHost: x\r\n{pads}".encode())  # the head never ends
        answer = b""
        while chunk := greedy.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 431 ")


def test_a_head_with_a_browser_sized_cookie_is_served(server: Server) -> None:
    cookie = "; ".join(f"c{i}={'v' * 90}" for i in range(80))  # about 7.5 KB, as big sites send
    with connect(server) as c:
        c.sendall(f"GET / HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\n\r\n".encode())
        answer = read_response(c)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.endswith(b"home")


STALL = """
import asyncio
import time


def stall(app):
    \"\"\"Every turn of the event loop takes 20 ms, as on a loaded machine: connections
    pile up in the kernel between turns, and each turn accepts a whole batch.\"\"\"
    started = False

    async def stalled(scope, receive, send):
        nonlocal started
        if not started:
            started = True
            loop = asyncio.get_running_loop()

            def turn():
                time.sleep(0.02)
                loop.call_soon(turn)

            loop.call_soon(turn)
        await app(scope, receive, send)

    return stalled
"""


def test_connections_arriving_faster_than_a_busy_server_accepts_never_run_it_out_of_files(
    tmp_path: Path,
) -> None:
    # Many connecting at once keep the kernel's queue full between the server's turns.
    connections = 3000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < connections + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(connections + 100, hard), hard))
    with serving(tmp_path, extra=" wrap=stall,", prelude=STALL) as served:
        slow: list[socket.socket] = []
        try:
            with concurrent.futures.ThreadPoolExecutor(64) as pool:
                slow.extend(pool.map(lambda _: slow_client(served), range(connections)))
            assert quick_client(served).startswith(b"HTTP/1.1 200 ")
        finally:
            for s in slow:
                s.close()
    assert "out of system resource" not in served.log.read_text()
