"""The tickets demo under hostile load: slow clients, big bodies, SIGTERM in the middle of writes.

Each scenario serves the demo with ``python examples/tickets/app.py`` on a fresh SQLite
file and reports what a client saw (requests, errors by kind), the server's peak memory
(VmHWM) and the size of its log.

    python bench/bench_faults.py [slow|bodies|sigterm|all]

- slow: the server runs under a 1,024 open-file limit; 1,100 connections send half a
  request line and stop. Meanwhile one client keeps asking ``GET /events/1`` (2 s
  timeout each): how many of its requests were answered, and how big the log grew.
- bodies: 8 clients at once POST a 100 MB form of 999 fields without a session
  (streamed, so the client holds no copy): 4 to ``/orders/1/cancel`` (behind
  ``@require``), 4 to ``/signin`` (open to anyone).
- sigterm: 32 signed-in buyers post orders while another process holds the SQLite
  write lock for longer than the drain; SIGTERM the server. Every write the server
  answered 2xx must be in the database, and no order may be there that was answered 5xx.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TICKETS = ROOT / "examples" / "tickets"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Demo:
    """The tickets demo in a child process on a fresh database."""

    def __init__(self, tmp: Path, *flags: str, nofile: int | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.db = tmp / "tickets.db"
        self.log = tmp / "server.log"

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.process = subprocess.Popen(
            [
                sys.executable,
                str(TICKETS / "app.py"),
                "--addr",
                f"127.0.0.1:{self.port}",
                "--db",
                str(self.db),
                *flags,
            ],
            cwd=TICKETS,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            preexec_fn=limit,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base + "/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(self.log.read_text())

    def peak_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> tuple[int, float]:
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(60)
        return code, time.monotonic() - started

    def log_size(self) -> str:
        text = self.log.read_bytes()
        return f"{len(text) / 1024:.1f} KiB, {text.count(b'Traceback')} tracebacks"


def slow(tmp: Path) -> None:
    demo = Demo(tmp, nofile=1024)
    idle: list[socket.socket] = []
    outcomes: Counter[str] = Counter()
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            try:
                status = httpx.get(demo.base + "/events/1", timeout=2).status_code
                outcomes[str(status)] += 1
            except httpx.TransportError as exc:
                outcomes[type(exc).__name__] += 1

    prober = threading.Thread(target=probe)
    prober.start()
    for _ in range(1100):
        try:
            s = socket.create_connection(("127.0.0.1", demo.port), timeout=2)
            s.sendall(b"GET /events/1 HT")
            idle.append(s)
        except OSError as exc:
            outcomes[f"slow client: {type(exc).__name__}"] += 1
    time.sleep(15)
    stop.set()
    prober.join()
    for s in idle:
        s.close()
    peak = demo.peak_mb()
    code, took = demo.stop()
    print(
        f"slow: {len(idle)} slow connections held; probe outcomes {dict(outcomes)}; "
        f"peak {peak:.0f} MB; log {demo.log_size()}; exit {code} in {took:.1f} s"
    )


def _big_form(fields: int, total: int) -> Iterator[bytes]:
    value = b"x" * (total // fields)
    for i in range(fields):
        yield (b"&" if i else b"") + b"f%d=" % i + value


def bodies(tmp: Path) -> None:
    demo = Demo(tmp)
    outcomes: Counter[str] = Counter()

    def post(path: str) -> None:
        try:
            response = httpx.post(
                demo.base + path,
                content=_big_form(999, 100_000_000),
                headers={"Origin": demo.base, "Content-Type": "application/x-www-form-urlencoded"},
                timeout=120,
            )
            outcomes[f"{path} {response.status_code}"] += 1
        except httpx.TransportError as exc:
            outcomes[f"{path} {type(exc).__name__}"] += 1

    paths = ["/orders/1/cancel", "/signin"] * 4  # behind @require, and open to anyone
    threads = [threading.Thread(target=post, args=(path,)) for path in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    peak = demo.peak_mb()
    code, took = demo.stop()
    print(
        f"bodies: 8 x 100 MB forms, outcomes {dict(outcomes)}; peak {peak:.0f} MB; "
        f"log {demo.log_size()}; exit {code} in {took:.1f} s"
    )


def sigterm(tmp: Path) -> None:
    demo = Demo(tmp)
    answered: dict[int, int | str] = {}
    lock = threading.Lock()
    sessions = []
    for _ in range(32):
        client = httpx.Client(base_url=demo.base, headers={"Origin": demo.base}, timeout=60)
        client.post("/signin", data={"email": "alice@example.com", "password": "tickets-demo"})
        sessions.append(client)
    count = "SELECT count(*) FROM orders"
    before = sqlite3.connect(demo.db).execute(count).fetchone()[0]
    holder = sqlite3.connect(demo.db, timeout=30, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")

    def buy(i: int) -> None:
        try:
            r = sessions[i].post("/events/1/buy", data={"quantity": "1"}, follow_redirects=False)
            with lock:
                answered[i] = r.status_code
        except httpx.TransportError as exc:
            with lock:
                answered[i] = type(exc).__name__

    threads = [threading.Thread(target=buy, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    time.sleep(1)
    demo.process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    time.sleep(12)  # hold the lock past the drain
    holder.execute("ROLLBACK")
    code = demo.process.wait(60)
    took = time.monotonic() - started
    for t in threads:
        t.join()
    new = sqlite3.connect(demo.db).execute(count).fetchone()[0] - before
    told_ok = sum(1 for a in answered.values() if a == 303)
    print(
        f"sigterm: answers {dict(Counter(map(str, answered.values())))}; new orders {new} "
        f"(answered as done: {told_ok}); exit {code} after {took:.1f} s; log {demo.log_size()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "scenario", nargs="?", default="all", choices=["slow", "bodies", "sigterm", "all"]
    )
    args = parser.parse_args()
    for name, scenario in (("slow", slow), ("bodies", bodies), ("sigterm", sigterm)):
        if args.scenario in (name, "all"):
            with tempfile.TemporaryDirectory() as tmp:
                scenario(Path(tmp))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
