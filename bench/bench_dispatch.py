"""Per-call time of dispatching a tickets read tool, against two in-process baselines.

All three send the identical request (``GET /orders`` as user 1, the tool-call
marker in the scope so the handler answers the same JSON) through the tickets
app's whole stack — CSRF, sessions, router, ctx, the handler's SQLite query:

- dispatch: ``rastrillo.tools.dispatch`` (validation, session, audit row);
- (a) raw ASGI: a hand-built scope, ``receive`` and ``send`` (the floor);
- (b) httpx: ``httpx.AsyncClient(transport=httpx.ASGITransport(app))``, how
  fastapi-mcp and FastMCP call in-process.

Rounds alternate the three so machine noise hits them alike; each round
reports the median call, and the result is the median of the rounds. Goals: dispatch
<= 1.2 x (a) and <= 0.6 x (b).

    python bench/bench_dispatch.py [--calls 500] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TICKETS = ROOT / "examples" / "tickets"
sys.path.insert(0, str(TICKETS))

from rastrillo import Actor, handler  # noqa: E402
from rastrillo.context import TOOL_CALL_SCOPE_KEY  # noqa: E402
from rastrillo.loader import load_options  # noqa: E402
from rastrillo.sessions import cookie_name, create_session  # noqa: E402
from rastrillo.tools import Call, ToolCallMarker, audit, dispatch  # noqa: E402

TOOL = "orders_get"
PATH = "/orders"


async def timed(calls: int, one: Callable[[], Awaitable[object]]) -> float:
    """Median microseconds of ``calls`` sequential calls (robust to a noisy machine)."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await one()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


async def main(calls: int, rounds: int) -> None:
    tmp = Path(tempfile.mkdtemp())
    try:
        options = load_options(TICKETS)
        app = handler(dataclasses.replace(options, db=str(tmp / "bench.db")))
        session = create_session(app.db, "1")
        agent = Actor.agent("bench")
        marker = ToolCallMarker(Actor(human=False, name="bench", user_id="1"), "bench")
        cookie = f"{cookie_name(app.origin)}={session}".encode()
        call = Call(tool=TOOL, args={}, actor=agent, session=session)

        async def by_dispatch() -> object:
            result = await dispatch(app, options.tools, call)
            assert result.status == 200, result.text
            return result

        async def raw() -> object:
            scope = {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": "GET",
                "scheme": "http",
                "path": PATH,
                "raw_path": PATH.encode(),
                "root_path": "",
                "query_string": b"",
                "headers": [(b"host", b"127.0.0.1:8000"), (b"cookie", cookie)],
                "client": None,
                "server": ("127.0.0.1", 8000),
                TOOL_CALL_SCOPE_KEY: marker,
            }
            status: list[int] = []
            body: list[bytes] = []

            async def receive() -> dict:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: dict) -> None:
                if message["type"] == "http.response.start":
                    status.append(message["status"])
                else:
                    body.append(message.get("body", b""))

            await app(scope, receive, send)
            assert status == [200]
            return b"".join(body)

        async def with_marker(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
            scope[TOOL_CALL_SCOPE_KEY] = marker
            await app(scope, receive, send)

        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=with_marker),
            base_url=app.origin,
            cookies={cookie_name(app.origin): session},
        )

        async def by_httpx() -> object:
            response = await client.get(PATH)
            assert response.status_code == 200
            return response

        ways = {"dispatch": by_dispatch, "(a) raw ASGI": raw, "(b) httpx ASGITransport": by_httpx}
        answers = {name: await one() for name, one in ways.items()}
        assert answers["dispatch"].body == answers["(a) raw ASGI"]  # type: ignore[attr-defined]
        for one in ways.values():  # warm up
            await timed(50, one)
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, one in ways.items():
                times[name].append(await timed(calls, one))
        await client.aclose()
        median = {name: statistics.median(t) for name, t in times.items()}
        print(f"{TOOL} ({PATH}), {calls} calls x {rounds} rounds, µs per call:")
        for name, t in times.items():
            rounds_text = ", ".join(f"{x:.0f}" for x in t)
            print(f"  {name:<26} median {median[name]:6.0f}   rounds {rounds_text}")
        d, a, b = median["dispatch"], median["(a) raw ASGI"], median["(b) httpx ASGITransport"]
        print(f"  dispatch / (a) = {d / a:.2f}  (goal <= 1.2)")
        print(f"  dispatch / (b) = {d / b:.2f}  (goal <= 0.6)")
        audit.flush(app.db)  # every audit row written before its database is deleted
        app.db.dispose()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    ns = parser.parse_args()
    asyncio.run(main(ns.calls, ns.rounds))
