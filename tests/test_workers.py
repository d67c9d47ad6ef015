"""`--workers N`: N processes on one address or socket, drained together on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from rastrillo import Options, run
from rastrillo.workers import listen
from tests.support import Server, until, write_app

ACTIONS = {
    "pid.GET.py": """
        import os

        def handle(ctx):
            return ctx.text(str(os.getpid()))
    """,
    # Holds its request until the test creates `release` in the app folder.
    "hold.GET.py": """
        import os
        import time

        def handle(ctx):
            marker = ctx.options.app_dir / f"started-{os.getpid()}-{ctx.request.query_params['n']}"
            marker.touch()
            deadline = time.monotonic() + 20
            while not (ctx.options.app_dir / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            return ctx.text(f"finished {os.getpid()}")
    """,
    "backend.GET.py": """
        import os

        def handle(ctx):
            backend = ctx.db.query_one("SELECT pg_backend_pid() AS pid").pid
            return ctx.json({"worker": os.getpid(), "backend": backend})
    """,
}


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    return write_app(tmp_path / "app", ACTIONS)


def worker_pids(server: Server, count: int) -> set[int]:
    """The pids answering, asked on fresh connections until ``count`` are seen."""
    seen: set[int] = set()

    def all_seen() -> bool:
        with server.client() as c:  # a new connection: the kernel picks the worker
            seen.add(int(c.get("/pid").text))
        return len(seen) >= count

    until(all_seen, f"{count} workers to answer")
    return seen


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_workers_share_one_address_and_sigterm_drains_them_all(app_dir, serve):
    server = serve(app_dir, "--workers", "3")
    pids = worker_pids(server, 3)
    assert server.process.pid not in pids
    results: list[str] = []
    threads: list[threading.Thread] = []

    def hold(n: int) -> None:
        with server.client(timeout=30) as c:
            results.append(c.get("/hold", params={"n": n}).text)

    def busy_workers() -> set[str]:
        return {p.name.split("-")[1] for p in app_dir.glob("started-*")}

    def two_workers_busy() -> bool:
        thread = threading.Thread(target=hold, args=(len(threads),))
        thread.start()
        threads.append(thread)
        until(lambda: len(list(app_dir.glob("started-*"))) == len(threads), "the request to start")
        return len(busy_workers()) >= 2

    until(two_workers_busy, "requests in flight on two workers")
    server.process.send_signal(signal.SIGTERM)
    # The listening socket closes at once: a new connection is refused while they drain.
    until(lambda: _refused(server), "the address to stop accepting")
    (app_dir / "release").touch()
    assert server.process.wait(timeout=15) == 0
    for thread in threads:
        thread.join()
    assert len(results) == len(threads) and all(r.startswith("finished") for r in results)
    assert {r.split()[1] for r in results} == busy_workers()
    assert all(gone(pid) for pid in pids)


def test_connections_opened_at_once_are_spread_over_the_workers(app_dir, serve):
    # A proxy or a load generator opens its keep-alive connections at once; with one
    # socket shared by all workers, the first to wake would take every one of them.
    server = serve(app_dir, "--workers", "2")
    workers = worker_pids(server, 2)
    port = int(server.base_url.rsplit(":", 1)[1])
    connections = [socket.create_connection(("127.0.0.1", port), timeout=15) for _ in range(32)]
    answered_by: list[int] = []
    for conn in connections:
        with conn:
            conn.sendall(b"GET /pid HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := conn.recv(4096):
                answer += chunk
            answered_by.append(int(answer.rsplit(b"\r\n\r\n", 1)[1]))
    assert set(answered_by) == workers
    # Even spreading puts fewer than 4 of 32 on one worker once in about 400,000 runs.
    assert min(answered_by.count(pid) for pid in workers) >= 4, answered_by


def test_a_workers_connections_send_without_waiting_for_the_clients_ack():
    # With Nagle's algorithm on, each answer on a keep-alive connection waits ~40 ms for
    # the client's delayed ACK. asyncio turns it off only for sockets that say IPPROTO_TCP.
    [sock] = listen("127.0.0.1", 0, None, 1)
    sock.settimeout(5)
    with sock, socket.create_connection(sock.getsockname()[:2], timeout=5):
        accepted, _ = sock.accept()
        with accepted:
            assert accepted.proto == socket.IPPROTO_TCP
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_a_second_server_on_a_taken_address_fails(app_dir, serve):
    first = serve(app_dir, "--workers", "2")
    addr = first.base_url.removeprefix("http://")
    second = subprocess.run(
        [sys.executable, str(app_dir / "app.py"), "--addr", addr, "--workers", "2"],
        cwd=app_dir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1
    assert f"error: cannot listen on {addr}: Address already in use" in second.stderr
    assert "Traceback" not in second.stderr
    assert len(worker_pids(first, 2)) == 2  # the first still serves alone on both workers


def _refused(server: Server) -> bool:
    try:
        with server.client(timeout=1) as c:
            c.get("/pid")
    except httpx.ConnectError:
        return True
    except (httpx.RemoteProtocolError, httpx.ReadError):
        pass  # queued on a worker's socket an instant before it closed, then closed or reset
    return False


def test_a_worker_that_dies_is_replaced(app_dir, serve):
    server = serve(app_dir, "--workers", "2")
    pids = worker_pids(server, 2)
    victim = min(pids)
    os.kill(victim, signal.SIGKILL)
    seen: set[int] = set()

    def replacement_answers() -> bool:
        with server.client() as c:
            seen.add(int(c.get("/pid").text))
        return bool(seen - pids)

    until(replacement_answers, "a replacement worker to answer")
    assert victim not in seen
    assert f"worker {victim} ended (killed by SIGKILL)" in server.log.read_text()
    assert server.stop() == 0


def test_workers_on_a_unix_socket(app_dir, tmp_path):
    sock = str(tmp_path / "app.sock")
    server = Server(app_dir, ["--socket", sock, "--workers", "2"], "http://app", uds=sock)
    try:
        assert len(worker_pids(server, 2)) == 2
    finally:
        assert server.stop() == 0
    assert not Path(sock).exists()


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "1000", "٣"])
def test_a_bad_worker_count_is_a_usage_error(value, capsys):
    assert run(Options(), ["--workers", value]) == 2
    err = capsys.readouterr().err
    assert "--workers wants a number" in err and "Traceback" not in err


@pytest.mark.postgres
def test_each_worker_opens_connections_of_its_own(tmp_path, pg_url, serve):
    app_dir = write_app(tmp_path / "app", ACTIONS)
    server = serve(app_dir, "--workers", "3", "--db", pg_url)
    backends: dict[int, set[int]] = {}

    def three_workers_queried() -> bool:
        with server.client() as c:
            answer = c.get("/backend").json()
        backends.setdefault(answer["worker"], set()).add(answer["backend"])
        return len(backends) == 3

    until(three_workers_queried, "three workers to query PostgreSQL")
    per_worker = list(backends.values())
    for i, mine in enumerate(per_worker):
        for other in per_worker[i + 1 :]:
            assert not mine & other, "two workers used the same PostgreSQL connection"
    assert server.stop() == 0


def test_workers_stop_when_their_parent_is_killed(app_dir, serve):
    server = serve(app_dir, "--workers", "2")
    pids = worker_pids(server, 2)
    server.stop(signal.SIGKILL)
    until(lambda: all(gone(pid) for pid in pids), "the orphaned workers to exit")
