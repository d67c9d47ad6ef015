"""The framework's one way to run sync work in a worker thread: a sync ``handle``, a
session's row check, a framework page's or endpoint's database work. (Two kinds of work
alone run elsewhere, each on a thread of its own: the sidecar's passes, which a stop can
abandon, and the agent endpoints' one build, which must not hold a worker for its second
of imports: ``rastrillo.agents.endpoints``.)

Starlette's ``run_in_threadpool`` goes through ``anyio.to_thread.run_sync``, whose
capacity limiter, cancel scope and per-loop lookups cost about twice the CPU of the
hand-off itself, and a ``concurrent.futures`` executor builds a lock-backed future per
call; every signed-in request pays for one hop. Here a call is one tuple put in the
``SimpleQueue`` of the worker that became idle last (as anyio hands it to its last idle
worker: one warm thread, not each in turn) and its outcome put in its event loop's
:class:`_Ended`, which wakes the loop once for every call that ends before the loop looks,
with what anyio guarantees kept: at most :data:`MAX_THREADS` threads, the caller's
context variables seen in the thread, and a caller cancelled while its call is queued or
running still waits for the call to end, so nothing a handler does outlives its request.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["MAX_THREADS", "in_thread"]

MAX_THREADS = min(32, (getattr(os, "process_cpu_count", os.cpu_count)() or 1) + 4)
"""Worker threads of the process at most: the size of asyncio's default executor (the
cores plus 4, at most 32), not anyio's 40. Requests are mostly Python under one GIL, so
threads beyond that only take the GIL from the event loop and each other: on 2 cores,
40 threads cost each signed-in request more CPU and a longer tail than 6."""

T = TypeVar("T")


class _Call:
    """One call's outcome, settled on the event loop when the call ends."""

    __slots__ = ("ended", "outcome", "settled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.outcome: asyncio.Future[Any] = loop.create_future()
        self.settled = False
        self.ended: asyncio.Future[None] | None = None
        """Set when a caller cancelled before the end waits for the end."""


class _Ended:
    """One event loop's calls that have ended and are not settled yet.

    Waking a loop from another thread is a system call on each side (a byte written to the
    loop's socket, then read back), and the writing thread lets go of the GIL for it: under
    load, one for every call kept the loop and the workers handing the GIL to each other.
    The first call to end schedules one wake-up; those that end before it runs join it.
    """

    __slots__ = ("calls", "waking")

    def __init__(self) -> None:
        self.calls: collections.deque[tuple[_Call, Any, BaseException | None]] = collections.deque()
        self.waking = False
        """A wake-up is scheduled and has not begun settling ``calls``."""

    def add(
        self,
        loop: asyncio.AbstractEventLoop,
        call: _Call,
        result: Any,
        exc: BaseException | None,
    ) -> None:
        """In a worker: ``call`` ended; settle it on ``loop``."""
        if loop.is_closed():  # nobody is left to tell, and no wake-up will ever run
            self.waking = False
            self.calls.clear()
            return
        self.calls.append((call, result, exc))
        # Cleared by the wake-up before it takes the calls: a call added while it is set is
        # still taken by that wake-up.
        if not self.waking:
            self.waking = True
            try:
                loop.call_soon_threadsafe(self._settle_all)
            except RuntimeError:  # a closed loop: nobody is left to tell
                self.waking = False
                self.calls.clear()

    def _settle_all(self) -> None:
        self.waking = False
        calls = self.calls
        try:
            while calls:
                _settle(*calls.popleft())
        finally:
            if calls and not self.waking:  # a settle raised: the others are settled still
                self.waking = True
                asyncio.get_running_loop().call_soon(self._settle_all)


class _Worker:
    """One worker thread, handed calls one at a time through its own inbox."""

    __slots__ = ("inbox",)

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()


_lock = threading.Lock()
_idle: list[_Worker] = []
"""Workers waiting for a call, the one that became idle last at the end: it is handed the
next call, so under light load one warm thread does the work, not each in turn."""
_backlog: collections.deque[tuple[Any, ...]] = collections.deque()
"""Calls waiting for a worker while all :data:`MAX_THREADS` are busy."""
_threads = 0
_finished: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Ended] = (
    weakref.WeakKeyDictionary()
)


def _forget_threads() -> None:
    """In a forked child: the parent's threads are not there, so none is counted, and no
    wake-up one of them was scheduling is waited for."""
    global _lock, _idle, _backlog, _threads, _finished
    _lock, _idle, _backlog, _threads = threading.Lock(), [], collections.deque(), 0
    _finished = weakref.WeakKeyDictionary()


os.register_at_fork(after_in_child=_forget_threads)


async def in_thread(func: Callable[..., T], /, *args: Any) -> T:
    """``func(*args)`` run in a worker thread, in a copy of the caller's context."""
    global _threads
    loop = asyncio.get_running_loop()
    call = _Call(loop)
    with _lock:
        finished = _finished.get(loop)
        if finished is None:
            finished = _finished[loop] = _Ended()
        item = (loop, finished, call, contextvars.copy_context(), func, args)
        if _idle:
            worker: _Worker | None = _idle.pop()
        elif _threads < MAX_THREADS:
            _threads += 1
            worker = _Worker()
            threading.Thread(
                target=_work, args=(worker,), name=f"rastrillo-{_threads}", daemon=True
            ).start()
        else:
            worker = None
            _backlog.append(item)
    if worker is not None:
        worker.inbox.put(item)
    try:
        return await call.outcome
    except asyncio.CancelledError:
        if not call.settled:  # the call goes on in its thread: wait for its end
            ended = call.ended = loop.create_future()
            while not ended.done():
                try:
                    await asyncio.wait((ended,))  # which, cancelled, leaves ``ended`` be
                except asyncio.CancelledError:
                    continue
        raise


def _work(worker: _Worker) -> None:
    item = worker.inbox.get()
    while True:
        loop, finished, call, result, exc = _run(*item)
        # Idle (or given the oldest waiting call) before the caller hears of the end: its
        # next call, often made at once, then finds this thread, not a new one.
        with _lock:
            waiting = _backlog.popleft() if _backlog else None
            if waiting is None:
                _idle.append(worker)
        finished.add(loop, call, result, exc)
        del loop, finished, call, result, exc, item  # an idle thread keeps nothing of its last call
        item = waiting if waiting is not None else worker.inbox.get()


def _run(
    loop: asyncio.AbstractEventLoop,
    finished: _Ended,
    call: _Call,
    context: contextvars.Context,
    func: Callable[..., Any],
    args: tuple[Any, ...],
) -> tuple[asyncio.AbstractEventLoop, _Ended, _Call, Any, BaseException | None]:
    try:
        result = context.run(func, *args)
    except BaseException as exc:
        return loop, finished, call, None, exc
    return loop, finished, call, result, None


def _settle(call: _Call, result: Any, exc: BaseException | None) -> None:
    call.settled = True
    if not call.outcome.cancelled():
        if exc is None:
            call.outcome.set_result(result)
        elif isinstance(exc, StopIteration):  # which no future may carry (asyncio refuses it)
            failed = RuntimeError(f"the call raised StopIteration: {exc!r}")
            failed.__cause__ = exc
            call.outcome.set_exception(failed)
        else:
            call.outcome.set_exception(exc)
    if call.ended is not None:
        call.ended.set_result(None)
