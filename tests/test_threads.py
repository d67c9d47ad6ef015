"""The request path's hand-off to a worker thread (`rastrillo.threads.in_thread`)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import signal
import threading
import weakref
from typing import Any

import pytest

from rastrillo import threads
from rastrillo.threads import MAX_THREADS, in_thread

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")


def test_the_call_runs_off_the_loop_and_sees_the_callers_context() -> None:
    async def main() -> tuple[int, int, str]:
        request_id.set("r1")
        loop_thread = threading.get_ident()
        ran_in, seen = await in_thread(lambda: (threading.get_ident(), request_id.get()))
        return loop_thread, ran_in, seen

    loop_thread, ran_in, seen = asyncio.run(main())
    assert ran_in != loop_thread
    assert seen == "r1"


def test_an_exception_reaches_the_caller() -> None:
    def fail(message: str) -> None:
        raise ValueError(message)

    with pytest.raises(ValueError, match="no such order"):
        asyncio.run(in_thread(fail, "no such order"))


def test_a_cancelled_caller_waits_for_the_running_call_to_end() -> None:
    """Like anyio's: a request cancelled mid-handle ends only after its handle did, so a
    stopping server never reports a request done while its thread still writes."""
    release = threading.Event()
    events: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        started = asyncio.Event()

        def handle() -> None:
            loop.call_soon_threadsafe(started.set)
            release.wait()
            events.append("handle ended")

        task = asyncio.create_task(in_thread(handle))
        await started.wait()
        task.cancel()
        # The cancellation is thrown into the task at its next step: a caller that does not
        # wait for its call has ended once the loop has turned.
        for _ in range(3):
            await asyncio.sleep(0)
        assert not task.done(), "the caller ended while its call still ran"
        task.cancel()  # a second cancellation changes nothing
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        events.append("caller ended")

    asyncio.run(main())
    assert events == ["handle ended", "caller ended"]


def test_up_to_max_threads_run_at_once_and_no_more() -> None:
    running = 0
    most = 0
    lock = threading.Lock()
    all_in = threading.Barrier(MAX_THREADS, timeout=10)  # broken if fewer can run at once

    def work() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        all_in.wait()
        with lock:
            running -= 1

    async def main() -> None:
        await asyncio.gather(*(in_thread(work) for _ in range(MAX_THREADS * 2)))

    asyncio.run(main())
    assert most == MAX_THREADS


def test_a_forked_worker_process_starts_threads_of_its_own() -> None:
    """``--workers`` forks the served process: a child must not count the parent's
    threads, which it does not have, or its first call would wait forever."""
    assert asyncio.run(in_thread(lambda: 1)) == 1  # the parent has a thread now
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)  # a hung child fails the test instead of hanging it
        os._exit(0 if asyncio.run(in_thread(lambda: 42)) == 42 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_calls_one_after_another_run_in_one_warm_thread() -> None:
    """The worker that became idle last takes the next call (as anyio's pool does): under
    light load one thread, its caches warm, serves every call, not each thread in turn."""

    async def main() -> set[int]:
        return {await in_thread(threading.get_ident) for _ in range(200)}

    assert len(asyncio.run(main())) == 1


def test_an_idle_thread_keeps_nothing_of_its_last_call_alive() -> None:
    class Made:
        pass

    async def call() -> weakref.ref[Made]:
        made = await in_thread(Made)
        return weakref.ref(made)

    made = asyncio.run(call())
    gc.collect()
    assert made() is None


def test_calls_that_end_before_the_loop_wakes_are_settled_in_one_wake_up() -> None:
    """Each wake-up of the loop is a system call in the worker, which lets go of the GIL
    for it: under load, calls ending together share one."""

    async def main() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        wake_ups = 0
        wake = loop.call_soon_threadsafe

        def counted(*args: Any) -> asyncio.Handle:
            nonlocal wake_ups
            wake_ups += 1
            return wake(*args)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
        finished = threads._Ended()
        calls = [threads._Call(loop) for _ in range(3)]

        def end_all() -> None:
            for n, call in enumerate(calls):
                finished.add(loop, call, n, None)

        workers = threading.Thread(target=end_all)
        workers.start()
        workers.join()  # the loop does not run until all three have ended
        results = [await call.outcome for call in calls]
        later = threads._Call(loop)
        finished.add(loop, later, 3, None)  # one that ends after the wake-up wakes it again
        results.append(await asyncio.wait_for(later.outcome, 10))
        return results, wake_ups

    assert asyncio.run(main()) == ([0, 1, 2, 3], 2)


def test_a_call_raising_stop_iteration_fails_alone_and_its_batch_is_settled() -> None:
    """A sync handle's ``next(...)`` over nothing raises StopIteration, which asyncio will
    not put in a future: the caller gets a RuntimeError from it, and the calls that ended
    in the same wake-up are settled all the same."""

    async def main() -> list[object]:
        loop = asyncio.get_running_loop()
        finished = threads._Ended()
        calls = [threads._Call(loop) for _ in range(4)]

        def end_all() -> None:
            finished.add(loop, calls[0], None, StopIteration("no such row"))
            for n, call in enumerate(calls[1:], 1):
                finished.add(loop, call, n, None)

        ending = threading.Thread(target=end_all)
        ending.start()
        ending.join()  # all four end before the loop wakes
        _, pending = await asyncio.wait([c.outcome for c in calls], timeout=10)
        assert not pending
        with pytest.raises(RuntimeError, match="StopIteration") as raised:
            calls[0].outcome.result()
        assert isinstance(raised.value.__cause__, StopIteration)
        return [call.outcome.result() for call in calls[1:]]

    assert asyncio.run(main()) == [1, 2, 3]


def test_stop_iteration_in_a_handle_reaches_its_caller_as_a_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="StopIteration"):
        asyncio.run(in_thread(lambda: next(iter(()))))


def test_a_call_ending_after_its_loop_closed_is_dropped() -> None:
    class Made:
        pass

    loop = asyncio.new_event_loop()
    call = threads._Call(loop)
    loop.close()
    made = Made()
    finished = threads._Ended()
    finished.add(loop, call, made, None)
    kept = weakref.ref(made)
    del made
    assert kept() is None
    assert not call.outcome.done()


def test_calls_ending_after_their_loop_closed_with_a_wake_up_pending_keep_nothing() -> None:
    """A loop closed after a call's wake-up was scheduled never runs it: the calls ending
    after that are not kept waiting for it (nor are the loop's futures, nor the loop)."""

    class Made:
        pass

    loop = asyncio.new_event_loop()
    finished = threads._Ended()
    finished.add(loop, threads._Call(loop), None, None)  # a wake-up is scheduled
    assert finished.waking
    loop.close()  # before it ran
    made = Made()
    finished.add(loop, threads._Call(loop), made, None)
    kept = weakref.ref(made)
    del made
    assert kept() is None
    assert not finished.calls
