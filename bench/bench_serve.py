"""Requests per second of tickets GETs served: Rastrillo against bare Starlette.

Two requests, each served by both apps doing the same handler work, under
uvicorn with the same settings, measured with the same load tool (wrk, at 16
and 64 connections, with p99 latency) in the same run, alternating rounds so
machine noise hits them alike:

- the anonymous page ``/events/1``: look up one event in SQLite and render
  the same Jinja2 template. Goal: Rastrillo >= 1.0 x Starlette.
- a signed-in JSON read ``/orders/{id}``: the session cookie's row checked
  (``sessions.store.find_session``), then the user's order queried and sent as
  JSON. Rastrillo runs a sync ``@sessions.require`` handle; Starlette a sync
  endpoint that looks the session up and queries in the one worker thread
  Starlette gives it. Goal: Rastrillo >= 1.2 x Starlette.

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
ORDER = "/orders/{id}"


def order_json(ctx):
    """Rastrillo's signed-in JSON read (module level: the bench app's route)."""
    import ticketing

    order = ticketing.get_order(ctx.db, ctx.user_id, ctx.params["id"])
    return ctx.not_found() if order is None else ctx.json(order)


def build_app(kind: str, db: str):
    """The ASGI app under test, in the server process."""
    sys.path.insert(0, str(TICKETS))
    from rastrillo import handler, sessions
    from rastrillo.loader import load_options
    from rastrillo.routing import Route as RastrilloRoute

    options = load_options(TICKETS)
    json_route = RastrilloRoute("GET", ORDER, "bench", sessions.require(order_json))
    routes = [r for r in options.routes if r.path != ORDER] + [json_route]
    rastrillo_app = handler(dataclasses.replace(options, db=db, routes=routes))
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

    from starlette.responses import JSONResponse, Response

    from rastrillo.sessions import cookie_name
    from rastrillo.sessions.store import find_session

    cookie = cookie_name(rastrillo_app.origin)

    def order(request):
        presented = request.cookies.get(cookie)
        found = None if presented is None else find_session(database, presented)
        if found is None:
            return Response("Sign in first.", status_code=403)
        row = ticketing.get_order(database, found.user_id, request.path_params["id"])
        if row is None:
            return PlainTextResponse("Not found", status_code=404)
        return JSONResponse(row)

    return Starlette(routes=[Route("/events/{id}", event), Route(ORDER, order)])


def serve(kind: str, port: int, db: str) -> None:
    import uvicorn

    uvicorn.run(
        build_app(kind, db),
        host="127.0.0.1",
        port=port,
        access_log=False,
        log_level="warning",
        lifespan="off",
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, headers: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url, headers=headers).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer")
        time.sleep(0.1)


def wrk(url: str, connections: int, seconds: int, headers: dict[str, str]) -> tuple[float, float]:
    """Requests per second, and p99 latency in ms."""
    flags = [f for k, v in headers.items() for f in ("-H", f"{k}: {v}")]
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", *flags, url]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"{url} answered errors:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()
    return rate, float(p99) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def measure(
    kind: str, db: str, seconds: int, path: str, headers: dict[str, str]
) -> dict[int, tuple[float, float]]:
    """``kind`` served on a fresh port, at 16 and 64 connections."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, str(port), db])
    url = f"http://127.0.0.1:{port}{path}"
    try:
        wait_for(url, headers)
        wrk(url, 16, 1, headers)  # warm up
        return {c: wrk(url, c, seconds, headers) for c in CONNECTIONS}
    finally:
        proc.terminate()
        proc.wait()


CONNECTIONS = (16, 64)


def signed_in(db: str) -> tuple[str, dict[str, str]]:
    """The order path and the cookie of a signed-in user who owns that order."""
    sys.path.insert(0, str(TICKETS))
    from rastrillo.sessions import cookie_name, create_session

    app = build_app("rastrillo", db)
    user, order = app.db.query_one("SELECT user_id, id FROM orders ORDER BY id LIMIT 1")
    session = create_session(app.db, str(user))
    app.db.dispose()
    return ORDER.format(id=order), {"Cookie": f"{cookie_name(app.origin)}={session}"}


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
        order_path, cookie = signed_in(db)
        cases = {"anonymous page": (PATH, {}), "signed-in JSON read": (order_path, cookie)}
        kinds = ("starlette", "rastrillo")
        results = {
            (case, kind): [] for case in cases for kind in kinds
        }  # each round: {connections: (req/s, p99 ms)}
        for _ in range(args.rounds):
            for case, (path, headers) in cases.items():
                for kind in kinds:
                    results[case, kind].append(measure(kind, db, args.seconds, path, headers))
    print(f"uvicorn, one worker; wrk -t1 -d{args.seconds}s; {args.rounds} rounds alternating")
    for case, (path, _) in cases.items():
        for c in CONNECTIONS:
            print(f"{case} GET {path}, c{c}:")
            for kind in kinds:
                rates = [r[c][0] for r in results[case, kind]]
                p99s = [r[c][1] for r in results[case, kind]]
                print(
                    f"  {kind:<10} {statistics.median(rates):7.0f} req/s"
                    f" ({', '.join(f'{v:.0f}' for v in rates)});"
                    f" p99 {statistics.median(p99s):6.1f} ms"
                    f" ({', '.join(f'{v:.1f}' for v in p99s)})"
                )
            per_round = [
                ours[c][0] / base[c][0]
                for ours, base in zip(
                    results[case, "rastrillo"], results[case, "starlette"], strict=True
                )
            ]
            print(
                f"  rastrillo/starlette: median {statistics.median(per_round):.2f}"
                f" (rounds {', '.join(f'{v:.2f}' for v in per_round)})"
            )


if __name__ == "__main__":
    main()
