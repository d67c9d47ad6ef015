"""The peers' side of bench_dispatch.py: its read and write as fastapi-mcp and FastMCP tools.

Run by ``bench_dispatch.py`` with the Python of the bench-only venv that
``venvs.py`` makes (fastapi-mcp 0.4 needs ``mcp`` 1.x, the framework has 2.x),
never imported by the framework. Both peers serve the tickets demo's
``orders_get`` (user 1's paid orders, newest first, with the event's name) and
``events_id_buy_post`` (read event 1, hold one ticket of it for user 2 with the same UPDATE
and INSERT in one transaction, then read the order back), as JSON, on a copy of the bench's
own SQLite database, through SQLAlchemy Core with the same SQL and the same
connection settings. Neither peer checks a session or an approval: these are
unguarded calls.

- fastapi-mcp: a FastAPI app with sync endpoints (one worker-thread hop each, as
  Rastrillo's sync ``handle``), ``FastApiMCP(app)``, each call made as its MCP
  server makes it (``_execute_api_tool``: an httpx request through
  ``ASGITransport`` into the app, the answer turned into MCP content).
- FastMCP (the ``mcp`` package's ``FastMCP``): the same two functions as tools,
  called with ``FastMCP.call_tool``. FastMCP runs a sync tool on the event loop,
  so its calls make no thread hop at all.

Protocol: ``python peer_tools.py DB CALLS``; each line ``chunk`` on stdin makes
CALLS calls of each way (alternated call by call, as in bench_dispatch.py) and
prints one JSON line: each way's list of microseconds per call.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse
from fastapi_mcp import FastApiMCP
from mcp.server.fastmcp import FastMCP
from sqlalchemy import create_engine, event, text

HOLD = timedelta(minutes=15)
ORDERS = (
    "SELECT orders.*, events.name AS event_name FROM orders"
    " JOIN events ON events.id = orders.event_id"
    " WHERE orders.user_id = :user AND orders.status = :status ORDER BY orders.id DESC"
)
ORDER = (
    "SELECT orders.*, events.name AS event_name, events.venue, events.starts_at"
    " FROM orders JOIN events ON events.id = orders.event_id"
    " WHERE orders.id = :id AND orders.user_id = :user"
)
EVENT = "SELECT * FROM events WHERE id = :id"
TAKE = "UPDATE events SET tickets_left = tickets_left - :n WHERE id = :id AND tickets_left >= :n"
INSERT = (
    "INSERT INTO orders (user_id, event_id, quantity, status, created_at, hold_expires_at)"
    " VALUES (:user, :event, :n, 'held', :created, :expires) RETURNING id"
)


def engine_for(path: str) -> Any:
    """SQLite as Rastrillo's storage sets it up: WAL, a busy timeout, explicit BEGINs."""
    engine = create_engine(
        f"sqlite:///{path}", connect_args={"check_same_thread": False, "timeout": 10}
    )

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in (
            "journal_mode=WAL",
            "foreign_keys=ON",
            "busy_timeout=10000",
            "synchronous=NORMAL",
        ):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def main() -> None:
    path, calls = sys.argv[1], int(sys.argv[2])
    engine = engine_for(path)

    def orders(status: str) -> dict[str, Any]:
        with engine.connect() as conn:
            rows = conn.execute(text(ORDERS), {"user": 1, "status": status}).all()
        return {"orders": [dict(r._mapping) for r in rows]}

    def buy(event_id: int, quantity: int) -> dict[str, Any]:
        with engine.connect() as conn:  # the demo's handler reads the event first
            if conn.execute(text(EVENT), {"id": event_id}).first() is None:
                raise LookupError("no such event")
        created = datetime.now(UTC)
        with engine.begin() as conn:
            if not conn.execute(text(TAKE), {"n": quantity, "id": event_id}).rowcount:
                raise ValueError("not enough tickets left for that event")
            order_id = conn.execute(
                text(INSERT),
                {
                    "user": 2,  # as the bench's writes: user 1's read stays the same work
                    "event": event_id,
                    "n": quantity,
                    "created": created.isoformat(),
                    "expires": (created + HOLD).isoformat(),
                },
            ).scalar_one()
        with engine.connect() as conn:
            row = conn.execute(text(ORDER), {"id": order_id, "user": 2}).first()
        return {"order": dict(row._mapping)}

    api = FastAPI()

    @api.get("/orders", operation_id="orders_get")
    def orders_get(status: Literal["held", "paid", "cancelled"]) -> dict[str, Any]:
        """List my orders, newest first, with their status."""
        return orders(status)

    @api.post("/events/{id}/buy", operation_id="events_id_buy_post")
    def events_id_buy_post(id: int, quantity: int = Query(ge=1, le=10)) -> JSONResponse:
        """Buy tickets for an event."""
        return JSONResponse(buy(id, quantity), status_code=201)

    fastapi_mcp = FastApiMCP(api)

    fastmcp = FastMCP("tickets", log_level="WARNING")  # else it logs every request at INFO

    @fastmcp.tool(name="orders_get")
    def fastmcp_orders(status: Literal["held", "paid", "cancelled"]) -> dict[str, Any]:
        """List my orders, newest first, with their status."""
        return orders(status)

    @fastmcp.tool(name="events_id_buy_post")
    def fastmcp_buy(id: int, quantity: int) -> dict[str, Any]:
        """Buy tickets for an event."""
        if not 1 <= quantity <= 10:
            raise ValueError("quantity is 1 to 10")
        return buy(id, quantity)

    read_args = {"status": "paid"}
    write_args = {"id": 1, "quantity": 1}

    async def by_fastapi_mcp(tool: str, args: dict[str, Any]) -> None:
        content = await fastapi_mcp._execute_api_tool(
            fastapi_mcp._http_client, tool, args, fastapi_mcp.operation_map
        )
        assert '"order' in content[0].text, content

    async def by_fastmcp(tool: str, args: dict[str, Any]) -> None:
        await fastmcp.call_tool(tool, args)

    ways = {
        "fastapi-mcp read": (by_fastapi_mcp, "orders_get", read_args),
        "fastapi-mcp write": (by_fastapi_mcp, "events_id_buy_post", write_args),
        "FastMCP read": (by_fastmcp, "orders_get", read_args),
        "FastMCP write": (by_fastmcp, "events_id_buy_post", write_args),
    }

    async def chunk(n: int) -> dict[str, list[float]]:
        names = list(ways)
        times: dict[str, list[float]] = {name: [] for name in names}
        for step in range(n):
            for name in names[step % len(names) :] + names[: step % len(names)]:
                way, tool, args = ways[name]
                start = time.perf_counter()
                await way(tool, args)
                times[name].append((time.perf_counter() - start) * 1e6)
        return times

    async def serve() -> None:
        await chunk(20)  # warm up
        for line in sys.stdin:
            if line.strip() != "chunk":
                break
            print(json.dumps(await chunk(calls)), flush=True)

    asyncio.run(serve())


if __name__ == "__main__":
    main()
