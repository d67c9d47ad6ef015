"""`ctx` is fresh per request: concurrent requests never see each other's state."""

import asyncio
import dataclasses

import httpx

from rastrillo import handler
from rastrillo.loader import load_options
from tests.support import write_app

ACTIONS = {
    "echo/[value].GET.py": """
        import asyncio

        async def handle(ctx):
            seen_before = getattr(ctx.request.state, "mine", None)
            ctx.request.state.mine = ctx.params["value"]
            await asyncio.sleep(0.01)
            return ctx.json({"param": ctx.params["value"], "query": ctx.query.get("q"),
                             "state": ctx.request.state.mine, "leak": seen_before,
                             "actor": str(ctx.actor)})
    """,
    "sync/[value].GET.py": """
        import time

        def handle(ctx):
            time.sleep(0.01)
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

            return await asyncio.gather(*(one(k, i) for i in range(100) for k in ("echo", "sync")))

    results = asyncio.run(main())
    for kind, i, body in results:
        assert body["param"] == f"v{i}"
        assert body["query"] == f"q{i}"
        if kind == "echo":
            assert body["state"] == f"v{i}"
            assert body["leak"] is None
            assert body["actor"] == "human"
    assert len(results) == 200
