"""The sidecar loop: run a pass, wait until its next due instant, repeat, never die.

The control loop runs on the main thread's event loop and only ever waits;
the pass itself runs elsewhere (a sync pass on a thread of its own, an async
pass on a long-lived event loop in a worker thread). So a pass that blocks,
hangs or ignores cancellation cannot delay the reaction to SIGTERM, and after
the shutdown grace the loop can walk away from it.

Time: "is it due?" is asked of the wall clock (a due instant is a wall-clock
fact); how long to sleep is measured on the monotonic clock, in chunks of at
most a minute, so a clock step or a suspend never oversleeps by more than one
chunk. Both clocks and the sleeper are injectable, which is how the schedule
is tested to the second without waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import random
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from ..clock import SYSTEM_CLOCK, Clock, InstantError, as_instant
from ..errors import ConfigError
from .lease import DEFAULT_NAME, Lease, record_pass

if TYPE_CHECKING:
    from ..storage import Database

logger = logging.getLogger("rastrillo.sidecar")

POLL_FLOOR = 60.0
"""Seconds to wait after a pass that reports nothing scheduled."""
BACKOFF_INITIAL = 1.0
BACKOFF_CAP = 300.0
MIN_PASS_GAP = 0.1
"""Seconds between pass starts at the least: at most 10 passes a second, whatever a pass returns."""
MAX_CHUNK = 60.0
"""The longest single sleep before the wall clock is consulted again."""
SHUTDOWN_GRACE = 15.0
"""How long a pass that was asked to stop may take before it is abandoned."""
PAST_DUE_WARN_STREAK = 10

EXIT_ABANDONED = 1

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class PassContext:
    """What one pass receives.

    ``stopping`` is set when the sidecar is shutting down (or lost its lease):
    a sync pass should check ``ctx.stopping.is_set()`` between units of work
    and return; an async pass is also cancelled. ``scheduled_for`` is the
    instant this pass serves, which with ``first`` (the catch-up pass at
    start-up) is what a pass needs to be idempotent.
    """

    stopping: threading.Event
    started_at: datetime
    scheduled_for: datetime
    pass_id: int
    first: bool
    db: Database | None


PassResult = datetime | None
PassFunction = Callable[[PassContext], PassResult | Awaitable[PassResult]]


Sleeper = Callable[[float, asyncio.Event], Awaitable[None]]
"""Sleep for the given seconds, or until the event is set, whichever is first."""


async def event_sleep(seconds: float, wake: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), seconds)


class PassResultError(TypeError):
    """A pass returned something other than an aware datetime or None."""


def interpret(result: object, source: str = "the sidecar pass") -> datetime | None:
    """The next due instant in UTC, or None; a `PassResultError` for anything else."""
    if result is None:
        return None
    try:
        return as_instant(result, f"{source} returned")
    except InstantError as exc:
        raise PassResultError(str(exc)) from None


def backoff(failures: int) -> float:
    """The wait after the given number of consecutive failures: 1, 2, 4 … 256, 300, 300 s."""
    return min(BACKOFF_INITIAL * 2 ** min(failures - 1, 16), BACKOFF_CAP)


def equal_jitter(wait: float, rng: random.Random) -> float:
    """A wait in [wait/2, wait]: spreads retries without the near-zero waits of full jitter."""
    return wait / 2 + rng.uniform(0, wait / 2)


def is_async_callable(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def _utc(instant: datetime | None) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if instant is not None else "none"


@dataclass(frozen=True, kw_only=True)
class Sidecar:
    """A pass function with the settings of its loop.

    ``Options(sidecar=fn)`` is shorthand for ``Options(sidecar=Sidecar(pass_fn=fn))``.
    ``name`` keys the lease and the recorded state: set it when two apps share
    one database. ``lease_ttl`` bounds how long a standby waits for a dead
    holder; it must comfortably exceed a database write.
    """

    pass_fn: PassFunction
    name: str = DEFAULT_NAME
    jitter: bool = False
    lease_ttl: float = 60.0
    shutdown_grace: float = SHUTDOWN_GRACE


def as_sidecar(value: object) -> Sidecar | None:
    """``Options.sidecar`` as a `Sidecar`: None stays None, a function gets the defaults."""
    if value is None or isinstance(value, Sidecar):
        return value
    if not callable(value):
        raise ConfigError(
            "Options.sidecar must be a pass function or a rastrillo.sidecar.Sidecar, "
            f"not {type(value).__name__}"
        )
    return Sidecar(pass_fn=value)


class _AsyncRunner:
    """A daemon thread running one event loop for the life of the process.

    Async passes run here rather than on the control loop, so loop-bound
    resources (an async HTTP client, say) survive from pass to pass while a
    pass that blocks its loop cannot block signal handling.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(
            target=self.loop.run_forever, name="rastrillo-sidecar-async", daemon=True
        ).start()

    def start(self, call: Callable[[], Awaitable[Any]], done: Callable[[Any, Any], None]) -> Any:
        """Start ``call()`` as a task; returns a function that cancels it from any thread."""
        holder: list[asyncio.Task[Any]] = []

        def begin() -> None:
            holder.append(self.loop.create_task(_settle(call, done)))

        self.loop.call_soon_threadsafe(begin)
        # Callbacks run in order, so the cancel always finds the task begun.
        return lambda: self.loop.call_soon_threadsafe(lambda: holder[0].cancel())

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


async def _settle(call: Callable[[], Awaitable[Any]], done: Callable[[Any, Any], None]) -> None:
    try:
        result = await call()
    except BaseException as exc:  # reported to the control loop, which decides
        done(None, exc)
    else:
        done(result, None)


def in_thread(fn: Callable[[], T]) -> asyncio.Future[T]:
    """Run blocking ``fn`` on a fresh daemon thread; the loop can stop waiting for it at will.

    Unlike an executor, nothing joins these threads at exit, which is what
    lets an abandoned pass stay abandoned.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, exc: BaseException | None) -> None:
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    def body() -> None:
        try:
            result = fn()
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=body, name="rastrillo-sidecar", daemon=True).start()
    return future


@dataclass
class _Outcome:
    result: object = None
    error: BaseException | None = None
    abandoned: bool = False
    forced: bool = False


class SidecarLoop:
    """Runs ``pass_fn`` until a signal, as CONTRACT section 11 describes."""

    def __init__(
        self,
        pass_fn: PassFunction,
        *,
        db: Database | None = None,
        lease: Lease | None = None,
        name: str = DEFAULT_NAME,
        jitter: bool = False,
        shutdown_grace: float = SHUTDOWN_GRACE,
        clock: Clock | None = None,
        sleeper: Sleeper = event_sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.pass_fn = pass_fn
        self.db = db
        self.lease = lease
        self.name = name
        self.jitter = jitter
        self.shutdown_grace = shutdown_grace
        self.clock = clock or (db.clock if db is not None else SYSTEM_CLOCK)
        self.sleeper = sleeper
        self.rng = rng or random.Random()
        self.passes = 0
        self._renew_every = lease.ttl / 3 if lease else MAX_CHUNK
        self._renewed_at = -math.inf
        self._signum: int | None = None
        self._stop: asyncio.Event
        self._force: asyncio.Event
        self._runner: _AsyncRunner | None = None

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """First call: stop after (or abandon) the current pass. Second: force the exit."""
        if self._stop.is_set():
            logger.warning("sidecar: second signal %s; forcing exit", signal.Signals(signum).name)
            self._force.set()
            return
        self._signum = signum
        logger.info("sidecar: %s received; stopping", signal.Signals(signum).name)
        self._stop.set()

    async def run(self, *, handle_signals: bool = True) -> int:
        """Loop until stopped; the process exit code: 0, or non-zero for an abandoned pass."""
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        loop = asyncio.get_running_loop()
        if handle_signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, self.request_stop, signum)
        if is_async_callable(self.pass_fn):
            self._runner = _AsyncRunner()
        logger.info(
            "sidecar starting poll_floor_s=%.0f backoff_cap_s=%.0f jitter=%s lease_ttl_s=%s",
            POLL_FLOOR,
            BACKOFF_CAP,
            self.jitter,
            f"{self.lease.ttl:g}" if self.lease is not None else "none",
        )
        code = 0
        try:
            code = await self._loop()
        finally:
            if self._runner is not None:
                self._runner.close()
            if self.lease is not None and code == 0:
                await self._release()
            if handle_signals:
                for signum in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(signum)
        reason = "signal" if self._signum is not None else "stopped"
        logger.info("sidecar exiting reason=%s exit_code=%d passes=%d", reason, code, self.passes)
        return code

    async def _loop(self) -> int:
        failures = 0
        past_due_streak = 0
        scheduled_for = self.clock.now()
        while not self._stop.is_set():
            if self.lease is not None and not await self._hold_lease():
                return 0
            started_mono = self.clock.monotonic()
            ctx = PassContext(
                stopping=threading.Event(),
                started_at=self.clock.now(),
                scheduled_for=scheduled_for,
                pass_id=self.passes + 1,
                first=self.passes == 0,
                db=self.db,
            )
            self.passes += 1
            outcome = await self._run_pass(ctx)
            duration_ms = (self.clock.monotonic() - started_mono) * 1000
            if outcome.abandoned or outcome.forced:
                logger.error(
                    "sidecar pass pass_id=%d outcome=abandoned duration_ms=%.0f: it did not stop "
                    "within %.0f s of being asked",
                    ctx.pass_id,
                    duration_ms,
                    self.shutdown_grace,
                )
                return EXIT_ABANDONED if outcome.abandoned else 128 + (self._signum or 15)
            error = outcome.error
            if isinstance(error, KeyboardInterrupt | SystemExit):
                raise error
            if ctx.stopping.is_set() and error is not None:
                logger.info(
                    "sidecar pass pass_id=%d outcome=cancelled duration_ms=%.0f next_due=unchanged "
                    "sleep_s=0",
                    ctx.pass_id,
                    duration_ms,
                )
                continue
            due: datetime | None = None
            if error is None:
                try:
                    due = interpret(outcome.result)
                except PassResultError as exc:
                    error = exc
            now = self.clock.now()
            mono_deadline: float | None = None
            if error is not None:
                failures += 1
                past_due_streak = 0
                wait = backoff(failures)
                if self.jitter:
                    wait = equal_jitter(wait, self.rng)
                target = now + timedelta(seconds=wait)
                mono_deadline = self.clock.monotonic() + wait
                recorded = target
            else:
                failures = 0
                if due is None:
                    target = now + timedelta(seconds=POLL_FLOOR)
                    mono_deadline = self.clock.monotonic() + POLL_FLOOR
                    past_due_streak = 0
                else:
                    target = due
                    past_due_streak = past_due_streak + 1 if due <= now else 0
                    if past_due_streak == PAST_DUE_WARN_STREAK:
                        logger.warning(
                            "sidecar: the pass keeps returning an instant already past; "
                            "re-running at most %d times a second",
                            round(1 / MIN_PASS_GAP),
                        )
                recorded = due
            not_before = started_mono + MIN_PASS_GAP
            sleep_s = self._remaining(target, mono_deadline, not_before)
            if error is not None:
                logger.error(
                    "sidecar pass pass_id=%d outcome=error duration_ms=%.0f next_due=%s "
                    "sleep_s=%.3f consecutive_failures=%d retry_in_s=%.3f error=%s: %s",
                    ctx.pass_id,
                    duration_ms,
                    _utc(recorded),
                    sleep_s,
                    failures,
                    sleep_s,
                    type(error).__name__,
                    error,
                    exc_info=error,
                )
            else:
                logger.info(
                    "sidecar pass pass_id=%d outcome=ok duration_ms=%.0f next_due=%s sleep_s=%.3f",
                    ctx.pass_id,
                    duration_ms,
                    _utc(recorded),
                    sleep_s,
                )
            await self._record(ctx, error is None, failures, recorded)
            if await self._sleep_until(target, mono_deadline, not_before):
                return 0
            scheduled_for = target
        return 0

    def _remaining(self, target: datetime, mono_deadline: float | None, not_before: float) -> float:
        mono = self.clock.monotonic()
        remaining = (target - self.clock.now()).total_seconds()
        if mono_deadline is not None:
            remaining = min(remaining, mono_deadline - mono)
        return max(remaining, not_before - mono, 0.0)

    async def _sleep_until(
        self, target: datetime, mono_deadline: float | None, not_before: float
    ) -> bool:
        """Sleep until ``target`` on the wall clock (or ``mono_deadline``), never before
        ``not_before``; True when stopped instead."""
        while not self._stop.is_set():
            remaining = self._remaining(target, mono_deadline, not_before)
            if remaining <= 0:
                return False
            await self.sleeper(min(remaining, MAX_CHUNK, self._renew_every), self._stop)
            if self.lease is not None and not self._stop.is_set() and not await self._keep_lease():
                return False  # the lease is gone: back to standby before the next pass
        return True

    async def _run_pass(self, ctx: PassContext) -> _Outcome:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_Outcome] = loop.create_future()

        def settle(result: object, error: BaseException | None) -> None:
            loop.call_soon_threadsafe(_set_once, done, _Outcome(result, error))

        if self._runner is not None:
            cancel = self._runner.start(lambda: self.pass_fn(ctx), settle)
        else:
            cancel = None
            in_thread(lambda: self.pass_fn(ctx)).add_done_callback(
                lambda f: _set_once(done, _Outcome(*_unwrap(f)))
            )

        asked_at: float | None = None
        while True:
            if asked_at is None and self._stop.is_set():
                asked_at = self._ask_to_stop(ctx, cancel)
            timeout = self._renew_every if self.lease is not None else None
            if asked_at is not None:
                left = asked_at + self.shutdown_grace - time.monotonic()
                if left <= 0:
                    return _Outcome(abandoned=True)
                timeout = min(timeout, left) if timeout is not None else left
            watched: list[asyncio.Future[Any]] = [done, asyncio.ensure_future(self._force.wait())]
            if asked_at is None:
                watched.append(asyncio.ensure_future(self._stop.wait()))
            await asyncio.wait(watched, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            for waiter in watched[1:]:
                waiter.cancel()
            if done.done():
                return done.result()
            if self._force.is_set():
                return _Outcome(forced=True)
            if (
                self.lease is not None
                and asked_at is None
                and not await self._keep_lease()
                and not self._stop.is_set()
            ):
                logger.error("sidecar: lease lost during a pass; asking the pass to stop")
                asked_at = self._ask_to_stop(ctx, cancel)

    @staticmethod
    def _ask_to_stop(ctx: PassContext, cancel: Callable[[], object] | None) -> float:
        ctx.stopping.set()
        if cancel is not None:
            cancel()
        return time.monotonic()

    async def _hold_lease(self) -> bool:
        """Wait as a quiet standby until the lease is ours; False when stopped first."""
        standby_logged = False
        while not self._stop.is_set():
            if await self._keep_lease():
                if standby_logged:
                    logger.info("sidecar: lease acquired; leaving standby")
                return True
            if not standby_logged:
                logger.info(
                    "sidecar: standby, another process holds the lease; checking every %.1f s",
                    self._standby_every,
                )
                standby_logged = True
            await self.sleeper(self._standby_every, self._stop)
        return False

    @property
    def _standby_every(self) -> float:
        return self.lease.ttl / 4 if self.lease is not None else MAX_CHUNK

    async def _keep_lease(self) -> bool:
        """Take the lease, or renew it once a third of its ttl has passed; False when not ours.

        A database error counts as still held until two thirds of the ttl
        have passed without a renewal, well before a standby may take over.
        """
        assert self.lease is not None
        since = time.monotonic() - self._renewed_at
        if since < self._renew_every:
            return True
        acquiring = in_thread(self.lease.acquire)
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({acquiring, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not acquiring.done():
            return False  # stopping; a standby need not wait for a busy database
        try:
            held = acquiring.result()
        except Exception as exc:
            held = since < self.lease.ttl * 2 / 3
            logger.warning("sidecar: lease renewal failed (%s); held=%s", type(exc).__name__, held)
            return held
        self._renewed_at = time.monotonic() if held else -math.inf
        return held

    async def _record(
        self, ctx: PassContext, ok: bool, failures: int, next_due: datetime | None
    ) -> None:
        if self.db is None:
            return
        try:
            await in_thread(
                lambda: record_pass(
                    self.db,  # type: ignore[arg-type]
                    self.name,
                    started_at=ctx.started_at,
                    ok=ok,
                    consecutive_failures=failures,
                    next_due=next_due,
                )
            )
        except Exception as exc:
            logger.warning("sidecar: could not record the pass state (%s)", type(exc).__name__)

    async def _release(self) -> None:
        assert self.lease is not None
        try:
            await asyncio.wait_for(in_thread(self.lease.release), 1.0)
        except Exception as exc:
            logger.warning("sidecar: could not release the lease (%s)", type(exc).__name__)


def _set_once(future: asyncio.Future[_Outcome], outcome: _Outcome) -> None:
    if not future.done():
        future.set_result(outcome)


def _unwrap(future: asyncio.Future[object]) -> tuple[object, BaseException | None]:
    exc = future.exception()
    return (None, exc) if exc is not None else (future.result(), None)
