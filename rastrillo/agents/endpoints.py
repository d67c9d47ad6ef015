"""``/mcp`` and the OAuth endpoints of an app with ``Options.mcp``, built when first asked for.

Building them imports the MCP SDK, over a second of CPU. Paid at start, it would
delay the first page of every process — a scale-to-zero platform's wake-up, a
worker's, a sidecar's — though most serve no agent for a long while, and many never.
So the app routes their paths from the start (:data:`PATHS`, no import needed) and
builds them at the first request to one, once, in a thread of the build's own: the
event loop goes on serving pages meanwhile, and so do the worker threads (agents that
arrive during the build wait for it on the loop, not each holding a worker). ``/mcp``'s
session manager is then started in the app's lifespan, and runs until it ends; an app
used without one (in-process, no server) has ``/mcp`` answer 503, as before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from starlette.types import ASGIApp

from rastrillo.routing import MCP_PATH, OAUTH_PATHS

if TYPE_CHECKING:
    from rastrillo.agents.mcp import McpEndpoint

__all__ = ["PATHS", "AgentEndpoints", "Built"]

PATHS = frozenset({MCP_PATH, *OAUTH_PATHS})
"""Every path the agent endpoints answer: ``/mcp``, the OAuth endpoints and metadata."""


@dataclass(frozen=True)
class Built:
    """The endpoints once built: ``/mcp``, and the ASGI app of each OAuth path."""

    mcp: McpEndpoint
    oauth: Mapping[str, ASGIApp]


class AgentEndpoints:
    """The endpoints at :data:`PATHS`, built by ``build`` (in a thread of its own) at the
    first request to one of them."""

    def __init__(self, build: Callable[[], Built]) -> None:
        self._build = build
        self._built: Built | None = None
        self._lock = threading.Lock()
        self._building: concurrent.futures.Future[Built] | None = None
        """The build under way: requests that come meanwhile (from any event loop) wait
        for it. None again after a failed build, so the next request tries again."""
        self._tasks: anyio.abc.TaskGroup | None = None
        """The lifespan's task group, while the app serves: ``/mcp``'s manager runs in it."""
        self._stop: anyio.Event | None = None
        self._starting: anyio.Lock | None = None
        self._running = False

    async def app_for(self, path: str) -> ASGIApp:
        """The ASGI app answering ``path``, one of :data:`PATHS`, built first if need be;
        for ``/mcp``, with its session manager started when the app has a lifespan."""
        built = self._built
        if built is None:
            built = await asyncio.wrap_future(self._build_started())
        if path != MCP_PATH:
            return built.oauth[path]
        if not self._running and self._tasks is not None:
            await self._start(built.mcp)
        return built.mcp

    def _build_started(self) -> concurrent.futures.Future[Built]:
        """The one build, started by the first request that finds none under way."""
        with self._lock:
            if self._building is None:
                self._building = concurrent.futures.Future()
                # Running: a waiting request that is cancelled cannot cancel the build.
                self._building.set_running_or_notify_cancel()
                threading.Thread(
                    target=self._build_in_thread,
                    args=(self._building,),
                    name="rastrillo-agents-build",
                    daemon=True,
                ).start()
            return self._building

    def _build_in_thread(self, building: concurrent.futures.Future[Built]) -> None:
        try:
            built = self._build()
            if built.oauth.keys() != set(OAUTH_PATHS):
                raise RuntimeError("the OAuth endpoints built are not routing.OAUTH_PATHS")
        except BaseException as exc:
            with self._lock:
                self._building = None
            building.set_exception(exc)
        else:
            self._built = built
            building.set_result(built)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """For as long as the app serves (its lifespan): ``/mcp``'s session manager runs
        in here once it is built, and is stopped on the way out."""
        async with anyio.create_task_group() as tasks:
            self._tasks, self._stop, self._starting = tasks, anyio.Event(), anyio.Lock()
            try:
                yield
            finally:
                self._stop.set()
                self._tasks = None
        self._running = False

    async def _start(self, mcp: McpEndpoint) -> None:
        assert self._starting is not None and self._tasks is not None
        async with self._starting:  # requests that come meanwhile wait for the one start
            if not self._running:
                await self._tasks.start(self._run, mcp)
                self._running = True

    async def _run(self, mcp: McpEndpoint, *, task_status: Any) -> None:
        assert self._stop is not None
        async with mcp.running():
            task_status.started()
            await self._stop.wait()
