"""One read tool call over MCP: Rastrillo's /mcp against fastapi-mcp, and against a plain GET.

Three servers under uvicorn on loopback, each in its own process, serving the
same read: an item as JSON, by id.

- Rastrillo: an app folder with ``items/[id].GET.py`` (a read tool) and
  ``Options(mcp=True)``; the call goes through the bearer check, dispatch, the
  app's middleware and the audit log, as every MCP call does.
- fastapi-mcp 0.4 on an equivalent FastAPI app (``GET /items/{id}``), mounted
  with ``mount_http()``. It needs ``mcp`` 1.x, so it runs from its own venv
  (``bench/.venv-fastapi-mcp``, made on first run), never the framework's.
- The same Rastrillo route fetched with a plain HTTP GET (httpx, keep-alive).

Both MCP servers are called with the official Python client (the framework's
``mcp`` 2.x), one session each, Streamable HTTP; rounds alternate so machine
noise hits all three alike. Goals: Rastrillo <= 0.8 x fastapi-mcp's time per
call, and Rastrillo's MCP overhead over the plain GET under 1 ms.

    python bench/bench_mcp.py [--calls 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from venvs import fastapi_mcp_python

ITEMS = {str(i): {"id": str(i), "name": f"item {i}", "price": i * 3} for i in range(1, 101)}

ACTION = '''\
import rastrillo

from items import ITEMS

TOOL = rastrillo.Tool(description="One item by id.", args={"id": "the item id"})


def handle(ctx):
    item = ITEMS.get(ctx.params["id"])
    if item is None:
        return ctx.text("no such item", status=404)
    return ctx.json(item)
'''
APP = '''\
from pathlib import Path

import rastrillo
from gen import routes, tools

OPTIONS = rastrillo.Options(app_dir=Path(__file__).resolve().parent, routes=routes(),
                            tools=tools(), mcp=True, origin="http://127.0.0.1:{port}")
'''
FASTAPI = '''\
import sys

import uvicorn
from fastapi import FastAPI, HTTPException
from fastapi_mcp import FastApiMCP

ITEMS = {items!r}
app = FastAPI()


@app.get("/items/{{id}}", operation_id="items_id_get")
def item(id: str) -> dict:
    """One item by id."""
    if id not in ITEMS:
        raise HTTPException(404, "no such item")
    return ITEMS[id]


FastApiMCP(app).mount_http()
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited: {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def rastrillo_server(root: Path) -> tuple[subprocess.Popen, str, str]:
    from rastrillo.agents import grants
    from rastrillo.generate import generate
    from rastrillo.storage import Database

    port = free_port()
    (root / "actions" / "items").mkdir(parents=True)
    (root / "actions" / "items" / "[id].GET.py").write_text(ACTION)
    (root / "items.py").write_text(f"ITEMS = {ITEMS!r}\n")
    (root / "app.py").write_text(APP.format(port=port))
    generate(root)
    db = Database(str(root / "app.db"))
    db.open()
    _, token, _ = grants.personal_token(db, user_id="1", agent="bench")
    db.dispose()
    code = textwrap.dedent(f"""
        import sys, uvicorn
        sys.path.insert(0, {str(root)!r})
        from app import OPTIONS
        from rastrillo import handler
        uvicorn.run(handler(OPTIONS), host="127.0.0.1", port={port}, log_level="warning",
                    access_log=False, lifespan="on")
    """)
    process = subprocess.Popen([sys.executable, "-c", code], cwd=root)
    base = f"http://127.0.0.1:{port}"
    wait_up(base + "/healthz", process)
    return process, base, token


def fastapi_server(root: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    script = root / "fastapi_app.py"
    script.write_text(FASTAPI.format(items=ITEMS))
    # fastapi-mcp's mcp 1.x logs a ClosedResourceError trace at every session close.
    process = subprocess.Popen([str(fastapi_mcp_python()), str(script), str(port)],
                               stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    wait_up(base + "/docs", process)
    return process, base


async def mcp_calls(url: str, token: str | None, calls: int, mode: str) -> list[float]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        client = Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)
        async with client:
            for _ in range(20):  # warm up
                await client.call_tool("items_id_get", {"id": "7"})
            times = []
            for i in range(calls):
                started = time.perf_counter()
                result = await client.call_tool("items_id_get", {"id": str(i % 100 + 1)})
                times.append(time.perf_counter() - started)
                assert not result.is_error, result
    return times


async def get_calls(base: str, calls: int) -> list[float]:
    async with httpx.AsyncClient(base_url=base) as http:
        for _ in range(20):
            await http.get("/items/7")
        times = []
        for i in range(calls):
            started = time.perf_counter()
            answer = await http.get(f"/items/{i % 100 + 1}")
            times.append(time.perf_counter() - started)
            assert answer.status_code == 200
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "app").mkdir()
        ours, base, token = rastrillo_server(root / "app")
        theirs, fastapi_base = fastapi_server(root)
        per: dict[str, list[float]] = {
            "rastrillo-mcp": [], "rastrillo-mcp-2025": [], "fastapi-mcp": [], "plain-get": []
        }
        try:
            for _ in range(args.rounds):
                per["rastrillo-mcp"].append(statistics.median(
                    anyio.run(mcp_calls, base + "/mcp", token, args.calls, "2026-07-28")))
                per["rastrillo-mcp-2025"].append(statistics.median(
                    anyio.run(mcp_calls, base + "/mcp", token, args.calls, "legacy")))
                per["fastapi-mcp"].append(statistics.median(
                    anyio.run(mcp_calls, fastapi_base + "/mcp", None, args.calls, "legacy")))
                per["plain-get"].append(statistics.median(
                    anyio.run(get_calls, base, args.calls)))
        finally:
            for process in (ours, theirs):
                process.terminate()
                process.wait(10)
    ms = {name: statistics.median(values) * 1000 for name, values in per.items()}
    ratio = ms["rastrillo-mcp"] / ms["fastapi-mcp"]
    ratio_2025 = ms["rastrillo-mcp-2025"] / ms["fastapi-mcp"]
    overhead = ms["rastrillo-mcp"] - ms["plain-get"]
    print(f"median time per call over {args.rounds} rounds x {args.calls} calls "
          f"(cpu count {os.cpu_count()}):")
    for name, value in ms.items():
        print(f"  {name:18} {value:7.3f} ms")
    print(f"  rastrillo / fastapi-mcp = {ratio:.2f}  (goal <= 0.80; at 2025-11-25: "
          f"{ratio_2025:.2f})")
    print(f"  MCP overhead over the plain GET = {overhead:.3f} ms  (goal < 1 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
