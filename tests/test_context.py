"""`ctx` is fresh per request: concurrent requests never see each other's state."""

import asyncio
import dataclasses

import httpx

from rastrillo import handler
from rastrillo.loader import load_options
from tests.support import write_app

CALLS = 100

ACTIONS = {
    # Every async request waits in its handle until all of them are there, and each sync
    # one until another is in its own handle too: the requests provably overlap.
    "echo/[value].GET.py": f"""
        import asyncio

        arrived = 0
        everyone = asyncio.Event()

        async def handle(ctx):
            global arrived
            seen_before = getattr(ctx.request.state, "mine", None)
            ctx.request.state.mine = ctx.params["value"]
            arrived += 1
            if arrived == {CALLS}:
                everyone.set()
            await asyncio.wait_for(everyone.wait(), 30)
            return ctx.json({{"param": ctx.params["value"], "query": ctx.query.get("q"),
                             "state": ctx.request.state.mine, "leak": seen_before,
                             "actor": str(ctx.actor)}})
    """,
    "sync/[value].GET.py": """
        import threading

        two_at_once = threading.Barrier(2, timeout=30)

        def handle(ctx):
            two_at_once.wait()
            return ctx.json({"param": ctx.params["value"], "query": ctx.query.get("q")})
    """,
}


def test_concurrent_requests_each_get_their_own_ctx(tmp_path):
    app_dir = write_app(tmp_path / "app", ACTIONS)
    app = handler(dataclasses.replace(load_options(app_dir), db=str(tmp_path / "t.db")))

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:

            async def one(kind, i):
                r = await client.get(f"/{kind}/v{i}", params={"q": f"q{i}"})
                return kind, i, r.json()

            return await asyncio.gather(
                *(one(k, i) for i in range(CALLS) for k in ("echo", "sync"))
            )

    results = asyncio.run(main())
    for kind, i, body in results:
        assert body["param"] == f"v{i}"
        assert body["query"] == f"q{i}"
        if kind == "echo":
            assert body["state"] == f"v{i}"
            assert body["leak"] is None
            assert body["actor"] == "human"
    assert len(results) == 2 * CALLS
