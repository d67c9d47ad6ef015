"""A cold start: ``python app.py`` of the tickets demo until its first page is served.

Two copies of the demo, alike but for one setting, started in turn (same run, so
the machine's noise falls on both): the demo as it is, with ``mcp=True``, and the
demo with ``mcp=False``. Each start is timed from the process's launch to the first
200 of ``GET /events/1``, polled every 5 ms; then the process is stopped and the
next starts. A platform that scales to zero pays this at every wake-up, so an
app that turns MCP on must not start slower for it: ``/mcp``, OAuth and the MCP
SDK they import are built at the first agent request, not at start.
Goal: with MCP ÷ without ≤ 1.1.

    python bench/bench_start.py [--starts 8]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TICKETS = ROOT / "examples" / "tickets"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_start(app_dir: Path) -> float:
    """Seconds from launching ``python app.py`` to its first page; the database made anew."""
    for made in app_dir.glob("tickets.db*"):
        made.unlink()
    port = free_port()
    url = f"http://127.0.0.1:{port}/events/1"
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "app.py", "--addr", f"127.0.0.1:{port}"],
        cwd=app_dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(timeout=5) as client:
            while True:
                try:
                    if client.get(url).status_code == 200:
                        return time.perf_counter() - started
                except httpx.TransportError:
                    pass
                if process.poll() is not None:
                    raise SystemExit(f"{app_dir.name}: app.py ended with {process.returncode}")
                time.sleep(0.005)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=8)
    starts = parser.parse_args().starts
    with tempfile.TemporaryDirectory() as tmp:
        apps = {}
        for name, mcp in (("with MCP", "True"), ("without MCP", "False")):
            app_dir = Path(tmp) / name.replace(" ", "-")
            shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("tickets.db*"))
            app_py = app_dir / "app.py"
            text = app_py.read_text()
            assert "    mcp=True," in text
            app_py.write_text(text.replace("    mcp=True,", f"    mcp={mcp},"))
            apps[name] = app_dir
        for app_dir in apps.values():
            one_start(app_dir)  # compiles the copy's modules: not a cold start to measure
        times: dict[str, list[float]] = {name: [] for name in apps}
        for n in range(starts):
            order = list(apps) if n % 2 == 0 else list(reversed(apps))
            for name in order:
                times[name].append(one_start(apps[name]))
    print(f"tickets demo, python app.py to its first page, {starts} starts each, seconds:")
    for name, t in times.items():
        spread = ", ".join(f"{x:.2f}" for x in t)
        print(f"  {name:<12} median {statistics.median(t):.2f}   starts {spread}")
    pairs = [a / b for a, b in zip(times["with MCP"], times["without MCP"], strict=True)]
    ratio = statistics.median(times["with MCP"]) / statistics.median(times["without MCP"])
    print(
        f"  with MCP / without MCP = {ratio:.2f}  (pairs {min(pairs):.2f}-{max(pairs):.2f};"
        " goal <= 1.1)"
    )


if __name__ == "__main__":
    main()
