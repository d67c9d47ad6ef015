"""Requests per second of a tickets GET action: Rastrillo against bare Starlette.

Both apps serve the same handler work — look up one event in the same SQLite
database and render the same Jinja2 template — under uvicorn with the same
settings, measured with the same load tool (wrk) in the same run, alternating
rounds so machine noise hits both alike. Goal: Rastrillo >= 0.85 of Starlette.

    python bench/bench_serve.py [--seconds 5] [--rounds 3]

Needs `wrk` (Debian: apt-get install wrk).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
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
PATH = "/events/1"


def build_app(kind: str, db: str):
    """The ASGI app under test, in the server process."""
    sys.path.insert(0, str(TICKETS))
    from rastrillo import handler
    from rastrillo.loader import load_options

    rastrillo_app = handler(dataclasses.replace(load_options(TICKETS), db=db))
    if kind == "rastrillo":
        return rastrillo_app

    from jinja2 import Environment, FileSystemLoader
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, PlainTextResponse
    from starlette.routing import Route

    import ticketing

    templates = Environment(loader=FileSystemLoader(TICKETS / "templates"), autoescape=True)
    database = rastrillo_app.db

    class _Ctx:  # what the template reads
        user_id = None

    def event(request):
        found = ticketing.get_event(database, request.path_params["id"])
        if found is None:
            return PlainTextResponse("Not found", status_code=404)
        html = templates.get_template("event.html").render(
            ctx=_Ctx, event=found, max_per_order=ticketing.MAX_PER_ORDER
        )
        return HTMLResponse(html)

    return Starlette(routes=[Route("/events/{id}", event)])


def serve(kind: str, port: int, db: str) -> None:
    import uvicorn

    uvicorn.run(build_app(kind, db), host="127.0.0.1", port=port, access_log=False,
                log_level="warning", lifespan="off")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(kind: str, db: str, seconds: int) -> float:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, str(port), db])
    url = f"http://127.0.0.1:{port}{PATH}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(url).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} server did not start")
            time.sleep(0.1)
        subprocess.run(["wrk", "-t1", "-c16", "-d1s", url], capture_output=True, check=True)
        out = subprocess.run(["wrk", "-t1", "-c16", f"-d{seconds}s", url],
                             capture_output=True, text=True, check=True).stdout
        if "Non-2xx" in out:
            raise RuntimeError(f"{kind} answered errors:\n{out}")
        return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("bench_serve needs wrk: apt-get install wrk")
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        results: dict[str, list[float]] = {"starlette": [], "rastrillo": []}
        for _ in range(args.rounds):
            for kind in results:
                results[kind].append(measure(kind, db, args.seconds))
    base = statistics.median(results["starlette"])
    ours = statistics.median(results["rastrillo"])
    print(f"GET {PATH} under uvicorn, wrk -t1 -c16 -d{args.seconds}s, median of {args.rounds}")
    for kind, values in results.items():
        print(f"  {kind:<10} {statistics.median(values):8.0f} req/s  "
              f"({', '.join(f'{v:.0f}' for v in values)})")
    print(f"  ratio rastrillo/starlette: {ours / base:.2f} (goal >= 0.85)")


if __name__ == "__main__":
    main()
