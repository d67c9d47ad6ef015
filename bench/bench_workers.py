"""Throughput with `--workers`: the tickets demo on PostgreSQL, 1 and 2 worker processes.

Reads: requests per second of ``GET /events/1`` under wrk, served by
``python app.py --workers N --db URL``: 2 workers against 1 on PostgreSQL
(goal >= 1.6x on 2 cores), and 1 worker on PostgreSQL against 1 on SQLite.

Approved writes: end to end over HTTP, an agent's write proposed in the tool
console, approved by its user on the approval page, then redeemed — three
requests per write, from 8 client threads — with 1 and 2 workers.

Configurations alternate round by round so machine noise hits all alike;
every figure is printed with its rounds, and ratios are of medians.

    bash scripts/with-postgres .venv/bin/python bench/bench_workers.py [--seconds 5] [--rounds 3]

Needs `wrk` (Debian: apt-get install wrk) and a PostgreSQL server:
``RASTRILLO_TEST_POSTGRES_URL``, which scripts/with-postgres sets.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
TICKETS = ROOT / "examples" / "tickets"
READ_PATH = "/events/1"
ORIGIN = "http://bench.test"
APPROVAL = re.compile(r'href="/_rastrillo/approvals/([A-Za-z0-9_-]+)"')
WRITERS = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """``python app.py --workers N --db DB`` for a copy of the demo, until closed."""

    def __init__(self, app_dir: Path, db: str, workers: int) -> None:
        self.base = f"http://127.0.0.1:{free_port()}"
        env = {**os.environ, "RASTRILLO_DEV": "1", "RASTRILLO_ORIGIN": ORIGIN}
        self.proc = subprocess.Popen(
            [sys.executable, "app.py", "--addr", self.base[7:], "--db", db,
             "--workers", str(workers)],
            cwd=app_dir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(self.base + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("server did not start")
            time.sleep(0.1)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def reads(served: Served, seconds: int) -> float:
    url = served.base + READ_PATH
    subprocess.run(["wrk", "-t2", "-c32", "-d1s", url], capture_output=True, check=True)
    out = subprocess.run(["wrk", "-t2", "-c32", f"-d{seconds}s", url],
                         capture_output=True, text=True, check=True).stdout
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+)", out)
    if "Non-2xx" in out or (errors and any(int(n) for n in errors.groups())):
        raise RuntimeError(f"errors under load:\n{out}")  # wrk's 2 s timeouts are only slow
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def approved_writes(served: Served, seconds: int) -> float:
    """Writes per second, each proposed, approved and redeemed over HTTP."""
    with httpx.Client(base_url=served.base, headers={"Origin": ORIGIN}) as c:
        signed_in = c.post("/signin", data={"email": "alice@example.com",
                                            "password": "tickets-demo"})
        session = signed_in.cookies["rastrillo_session"]
    done = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def writer(n: int) -> None:
        nonlocal done
        with httpx.Client(base_url=served.base, headers={"Origin": ORIGIN},
                          cookies={"rastrillo_session": session}, timeout=30) as c:
            while time.monotonic() < stop:
                # Each client its own quantity: no two open proposals are identical calls.
                page = c.post("/_rastrillo/console", data={
                    "tool": "events_id_buy_post", "arg.id": "1", "arg.quantity": str(n + 1)})
                approval = APPROVAL.search(page.text)[1]
                assert c.post(f"/_rastrillo/approvals/{approval}",
                              data={"decision": "approve"}).status_code == 303
                ran = c.post("/_rastrillo/console", data={"approval": approval})
                assert '<strong class="status">201<' in ran.text, ran.text[-500:]
                with lock:
                    done += 1

    started = time.monotonic()
    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(writer, range(WRITERS)))
    return done / (time.monotonic() - started)


def fresh_postgres(base: str) -> str:
    name = f"bench_{secrets.token_hex(4)}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False)


def rounds(configs: dict[str, Callable[[], float]], count: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(count):
        for name, run in configs.items():
            results[name].append(run())
    return results


def report(title: str, results: dict[str, list[float]], unit: str) -> dict[str, float]:
    print(title)
    medians = {}
    for name, values in results.items():
        medians[name] = statistics.median(values)
        spread = f"{min(values):.0f}-{max(values):.0f}"
        print(f"  {name:<16} {medians[name]:8.1f} {unit}  (rounds: "
              f"{', '.join(f'{v:.0f}' for v in values)}; spread {spread})")
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("bench_workers needs wrk: apt-get install wrk")
    base = os.environ.get("RASTRILLO_TEST_POSTGRES_URL")
    if not base:
        sys.exit("bench_workers needs PostgreSQL: bash scripts/with-postgres "
                 ".venv/bin/python bench/bench_workers.py")
    with tempfile.TemporaryDirectory() as tmp:
        app_dir = Path(tmp) / "tickets"
        shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("*.db*", "__pycache__"))
        pg, sqlite = fresh_postgres(base), str(Path(tmp) / "bench.db")

        def measured(db: str, workers: int, what: Callable[[Served, int], float]) -> Callable:
            def run() -> float:
                served = Served(app_dir, db, workers)
                try:
                    return what(served, args.seconds)
                finally:
                    served.close()
            return run

        read = rounds({
            "postgresql 1w": measured(pg, 1, reads),
            "postgresql 2w": measured(pg, 2, reads),
            "sqlite 1w": measured(sqlite, 1, reads),
        }, args.rounds)
        stock = create_engine(pg)  # enough tickets that every approved buy succeeds
        with stock.begin() as conn:
            conn.execute(text("UPDATE events SET tickets_total = 1000000, tickets_left = 1000000"))
        stock.dispose()
        write = rounds({
            "postgresql 1w": measured(pg, 1, approved_writes),
            "postgresql 2w": measured(pg, 2, approved_writes),
        }, args.rounds)
    print(f"{os.cpu_count()} cores; {args.rounds} rounds of {args.seconds}s, alternating")
    r = report(f"GET {READ_PATH}, wrk -t2 -c32", read, "req/s")
    print(f"  2 workers / 1 worker on PostgreSQL: {r['postgresql 2w'] / r['postgresql 1w']:.2f}"
          " (goal >= 1.6)")
    print(f"  PostgreSQL / SQLite, 1 worker: {r['postgresql 1w'] / r['sqlite 1w']:.2f}")
    w = report(f"approved writes end to end over HTTP ({WRITERS} clients, 3 requests each)",
               write, "writes/s")
    print(f"  2 workers / 1 worker: {w['postgresql 2w'] / w['postgresql 1w']:.2f}")


if __name__ == "__main__":
    main()
