"""Per-call time of dispatching a tickets read tool, against two in-process baselines.

All three send the identical request (``GET /orders?status=paid`` as user 1, the
tool-call marker in the scope so the handler answers the same JSON) through the
tickets app's whole stack — CSRF, sessions, router, ctx, the handler's typed
``ctx.args`` and its SQLite query. ``orders_get`` is a typed read tool: its
optional ``status`` has choices, which dispatch checks and encodes and the
handler reads back through ``ctx.args``:

- dispatch: ``rastrillo.tools.dispatch`` (validation, session, audit row);
- (a) raw ASGI: a hand-built scope, ``receive`` and ``send`` (the floor);
- (b) httpx: ``httpx.AsyncClient(transport=httpx.ASGITransport(app))``, how
  fastapi-mcp and FastMCP call in-process.

Then an approved write, ``buy`` (``POST /events/1/buy``, one ticket):

- approved write: ``dispatch`` of a call whose approval the user already gave
  (proposed and approved before the clock starts): session, the approval's
  one use, the handler's transaction, the audit row on disk;
- consent cycle: propose (refused with ConfirmRequired), approve
  (``consent.decide``), run: the whole cycle an agent's write takes;
- (w) raw ASGI write: the same POST, hand-built, with no approval (the floor an
  unguarded in-process write pays).

And the peers, unguarded (no session, no approval), in-process, on a copy of the
same database, run by ``peer_tools.py`` in the bench-only venv ``venvs.py``
makes (fastapi-mcp 0.4 needs ``mcp`` 1.x):

- fastapi-mcp read and write: the same SQL behind FastAPI endpoints, each call
  made as fastapi-mcp's MCP server makes it (httpx through ``ASGITransport``);
- FastMCP read and write: the same SQL as ``mcp``'s ``FastMCP`` tools, called
  with ``call_tool`` (it runs a sync tool on the event loop: no thread hop).

The ways are alternated call by call (paired): each step runs every way once, in
each order in turn, so noise from elsewhere on the machine hits all of them alike
instead of one way's whole round, and each way follows each other equally often.
The peers run in their own process, so a round is made of ten short chunks, ours
and theirs taking turns.
Each round reports each way's median call; the result is the median of the
rounds. Goals: dispatch <= 1.0 x (a) and <= 0.6 x (b); approved write <= 1.0 x
fastapi-mcp's unguarded write, the whole cycle <= 1.5 x it.

    python bench/bench_dispatch.py [--calls 600] [--rounds 5] [--no-peers]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from venvs import fastapi_mcp_python

ROOT = Path(__file__).resolve().parent.parent
TICKETS = ROOT / "examples" / "tickets"
sys.path.insert(0, str(TICKETS))

from rastrillo import Actor, handler  # noqa: E402
from rastrillo.context import TOOL_CALL_SCOPE_KEY  # noqa: E402
from rastrillo.loader import load_options  # noqa: E402
from rastrillo.sessions import cookie_name, create_session  # noqa: E402
from rastrillo.storage import Database  # noqa: E402
from rastrillo.tools import (  # noqa: E402
    Call,
    ConfirmRequired,
    ToolCallMarker,
    audit,
    consent,
    dispatch,
)

TOOL = "orders_get"
PATH = "/orders"
ARGS = {"status": "paid"}
QUERY = b"status=paid"
WRITE = "events_id_buy_post"
WRITE_PATH = "/events/1/buy"
WRITE_ARGS = {"id": "1", "quantity": 1}


Way = tuple[Callable[[], Awaitable[object]], Callable[[object], Awaitable[object]]]
"""An untimed setup, and the timed call given what the setup made."""


async def paired(calls: int, ways: dict[str, Way]) -> dict[str, list[float]]:
    """Microseconds of each call of each way, the ways alternated call by call.

    Each of ``calls`` steps runs every way once, in each order in turn, so a burst of
    load from elsewhere on the machine hits every way alike rather than one way's whole
    round, and every way follows every other equally often: what a heavy way leaves
    behind (its cold caches, its callbacks still queued) lands on each of the others
    alike. (A rotation would not do that: of three ways in rotation, one follows the
    third twice as often as the other does.) Each way is ``(setup, one)``: ``setup``
    runs untimed and what it makes is given to the timed ``one``.
    """
    names = list(ways)
    orders = list(itertools.permutations(names))
    times: dict[str, list[float]] = {name: [] for name in names}
    for step in range(calls):
        for name in orders[step % len(orders)]:
            setup, one = ways[name]
            made = await setup()
            start = time.perf_counter()
            await one(made)
            times[name].append((time.perf_counter() - start) * 1e6)
    return times


def _ignoring(one: Callable[[], Awaitable[object]]) -> Callable[[object], Awaitable[object]]:
    async def call(_: object) -> object:
        return await one()

    return call


class Peer:
    """fastapi-mcp and FastMCP calling the same read and write in-process, in their own
    venv (``venvs.py``) and process (``peer_tools.py``), on a copy of our database."""

    def __init__(self, tmp: Path, db: Database, calls: int) -> None:
        """``calls``: how many calls of each way a chunk makes."""
        copy = tmp / "peer.db"
        assert db.engine.url.database is not None
        with sqlite3.connect(db.engine.url.database) as ours, sqlite3.connect(copy) as theirs:
            ours.backup(theirs)
        self.process = subprocess.Popen(
            [
                str(fastapi_mcp_python()),
                str(Path(__file__).with_name("peer_tools.py")),
                str(copy),
                str(calls),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def chunk(self) -> dict[str, list[float]]:
        """One chunk of the round's calls, each call's microseconds per way."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("chunk\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"peer_tools.py ended: {self.process.wait()}")
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


def report(title: str, times: dict[str, list[float]]) -> dict[str, float]:
    median = {name: statistics.median(t) for name, t in times.items()}
    print(title)
    for name, t in times.items():
        rounds_text = ", ".join(f"{x:.0f}" for x in t)
        print(f"  {name:<26} median {median[name]:6.0f}   rounds {rounds_text}")
    return median


def ratio(times: dict[str, list[float]], top: str, bottom: str, goal: str) -> None:
    """The same-run ratio of two ways, and its spread over the rounds (round by round)."""
    per_round = [t / b for t, b in zip(times[top], times[bottom], strict=True)]
    median = statistics.median(times[top]) / statistics.median(times[bottom])
    print(
        f"  {top} / {bottom} = {median:.2f}  (rounds {min(per_round):.2f}-{max(per_round):.2f};"
        f" goal {goal})"
    )


async def main(calls: int, rounds: int, peers: bool) -> None:
    tmp = Path(tempfile.mkdtemp())
    try:
        options = load_options(TICKETS)
        app = handler(dataclasses.replace(options, db=str(tmp / "bench.db")))
        session = create_session(app.db, "1")
        # The writes are user 2's: each adds an order, and user 1's read must do the same
        # work in the last round as in the first.
        writer = create_session(app.db, "2")
        app.db.execute("UPDATE events SET tickets_left = 100000000 WHERE id = 1")
        peer = Peer(tmp, app.db, calls // 10) if peers else None
        agent = Actor.agent("bench")
        marker = ToolCallMarker(Actor(human=False, name="bench", user_id="1"))
        writer_marker = ToolCallMarker(Actor(human=False, name="bench", user_id="2"))
        cookie = f"{cookie_name(app.origin)}={session}".encode()
        writer_cookie = f"{cookie_name(app.origin)}={writer}".encode()
        call = Call(tool=TOOL, args=ARGS, actor=agent, session=session)

        async def by_dispatch() -> object:
            result = await dispatch(app, call)
            assert result.status == 200, result.text
            return result

        async def asgi(
            method: str, path: str, query: bytes, body: bytes, headers: list, writes: bool = False
        ) -> bytes:
            scope = {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": method,
                "scheme": "http",
                "path": path,
                "raw_path": path.encode(),
                "root_path": "",
                "query_string": query,
                "headers": [
                    (b"host", b"127.0.0.1:8000"),
                    (b"cookie", writer_cookie if writes else cookie),
                    *headers,
                ],
                "client": None,
                "server": ("127.0.0.1", 8000),
                TOOL_CALL_SCOPE_KEY: writer_marker if writes else marker,
            }
            status: list[int] = []
            chunks: list[bytes] = []

            async def receive() -> dict:
                return {"type": "http.request", "body": body, "more_body": False}

            async def send(message: dict) -> None:
                if message["type"] == "http.response.start":
                    status.append(message["status"])
                else:
                    chunks.append(message.get("body", b""))

            await app(scope, receive, send)
            assert status in ([200], [201]), status
            return b"".join(chunks)

        async def raw() -> object:
            return await asgi("GET", PATH, QUERY, b"", [])

        async def with_marker(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
            scope[TOOL_CALL_SCOPE_KEY] = marker
            await app(scope, receive, send)

        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=with_marker),
            base_url=app.origin,
            cookies={cookie_name(app.origin): session},
        )

        async def by_httpx() -> object:
            response = await client.get(PATH, params=ARGS)
            assert response.status_code == 200
            return response

        reads = {"dispatch": by_dispatch, "(a) raw ASGI": raw, "(b) httpx ASGITransport": by_httpx}
        answers = {name: await one() for name, one in reads.items()}
        assert answers["dispatch"].body == answers["(a) raw ASGI"]  # type: ignore[attr-defined]

        async def nothing() -> None:
            return None

        ways = {name: (nothing, _ignoring(one)) for name, one in reads.items()}
        write = Call(tool=WRITE, args=WRITE_ARGS, actor=agent, session=writer)
        form = b"quantity=1"
        form_headers = [
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"content-length", str(len(form)).encode()),
        ]

        async def propose() -> str:
            try:
                await dispatch(app, write)
            except ConfirmRequired as exc:
                return exc.approval_id
            raise AssertionError("a write ran without approval")

        async def approved() -> str:
            approval_id = await propose()
            consent.decide(app.db, "2", approval_id, True)
            return approval_id

        async def run_approved(approval_id: object) -> object:
            call = dataclasses.replace(write, approval=approval_id)
            result = await dispatch(app, call)
            assert result.status == 201, result.text
            return result

        async def cycle(_: object) -> object:
            return await run_approved(await approved())

        async def raw_write(_: object) -> object:
            return await asgi("POST", WRITE_PATH, b"", form, form_headers, writes=True)

        writes = {
            "approved write": (approved, run_approved),
            "consent cycle": (nothing, cycle),
            "(w) raw ASGI write": (nothing, raw_write),
        }
        write_calls = max(calls // 5, 40)
        await paired(50, ways)  # warm up
        await paired(20, writes)
        times: dict[str, list[float]] = {}
        wtimes: dict[str, list[float]] = {}
        ptimes: dict[str, list[float]] = {}
        chunks = 10
        for _ in range(rounds):
            # Each round in short chunks, ours and the peers' taking turns, so a burst of
            # load from elsewhere falls on both processes alike; its median per way.
            taken: dict[str, list[float]] = {}
            for _ in range(chunks):
                made = [
                    await paired(calls // chunks, ways),
                    await paired(write_calls // chunks, writes),
                ]
                if peer is not None:
                    made.append(peer.chunk())
                for part in made:
                    for name, values in part.items():
                        taken.setdefault(name, []).extend(values)
            for name, values in taken.items():
                whole = wtimes if name in writes else times if name in ways else ptimes
                whole.setdefault(name, []).append(statistics.median(values))
        await client.aclose()
        title = f"{TOOL} ({PATH}?{QUERY.decode()}), {calls} calls x {rounds} rounds, µs per call:"
        report(title, times)
        ratio(times, "dispatch", "(a) raw ASGI", "<= 1.0")
        ratio(times, "dispatch", "(b) httpx ASGITransport", "<= 0.6")
        title = f"{WRITE} ({WRITE_PATH}), {write_calls} calls x {rounds} rounds, µs per call:"
        report(title, wtimes)
        ratio(wtimes, "approved write", "(w) raw ASGI write", "<= 1.0 x an unguarded write")
        ratio(wtimes, "consent cycle", "(w) raw ASGI write", "<= 1.5 x an unguarded write")
        if peer is not None:
            peer.close()
            title = f"peers, in-process, unguarded, {calls} calls x {rounds} rounds, µs per call:"
            report(title, ptimes)
            both = {**times, **wtimes, **ptimes}
            ratio(both, "dispatch", "fastapi-mcp read", "-")
            ratio(both, "dispatch", "FastMCP read", "-")
            ratio(both, "approved write", "fastapi-mcp write", "<= 1.0")
            ratio(both, "consent cycle", "fastapi-mcp write", "<= 1.5")
            ratio(both, "approved write", "FastMCP write", "-")
        audit.flush(app.db)  # every audit row written before its database is deleted
        app.db.dispose()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--no-peers", action="store_true", help="leave out fastapi-mcp and FastMCP (no venv)"
    )
    ns = parser.parse_args()
    asyncio.run(main(ns.calls, ns.rounds, not ns.no_peers))
