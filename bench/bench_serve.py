"""Tickets GETs served by Rastrillo against bare Starlette, FastAPI and Litestar.

Two requests, each answered by all four apps doing the same work through the same
`rastrillo.storage.Database` (SQLAlchemy Core on one SQLite file), same run:

- the anonymous page ``/events/1``: look up one event and render the tickets
  demo's Jinja2 template. Goal: Rastrillo >= 1.0 x bare Starlette.
- a signed-in JSON read ``/orders/{id}``: the session cookie's row checked
  (``sessions.store.find_session``), then the user's order queried and sent as
  JSON. Rastrillo runs a sync ``@sessions.require`` handle. Each other app does
  both in one sync endpoint, so one worker-thread hop and no database work on
  the event loop: Starlette's ``def`` endpoint, FastAPI's ``def`` path operation
  (the cookie as a ``Cookie`` parameter, the dict returned), Litestar's handler
  with ``sync_to_thread=True``. Goals: Rastrillo >= 1.0 x Litestar and >= 1.2 x
  bare Starlette, p99 no worse than Litestar's.

Served: each app under uvicorn, one worker (asyncio loop, httptools: the parser uvicorn
picks when it is installed, as with ``uvicorn[standard]``; Rastrillo through
``rastrillo.serve.server_config``, as ``rastrillo serve`` serves it, with its connection
limits; no access log for any of them), loaded by wrk
(``-t1``) at 16 and 64 connections with p99 latency, and the server process's CPU
time per request (from ``/proc``): on a machine shared with other work, requests
per second follow the share of the cores the server is given, CPU per request
does not. All four servers run from start to end; each wrk run of one app is followed
by the same run of the next, in an order rotating with the round, so a change in the
machine's other load falls on the runs compared, not on one app's whole round.
In-process: the same signed-in request, a hand-built ASGI scope, sent straight
into each app in one process, apps alternating each round; goal: Rastrillo's time
per request no more than Litestar's or bare Starlette's.

FastAPI and Litestar are bench-only: the bench makes ``bench/.venv-serve`` on
first run (this checkout installed editable, plus both) and runs itself, every
server and the in-process part from it, so all four use the same uvicorn,
Starlette and SQLAlchemy.

    python bench/bench_serve.py [--seconds 3] [--rounds 5] [--calls 2000]

Needs `wrk` (Debian: apt-get install wrk).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from venvs import bench_python

ROOT = Path(__file__).resolve().parent.parent
TICKETS = ROOT / "examples" / "tickets"
PAGE = "/events/1"
ORDER = "/orders/{id}"
ORIGIN = "http://127.0.0.1:8000"
KINDS = ("starlette", "fastapi", "litestar", "rastrillo")
BASELINES = KINDS[:-1]
CONNECTIONS = (16, 64)
US = "{:.0f}"
REQUIREMENTS = ["fastapi>=0.115,<1", "litestar>=2.12,<3"]


def order_json(ctx: Any) -> Any:
    """Rastrillo's signed-in JSON read (module level: the bench app's route)."""
    import ticketing

    order = ticketing.get_order(ctx.db, ctx.user_id, ctx.params["id"])
    return ctx.not_found() if order is None else ctx.json(order)


def rastrillo_app(db: str) -> Any:
    from rastrillo import handler, sessions
    from rastrillo.loader import load_options
    from rastrillo.routing import Route

    options = load_options(TICKETS)
    json_route = Route("GET", ORDER, "bench", sessions.require(order_json))
    routes = [r for r in options.routes if r.path != ORDER] + [json_route]
    return handler(dataclasses.replace(options, db=db, routes=routes, origin=ORIGIN))


@dataclasses.dataclass
class Work:
    """What every baseline's handler does, so all four do the same."""

    cookie: str
    page: Callable[[str], str | None]
    """The event page's HTML, or None for no such event."""
    order: Callable[[str | None, str], dict[str, Any] | int]
    """The signed-in user's order, else the status to answer (403, 404)."""


def work(db: str) -> Work:
    from jinja2 import Environment, FileSystemLoader

    import ticketing
    from rastrillo.sessions import cookie_name
    from rastrillo.sessions.store import find_session
    from rastrillo.storage import Database

    database = Database(db)
    templates = Environment(loader=FileSystemLoader(TICKETS / "templates"), autoescape=True)

    class _Ctx:  # what the template reads
        user_id = None

    def page(event_id: str) -> str | None:
        found = ticketing.get_event(database, event_id)
        if found is None:
            return None
        return templates.get_template("event.html").render(
            ctx=_Ctx, event=found, max_per_order=ticketing.MAX_PER_ORDER
        )

    def order(presented: str | None, order_id: str) -> dict[str, Any] | int:
        found = None if presented is None else find_session(database, presented, tool_call=False)
        if found is None:
            return 403
        row = ticketing.get_order(database, found.user_id, order_id)
        return 404 if row is None else row

    return Work(cookie_name(ORIGIN), page, order)


def starlette_app(w: Work) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse
    from starlette.routing import Route

    def event(request: Any) -> Any:
        html = w.page(request.path_params["id"])
        if html is None:
            return PlainTextResponse("Not found", status_code=404)
        return HTMLResponse(html)

    def order(request: Any) -> Any:
        found = w.order(request.cookies.get(w.cookie), request.path_params["id"])
        if isinstance(found, int):
            return PlainTextResponse("Refused", status_code=found)
        return JSONResponse(found)

    return Starlette(routes=[Route("/events/{id}", event), Route(ORDER, order)])


def fastapi_app(w: Work) -> Any:
    from fastapi import Cookie, FastAPI, HTTPException
    from fastapi.responses import HTMLResponse

    app = FastAPI()

    @app.get("/events/{id}", response_class=HTMLResponse)
    def event(id: str) -> str:
        html = w.page(id)
        if html is None:
            raise HTTPException(404)
        return html

    @app.get(ORDER)
    def order(id: str, session: str | None = Cookie(None, alias=w.cookie)) -> dict[str, Any]:
        found = w.order(session, id)
        if isinstance(found, int):
            raise HTTPException(found)
        return found

    return app


def litestar_app(w: Work) -> Any:
    from typing import Annotated

    from litestar import Litestar, MediaType, get
    from litestar.exceptions import HTTPException
    from litestar.params import Parameter

    @get("/events/{id:str}", sync_to_thread=True, media_type=MediaType.HTML)
    def event(id: str) -> str:
        html = w.page(id)
        if html is None:
            raise HTTPException(status_code=404)
        return html

    cookie = Annotated[str | None, Parameter(cookie=w.cookie)]

    @get("/orders/{id:str}", sync_to_thread=True, signature_namespace={"SessionCookie": cookie})
    def order(id: str, session: SessionCookie = None) -> dict[str, Any]:  # noqa: F821
        found = w.order(session, id)
        if isinstance(found, int):
            raise HTTPException(status_code=found)
        return found

    return Litestar([event, order])


def build_app(kind: str, db: str) -> Any:
    """The ASGI app under test."""
    if str(TICKETS) not in sys.path:
        sys.path.insert(0, str(TICKETS))
    if kind == "rastrillo":
        return rastrillo_app(db)
    return {"starlette": starlette_app, "fastapi": fastapi_app, "litestar": litestar_app}[kind](
        work(db)
    )


def serve(kind: str, port: int, db: str) -> None:
    import uvicorn

    app = build_app(kind, db)
    if kind == "rastrillo":
        from rastrillo.serve import DrainingServer, server_config

        # As `rastrillo serve` serves it: its httptools protocol with the connection limits.
        config = server_config(app, host="127.0.0.1", port=port, loop="asyncio", access_log=False)
        DrainingServer(config).run()
        return
    else:
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            access_log=False,
            log_level="warning",
            lifespan="off",
            loop="asyncio",
            http="httptools",
        )
    uvicorn.Server(config).run()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, headers: dict[str, str], process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server for {url} exited: {process.returncode}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as answer:
                if answer.status == 200:
                    return
        except OSError:  # not listening yet
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer")
        time.sleep(0.1)


@dataclasses.dataclass(frozen=True)
class Load:
    """One wrk run against one server."""

    rate: float
    """Requests per second."""
    p99: float
    """99th percentile latency, ms."""
    cpu: float
    """The server process's CPU time per request, µs: what a request costs whatever
    share of the cores the machine's other work leaves the server."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, connections: int, seconds: int, headers: dict[str, str], pid: int) -> Load:
    flags = [f for k, v in headers.items() for f in ("-H", f"{k}: {v}")]
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s", "--latency"]
    cpu_before = cpu_seconds(pid)
    out = subprocess.run([*command, *flags, url], capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(pid) - cpu_before
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+)", out)
    if "Non-2xx" in out or (errors is not None and any(int(n) for n in errors.groups())):
        raise RuntimeError(f"{url} answered errors:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    done = int(re.search(r"(\d+) requests in", out).group(1))
    p99, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    return Load(rate, float(p99) * scale, cpu / done * 1e6)


Case = tuple[str, dict[str, str]]
Served = dict[tuple[str, int], Load]


def measure(db: str, seconds: int, rounds: int, cases: dict[str, Case]) -> list[dict[str, Served]]:
    """Every app served at once, each on its own port, then loaded in turn: each round
    runs every case at every connection count on all four apps back to back, in an order
    that rotates with the round, so a change in the machine's other load falls on the four
    runs it compares, not on one app's whole round."""
    processes: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    try:
        for kind in KINDS:
            port = free_port()
            command = [sys.executable, __file__, "--serve", kind, str(port), db]
            processes[kind] = (port, subprocess.Popen(command))
        for port, process in processes.values():
            for path, headers in cases.values():
                url = f"http://127.0.0.1:{port}{path}"
                wait_for(url, headers, process)
                wrk(url, 16, 1, headers, process.pid)  # warm up
        found: list[dict[str, Served]] = []
        for r in range(rounds):
            found.append({kind: {} for kind in KINDS})
            for case, (path, headers) in cases.items():
                for c in CONNECTIONS:
                    for kind in KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]:
                        port, process = processes[kind]
                        url = f"http://127.0.0.1:{port}{path}"
                        found[r][kind][case, c] = wrk(url, c, seconds, headers, process.pid)
        return found
    finally:
        for _, process in processes.values():
            process.terminate()
            process.wait()


def signed_in(db: str) -> tuple[str, dict[str, str]]:
    """The order path and the cookie of a signed-in user who owns that order."""
    from rastrillo.sessions import cookie_name, create_session

    app = build_app("rastrillo", db)
    user, order = app.db.query_one("SELECT user_id, id FROM orders ORDER BY id LIMIT 1")
    session = create_session(app.db, str(user))
    app.db.dispose()
    return ORDER.format(id=order), {"Cookie": f"{cookie_name(ORIGIN)}={session}"}


async def one_request(app: Any, path: str, headers: dict[str, str]) -> int:
    """Send one GET straight into ``app``; its status."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000")]
        + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def in_process(
    db: str, path: str, headers: dict[str, str], calls: int, rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """µs per request of each app, rounds alternating: each round's median wall time,
    and its CPU time (every thread of the process) over its calls."""
    apps = {kind: build_app(kind, db) for kind in KINDS}
    for kind, app in apps.items():
        status = await one_request(app, path, headers)
        if status != 200:
            raise RuntimeError(f"{kind} answered {status} in-process")
    wall: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for r in range(rounds):
        for kind in KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]:
            app, each = apps[kind], []
            cpu_start = time.process_time()
            for _ in range(calls):
                start = time.perf_counter()
                await one_request(app, path, headers)
                each.append(time.perf_counter() - start)
            cpu[kind].append((time.process_time() - cpu_start) / calls * 1e6)
            wall[kind].append(statistics.median(each) * 1e6)
    return wall, cpu


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({', '.join(fmt.format(v) for v in values)})"


def report_served(cases: dict[str, Case], rounds: list[dict[str, Served]]) -> None:
    for case, (path, _) in cases.items():
        for c in CONNECTIONS:
            print(f"{case}, GET {path}, c{c}:")
            for kind in KINDS:
                runs = [r[kind][case, c] for r in rounds]
                print(
                    f"  {kind:<10} {spread([x.rate for x in runs], US)} req/s;"
                    f" p99 {spread([x.p99 for x in runs], '{:.1f}')} ms;"
                    f" server CPU {spread([x.cpu for x in runs], US)} µs/req"
                )
            for base in BASELINES:
                pairs = [(r["rastrillo"][case, c], r[base][case, c]) for r in rounds]
                rate = spread([ours.rate / theirs.rate for ours, theirs in pairs])
                p99 = spread([ours.p99 / theirs.p99 for ours, theirs in pairs])
                cpu = spread([theirs.cpu / ours.cpu for ours, theirs in pairs])
                print(
                    f"  rastrillo/{base:<9} req/s {rate}; p99 {p99}; requests per CPU second {cpu}"
                )


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3, help="each wrk run (default 3)")
    parser.add_argument("--rounds", type=int, default=5, help="served rounds (default 5)")
    parser.add_argument("--calls", type=int, default=2000, help="in-process, per round")
    parser.add_argument("--in-process-only", action="store_true")
    args = parser.parse_args()
    python = bench_python("serve", REQUIREMENTS, with_checkout=True)
    if Path(sys.prefix).resolve() != python.parent.parent.resolve():
        os.execv(python, [str(python), __file__, *sys.argv[1:]])
    if shutil.which("wrk") is None and not args.in_process_only:
        sys.exit("bench_serve needs wrk: apt-get install wrk")
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        order_path, cookie = signed_in(db)
        wall, cpu = asyncio.run(in_process(db, order_path, cookie, args.calls, 5))
        print(
            f"in-process signed-in GET {order_path}, {args.calls} calls x 5 rounds alternating,"
            " µs per request: wall (round medians); CPU of the whole process (rounds)"
        )
        for kind in KINDS:
            print(f"  {kind:<10} wall {spread(wall[kind], US)}; cpu {spread(cpu[kind], US)}")
        for base in BASELINES:
            for name, times in (("wall", wall), ("cpu", cpu)):
                ratios = [a / b for a, b in zip(times["rastrillo"], times[base], strict=True)]
                print(f"  rastrillo/{base:<9} {name} {spread(ratios)}")
        print("  goal: rastrillo/litestar and rastrillo/starlette <= 1.0")
        if args.in_process_only:
            return
        cases = {"anonymous page": (PAGE, {}), "signed-in JSON read": (order_path, cookie)}
        rounds = measure(db, args.seconds, args.rounds, cases)
    print(
        f"served: uvicorn, one worker; wrk -t1 -d{args.seconds}s;"
        f" {args.rounds} rounds alternating; req/s and p99 median (rounds)"
    )
    report_served(cases, rounds)
    print(
        "goals: signed-in read rastrillo/litestar >= 1.0 and rastrillo/starlette >= 1.2 at"
        " c16 and c64, p99 rastrillo/litestar <= 1.0; anonymous page rastrillo/starlette >= 1.0"
    )
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
