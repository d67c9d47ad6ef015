"""The request path's one way to run sync work in a worker thread: a sync ``handle``, a
session's row check.

Starlette's ``run_in_threadpool`` goes through ``anyio.to_thread.run_sync``, whose
capacity limiter, cancel scope and per-loop lookups cost about twice the CPU of the
hand-off itself; every signed-in request pays for one. This hands the call to a
``concurrent.futures.ThreadPoolExecutor`` instead, with what anyio guarantees kept:
at most :data:`MAX_THREADS` threads (anyio's default limit), the caller's context
variables seen in the thread, and a caller cancelled while the call runs still waits
for it to end, so nothing a handler does outlives its request.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["MAX_THREADS", "in_thread"]

MAX_THREADS = 40
"""Worker threads of the process at most, as many as Starlette's own pool allows."""

P = ParamSpec("P")
T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="rastrillo")
    return _pool


async def in_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)`` run in a worker thread, in a copy of the caller's context."""
    context = contextvars.copy_context()
    future: Future[T] = _executor().submit(context.run, func, *args, **kwargs)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        if future.cancel():  # still queued: it never runs
            raise
        while not future.done():  # running: wait for its end, however often cancelled
            try:
                await asyncio.wrap_future(future)
            except BaseException:  # its own outcome, or another cancellation
                continue
        raise
