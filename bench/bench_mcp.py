"""One read tool call over MCP: Rastrillo's /mcp against fastapi-mcp, and against a plain GET.

Five servers under uvicorn on loopback, each in its own process, serving the
same read: an item as JSON, by id.

- Rastrillo: an app folder with ``items/[id].GET.py`` (a read tool) and
  ``Options(mcp=True)``; the call goes through the bearer check, the grant's call
  limit (set high enough never to refuse), dispatch, the app's middleware and the
  audit log, as every MCP call does.
- fastapi-mcp 0.4 on an equivalent FastAPI app (``GET /items/{id}``), mounted
  with ``mount_http()``. It needs ``mcp`` 1.x, so it runs from its own venv
  (``bench/.venv-fastapi-mcp``, made on first run), never the framework's.
- The same Rastrillo route fetched with a plain HTTP GET, with httpx2: the
  HTTP client the official MCP client itself sends with.
- The client's floor: a canned server, a bare ASGI function that answers each
  MCP request and each GET with the bytes Rastrillo answers, doing no other
  work. Timing the same clients against it gives what the clients themselves
  cost (the official MCP client's JSON-RPC, validation and streams; httpx2;
  uvicorn and the loopback), the same for every server.
- The SDK alone: the official SDK's server, configured as Rastrillo's ``/mcp`` is
  (stateless, JSON answers, no tracing span, no Mcp-Param schema walk), with a
  tool that answers the item and does nothing else: no bearer check, no session,
  no dispatch. Its time less the floor is what the SDK's own per-request work
  costs any server built on it, Rastrillo's included.

Both MCP servers are called with the official Python client (the framework's
``mcp`` 2.x), one session each, Streamable HTTP; Rastrillo at 2026-07-28 (one
request per call, no session) and at 2025-11-25, fastapi-mcp at 2025-11-25
(the only era its ``mcp`` 1.x speaks). Rounds alternate so machine noise hits
all alike. Each figure is given three ways: the time per call the client sees;
the server's share of it (that time less the client's floor at the same
revision); and the server process's CPU time per call (from ``/proc``, less
swayed by other load on the machine than wall time). Goals: Rastrillo <= 0.8 x
fastapi-mcp's time per call, and Rastrillo's MCP overhead over the plain GET
under 1 ms.

    python bench/bench_mcp.py [--calls 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from venvs import fastapi_mcp_python

MODERN, LEGACY = "2026-07-28", "legacy"
ITEMS = {str(i): {"id": str(i), "name": f"item {i}", "price": i * 3} for i in range(1, 101)}
TOOL = {
    "name": "items_id_get",
    "description": "One item by id.",
    "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
}

ACTION = """\
import rastrillo

from items import ITEMS

TOOL = rastrillo.Tool(description="One item by id.", args={"id": "the item id"})


def handle(ctx):
    item = ITEMS.get(ctx.params["id"])
    if item is None:
        return ctx.text("no such item", status=404)
    return ctx.json(item)
"""
APP = """\
from pathlib import Path

import rastrillo
from gen import routes, tools
from rastrillo.limits import CallLimit

# The per-grant call limit counted on every call, as by default, but never reached: the
# bench makes thousands of calls a minute on one token.
OPTIONS = rastrillo.Options(app_dir=Path(__file__).resolve().parent, routes=routes(),
                            tools=tools(), mcp=True, origin="http://127.0.0.1:{port}",
                            mcp_call_limit=CallLimit(calls=10**9))
"""
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

CANNED = """\
import json
import sys

import uvicorn

ITEMS = {items!r}
TOOLS = {tools!r}
INFO = {{"name": "app", "version": "dev"}}
META = {{"io.modelcontextprotocol/serverInfo": INFO}}


def answer(request):
    method, params = request["method"], request.get("params") or {{}}
    if method == "initialize":
        return {{"protocolVersion": params["protocolVersion"], "serverInfo": INFO,
                "capabilities": {{"tools": {{"listChanged": False}}}}}}
    if method == "tools/list":
        return {{"tools": TOOLS, "ttlMs": 0, "cacheScope": "private", "resultType": "complete",
                "_meta": META}}
    item = ITEMS[params["arguments"]["id"]]
    return {{"content": [{{"type": "text", "text": json.dumps(item)}}], "structuredContent": item,
            "isError": False, "resultType": "complete", "_meta": META}}


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    status, out = 200, b""
    if scope["method"] == "GET":
        out = json.dumps(ITEMS[scope["path"].rsplit("/", 1)[1]]).encode()
    else:
        request = json.loads(body)
        if "id" in request:
            reply = {{"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}}
            out = json.dumps(reply).encode()
        else:
            status = 202
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]
    await send({{"type": "http.response.start", "status": status, "headers": headers}})
    await send({{"type": "http.response.body", "body": out}})


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False,
            lifespan="off")
"""

SDK = """\
import json
import sys

import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

ITEMS = {items!r}
TOOLS = [types.Tool.model_validate(tool) for tool in {tools!r}]


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    item = ITEMS[params.arguments["id"]]
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(item))], structured_content=item
    )


# Configured as Rastrillo's /mcp is: no OpenTelemetry span (none is recorded without a
# provider), no input schema walked for Mcp-Param headers, stateless, JSON answers.
server = Server("app", version="dev", on_list_tools=list_tools, on_call_tool=call_tool,
                get_tool_input_schema=lambda name: None)
server.middleware.clear()
manager = StreamableHTTPSessionManager(
    server, stateless=True, json_response=True,
    security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        async with manager.run():
            await receive()
            await send({{"type": "lifespan.startup.complete"}})
            await receive()
        await send({{"type": "lifespan.shutdown.complete"}})
        return
    if scope["path"] != "/mcp":  # up?
        await send({{"type": "http.response.start", "status": 404, "headers": []}})
        await send({{"type": "http.response.body", "body": b""}})
        return
    await manager.handle_request(scope, receive, send)


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


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
            httpx2.get(url, timeout=1)
            return
        except httpx2.TransportError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def rastrillo_server(root: Path) -> tuple[subprocess.Popen, str, str, str]:
    """The server, its base URL, an agent's token and a signed-in user's session cookie."""
    from rastrillo.agents import grants
    from rastrillo.generate import generate
    from rastrillo.sessions import cookie_name, create_session
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
    cookie = f"{cookie_name(f'http://127.0.0.1:{port}')}={create_session(db, '1')}"
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
    return process, base, token, cookie


def fastapi_server(root: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    script = root / "fastapi_app.py"
    script.write_text(FASTAPI.format(items=ITEMS))
    # fastapi-mcp's mcp 1.x logs a ClosedResourceError trace at every session close.
    process = subprocess.Popen(
        [str(fastapi_mcp_python()), str(script), str(port)], stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    wait_up(base + "/docs", process)
    return process, base


def script_server(root: Path, name: str, source: str, ready: str) -> tuple[subprocess.Popen, str]:
    """``source`` (a template of ``ITEMS`` and the tools) served from ``root/name`` on a free
    port, once its path ``ready`` answers."""
    port = free_port()
    script = root / name
    script.write_text(source.format(items=ITEMS, tools=[TOOL]))
    process = subprocess.Popen([sys.executable, str(script), str(port)])
    base = f"http://127.0.0.1:{port}"
    wait_up(base + ready, process)
    return process, base


Call = Callable[[int], Awaitable[None]]
"""Makes the i-th call of a way and checks its answer."""


@asynccontextmanager
async def mcp_caller(url: str, token: str | None, mode: str) -> AsyncIterator[Call]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        client = Client(streamable_http_client(url, http_client=http), mode=mode)
        async with client:

            async def call(i: int) -> None:
                item = str(i % 100 + 1)
                result = await client.call_tool("items_id_get", {"id": item})
                assert not result.is_error, result
                assert json.loads(result.content[0].text) == ITEMS[item], result

            yield call


@asynccontextmanager
async def get_caller(base: str, cookie: str | None = None) -> AsyncIterator[Call]:
    headers = {"Cookie": cookie} if cookie else {}
    async with httpx2.AsyncClient(base_url=base, headers=headers) as http:

        async def call(i: int) -> None:
            item = str(i % 100 + 1)
            answer = await http.get(f"/items/{item}")
            assert answer.json() == ITEMS[item], answer

        yield call


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Way:
    """One way of making the call: who answers, how, and what each round measured."""

    server: subprocess.Popen
    caller: Callable[[], AbstractAsyncContextManager[Call]]
    wall: list[float] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)


async def measure(ways: dict[str, Way], calls: int, rounds: int) -> None:
    """Each round: every way's time per call, the ways taking turns call by call in an order
    shuffled at each turn (so noise from elsewhere on the machine, and what a server still
    does after it answered, hits all alike); then each way alone, for its CPU."""
    async with AsyncExitStack() as stack:
        callers = {
            name: await stack.enter_async_context(way.caller()) for name, way in ways.items()
        }
        for i in range(20):  # warm up
            for call in callers.values():
                await call(i)
        shuffle = random.Random(13).shuffle
        for _ in range(rounds):
            times: dict[str, list[float]] = {name: [] for name in ways}
            for i in range(calls):
                turn = list(callers.items())
                shuffle(turn)
                for name, call in turn:
                    started = time.perf_counter()
                    await call(i)
                    times[name].append(time.perf_counter() - started)
            for name, way in ways.items():
                way.wall.append(statistics.median(times[name]))
                server, client = cpu_seconds(way.server.pid), time.process_time()
                for i in range(calls):
                    await callers[name](i)
                way.server_cpu.append((cpu_seconds(way.server.pid) - server) / calls)
                way.client_cpu.append((time.process_time() - client) / calls)


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def spread(these: list[float], those: list[float]) -> str:
    """The lowest and highest of the rounds' differences (each round's medians), in ms."""
    differences = [(a - b) * 1000 for a, b in zip(these, those, strict=True)]
    return f"{min(differences):.3f}-{max(differences):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    calls = args.calls
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "app").mkdir()
        ours, base, token, cookie = rastrillo_server(root / "app")
        theirs, fastapi_base = fastapi_server(root)
        canned, canned_base = script_server(root, "canned.py", CANNED, "/items/1")
        bare, bare_base = script_server(root, "sdk.py", SDK, "/up")
        mcp, fastapi_mcp, floor_mcp = base + "/mcp", fastapi_base + "/mcp", canned_base + "/mcp"
        ways = {
            "rastrillo-mcp": Way(ours, partial(mcp_caller, mcp, token, MODERN)),
            "rastrillo-mcp-2025": Way(ours, partial(mcp_caller, mcp, token, LEGACY)),
            "fastapi-mcp": Way(theirs, partial(mcp_caller, fastapi_mcp, None, LEGACY)),
            "plain-get": Way(ours, partial(get_caller, base)),
            "plain-get-signed-in": Way(ours, partial(get_caller, base, cookie)),
            "sdk-alone": Way(bare, partial(mcp_caller, bare_base + "/mcp", None, MODERN)),
            "floor-mcp": Way(canned, partial(mcp_caller, floor_mcp, None, MODERN)),
            "floor-mcp-2025": Way(canned, partial(mcp_caller, floor_mcp, None, LEGACY)),
            "floor-get": Way(canned, partial(get_caller, canned_base)),
        }
        try:
            anyio.run(measure, ways, calls, args.rounds)
        finally:
            for process in (ours, theirs, canned, bare):
                process.terminate()
                process.wait(10)
    floor = {
        "rastrillo-mcp": "floor-mcp",
        "rastrillo-mcp-2025": "floor-mcp-2025",
        "fastapi-mcp": "floor-mcp-2025",
        "plain-get": "floor-get",
        "plain-get-signed-in": "floor-get",
        "sdk-alone": "floor-mcp",
    }
    wall = {name: ms(way.wall) for name, way in ways.items()}
    share = {name: wall[name] - wall[base_] for name, base_ in floor.items()}
    cpu = {name: ms(way.server_cpu) for name, way in ways.items()}
    print(
        f"median over {args.rounds} rounds x {calls} calls (cpu count {os.cpu_count()}, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}), ms per call:"
    )
    heads = ("client sees", "server share", "server CPU", "client CPU", "rounds (sees)")
    print(f"  {'':20}" + "".join(f"{head:>13}" for head in heads[:4]) + f"  {heads[4]}")
    for name, way in ways.items():
        column = f"{share[name]:13.3f}" if name in share else f"{'':13}"
        rounds = f"{min(way.wall) * 1000:.3f}-{max(way.wall) * 1000:.3f}"
        print(
            f"  {name:20}{wall[name]:13.3f}{column}{cpu[name]:13.3f}{ms(way.client_cpu):13.3f}"
            f"  {rounds}"
        )
    print("rastrillo / fastapi-mcp (goal <= 0.80):")
    print(
        f"  client sees {wall['rastrillo-mcp'] / wall['fastapi-mcp']:.2f}, "
        f"server share {share['rastrillo-mcp'] / share['fastapi-mcp']:.2f}, "
        f"server CPU {cpu['rastrillo-mcp'] / cpu['fastapi-mcp']:.2f}  "
        f"(at 2025-11-25: {wall['rastrillo-mcp-2025'] / wall['fastapi-mcp']:.2f}, "
        f"{share['rastrillo-mcp-2025'] / share['fastapi-mcp']:.2f}, "
        f"{cpu['rastrillo-mcp-2025'] / cpu['fastapi-mcp']:.2f})"
    )
    print("rastrillo's MCP overhead over the plain GET (goal < 1 ms):")
    print(
        f"  client sees {wall['rastrillo-mcp'] - wall['plain-get']:.3f} ms, of which the "
        f"client's own MCP work (floor) {wall['floor-mcp'] - wall['floor-get']:.3f} ms; "
        f"server share {share['rastrillo-mcp'] - share['plain-get']:.3f} ms, "
        f"server CPU {cpu['rastrillo-mcp'] - cpu['plain-get']:.3f} ms"
    )
    print(
        "  round by round: client sees "
        f"{spread(ways['rastrillo-mcp'].wall, ways['plain-get'].wall)}, floor "
        f"{spread(ways['floor-mcp'].wall, ways['floor-get'].wall)} ms"
    )
    print(
        "  of which the SDK's own server work (the SDK alone, answering the call with no "
        f"other work): client sees {share['sdk-alone']:.3f} ms, server CPU "
        f"{cpu['sdk-alone'] - cpu['floor-mcp']:.3f} ms"
    )
    print(
        "  of which being signed in (the session check a signed-in GET makes too): client sees "
        f"{wall['plain-get-signed-in'] - wall['plain-get']:.3f} ms, server CPU "
        f"{cpu['plain-get-signed-in'] - cpu['plain-get']:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
