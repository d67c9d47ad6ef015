"""Throughput with `--workers`: the tickets demo on PostgreSQL, 1 and 2 worker processes.

Reads: requests per second of ``GET /events/1`` under wrk, served by
``python app.py --workers N --db URL``: 2 workers against 1 on PostgreSQL
(goal >= 1.6x on 2 cores), and 1 worker on PostgreSQL against 1 on SQLite.

Approved writes: end to end over HTTP, an agent's write proposed in the tool
console, approved by its user on the approval page, then redeemed — three
requests per write, from 8 client threads — with 1 and 2 workers.

wrk runs with one thread pinned to one core (``taskset -c 0``): on a 2-core
machine it shares that core with a worker and PostgreSQL. For each read run
the bench prints the CPU time each part took from /proc (the server's
processes, PostgreSQL's, wrk's) per request, each worker's share, and how
busy the whole machine was: where the cores went, not only how many requests.

Configurations alternate round by round so machine noise hits all alike;
every figure is printed with its rounds, and ratios are of medians. The load
average is printed before and after.

    bash scripts/with-postgres .venv/bin/python bench/bench_workers.py [--seconds 5] [--rounds 3]

Needs `wrk` (Debian: apt-get install wrk), `taskset` (util-linux), Linux's /proc,
and a PostgreSQL server on this machine:
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

    def __init__(self, app_dir: Path, db: str, workers: int, label: str = "") -> None:
        self.base = f"http://127.0.0.1:{free_port()}"
        self.label = label
        self.db = db
        self.postmaster = postmaster(db)
        env = {**os.environ, "RASTRILLO_DEV": "1", "RASTRILLO_ORIGIN": ORIGIN}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "app.py",
                "--addr",
                self.base[7:],
                "--db",
                db,
                "--workers",
                str(workers),
            ],
            cwd=app_dir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
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


WRK = ["taskset", "-c", "0", "wrk", "-t1", "-c32"]
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            if parent == pid:
                found.append(int(entry.name))
    return found


def machine_busy() -> float:
    """CPU seconds all cores spent on anything but idle, since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / _TICK


def postmaster(db: str) -> int | None:
    """The PostgreSQL server's pid, when it runs on this machine; else None."""
    if "://" not in db:
        return None
    engine = create_engine(db)
    try:
        with engine.connect() as conn:  # the backend's parent, read while it lives
            backend = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            return int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None
    finally:
        engine.dispose()


def sessions_started(db: str) -> int:
    """PostgreSQL backends started so far (this query's own included)."""
    engine = create_engine(db)
    with engine.connect() as conn:
        started = conn.execute(text("SELECT sum(sessions) FROM pg_stat_database")).scalar_one()
    engine.dispose()
    return int(started)


def reads(served: Served, seconds: int) -> float:
    url = served.base + READ_PATH
    subprocess.run([*WRK, "-d1s", url], capture_output=True, check=True)  # warm: pools filled
    workers = children(served.proc.pid) or [served.proc.pid]
    pg = [served.postmaster, *children(served.postmaster)] if served.postmaster else []
    before = {pid: cpu_seconds(pid) for pid in [served.proc.pid, *workers, *pg]}
    sessions_before = sessions_started(served.db) if pg else 0
    busy_before, started = machine_busy(), time.monotonic()
    wrk = subprocess.Popen([*WRK, f"-d{seconds}s", url], stdout=subprocess.PIPE, text=True)
    wrk_cpu = 0.0
    while wrk.poll() is None:  # a finished process's CPU time is gone with it
        wrk_cpu = cpu_seconds(wrk.pid)
        time.sleep(0.05)
    out = wrk.stdout.read() if wrk.stdout else ""
    elapsed, busy = time.monotonic() - started, machine_busy() - busy_before
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+)", out)
    if wrk.returncode or "Non-2xx" in out or (errors and any(int(n) for n in errors.groups())):
        raise RuntimeError(f"errors under load:\n{out}")  # wrk's 2 s timeouts are only slow
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def spent(pids: list[int]) -> float:
        return sum(cpu_seconds(pid) - before[pid] for pid in pids)

    per_request = 1000 / (rate * elapsed)  # ms of CPU per request, from CPU seconds
    server = spent(list(dict.fromkeys([served.proc.pid, *workers])))
    shares = "/".join(f"{100 * spent([w]) / elapsed:.0f}%" for w in workers)
    postgres = f", PostgreSQL {spent(pg) * per_request:.2f}" if pg else ""
    if pg:  # a backend started during the run is a connection the pool closed and reopened
        opened = sessions_started(served.db) - sessions_before - 1
        postgres += f" ({opened} PostgreSQL connections opened during the run)"
    print(
        f"    {served.label}: {rate:.0f} req/s; CPU ms per request: server "
        f"{server * per_request:.2f}{postgres}, wrk {wrk_cpu * per_request:.2f}; "
        f"workers busy {shares}; machine {100 * busy / elapsed:.0f}% of "
        f"{100 * (os.cpu_count() or 1)}%",
        flush=True,
    )
    return rate


def approved_writes(served: Served, seconds: int) -> float:
    """Writes per second, each proposed, approved and redeemed over HTTP."""
    with httpx.Client(base_url=served.base, headers={"Origin": ORIGIN}) as c:
        signed_in = c.post(
            "/signin", data={"email": "alice@example.com", "password": "tickets-demo"}
        )
        session = signed_in.cookies["rastrillo_session"]
    done = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def writer(n: int) -> None:
        nonlocal done
        with httpx.Client(
            base_url=served.base,
            headers={"Origin": ORIGIN},
            cookies={"rastrillo_session": session},
            timeout=30,
        ) as c:
            while time.monotonic() < stop:
                # Each client its own quantity: no two open proposals are identical calls.
                page = c.post(
                    "/_rastrillo/console",
                    data={"tool": "events_id_buy_post", "arg.id": "1", "arg.quantity": str(n + 1)},
                )
                approval = APPROVAL.search(page.text)[1]
                assert (
                    c.post(
                        f"/_rastrillo/approvals/{approval}", data={"decision": "approve"}
                    ).status_code
                    == 303
                )
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
        print(
            f"  {name:<16} {medians[name]:8.1f} {unit}  (rounds: "
            f"{', '.join(f'{v:.0f}' for v in values)}; spread {spread})"
        )
    return medians


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("wrk") is None or shutil.which("taskset") is None:
        sys.exit("bench_workers needs wrk and taskset: apt-get install wrk util-linux")
    base = os.environ.get("RASTRILLO_TEST_POSTGRES_URL")
    if not base:
        sys.exit(
            "bench_workers needs PostgreSQL: bash scripts/with-postgres "
            ".venv/bin/python bench/bench_workers.py"
        )
    print(f"load average before: {load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        app_dir = Path(tmp) / "tickets"
        shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("*.db*", "__pycache__"))
        pg, sqlite = fresh_postgres(base), str(Path(tmp) / "bench.db")

        def measured(db: str, workers: int, what: Callable[[Served, int], float]) -> Callable:
            def run() -> float:
                label = f"{'postgresql' if '://' in db else 'sqlite'} {workers}w"
                served = Served(app_dir, db, workers, label)
                try:
                    return what(served, args.seconds)
                finally:
                    served.close()

            return run

        read = rounds(
            {
                "postgresql 1w": measured(pg, 1, reads),
                "postgresql 2w": measured(pg, 2, reads),
                "sqlite 1w": measured(sqlite, 1, reads),
            },
            args.rounds,
        )
        stock = create_engine(pg)  # enough tickets that every approved buy succeeds
        with stock.begin() as conn:
            conn.execute(text("UPDATE events SET tickets_total = 1000000, tickets_left = 1000000"))
        stock.dispose()
        write = rounds(
            {
                "postgresql 1w": measured(pg, 1, approved_writes),
                "postgresql 2w": measured(pg, 2, approved_writes),
            },
            args.rounds,
        )
    print(f"load average after: {load_average()}")
    print(f"{os.cpu_count()} cores; {args.rounds} rounds of {args.seconds}s, alternating")
    r = report(f"GET {READ_PATH}, {' '.join(WRK)} (wrk: 1 thread, on core 0)", read, "req/s")
    print(
        f"  2 workers / 1 worker on PostgreSQL: {r['postgresql 2w'] / r['postgresql 1w']:.2f}"
        " (goal >= 1.6)"
    )
    print(f"  PostgreSQL / SQLite, 1 worker: {r['postgresql 1w'] / r['sqlite 1w']:.2f}")
    w = report(
        f"approved writes end to end over HTTP ({WRITERS} clients, 3 requests each)",
        write,
        "writes/s",
    )
    print(f"  2 workers / 1 worker: {w['postgresql 2w'] / w['postgresql 1w']:.2f}")


if __name__ == "__main__":
    main()
