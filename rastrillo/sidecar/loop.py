"""The sidecar loop: run a pass, wait until its next due instant, repeat, never die.

The control loop runs on the main thread's event loop and only ever waits;
the pass itself runs elsewhere (a sync pass on a thread of its own, an async
pass on a long-lived event loop in a worker thread). So a pass that blocks,
hangs or ignores cancellation cannot delay the reaction to SIGTERM, and after
the shutdown grace the loop can walk away from it.

What follows a pass is decided by `rastrillo.sidecar.planner`; this module
runs the plan. Sleeps are taken in chunks of at most a minute, the clocks
read again after each, so a clock step or a suspend never oversleeps by more
than one chunk. The clock (the database's, unless given) and the sleeper are
injected, and every wait of the loop (the schedule, the lease's renewals, a
stopping pass's grace, the release of the lease) is taken with them: that is
how the loop is tested to the second without waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import signal
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, cast

from rastrillo.awaitable import is_async_callable
from rastrillo.clock import SYSTEM_CLOCK, Clock
from rastrillo.errors import ConfigError, one_line_if_it_ends_the_script
from rastrillo.sidecar.lease import DEFAULT_NAME, Lease, record_pass
from rastrillo.sidecar.planner import BACKOFF_CAP, POLL_FLOOR, Streaks, Wake, plan_next
from rastrillo.storage import Database, DatabaseUnavailable

log = logging.getLogger("rastrillo.sidecar")

MAX_CHUNK = 60.0
"""The longest single sleep before the wall clock is consulted again."""
SHUTDOWN_GRACE = 15.0
"""How long a pass that was asked to stop may take before it is abandoned, by default."""

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
"""Sleep for the given seconds, or until the event is set, whichever is first.

Every wait of the loop is taken with it, a running pass's too (its event set as the pass
ends): a fake sleeper that returns at once, moving a fake clock, says the seconds passed
with the pass still running."""


async def event_sleep(seconds: float, wake: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), seconds)


@dataclass(frozen=True, kw_only=True)
class Sidecar:
    """A pass function with the settings of its loop.

    ``Options(sidecar=fn)`` is shorthand for ``Options(sidecar=Sidecar(pass_fn=fn))``.
    ``name`` keys the lease and the recorded state: of the sidecars of one name, one
    runs passes at a time (two apps never share a database). ``lease_ttl`` bounds how
    long a standby waits for a dead holder; it must comfortably exceed a database write,
    and ``shutdown_grace`` must end within its last third (`refuse_overlapping_grace`).
    """

    pass_fn: PassFunction
    name: str = DEFAULT_NAME
    jitter: bool = False
    lease_ttl: float = 60.0
    shutdown_grace: float = SHUTDOWN_GRACE

    def __post_init__(self) -> None:
        refuse_overlapping_grace(self.lease_ttl, self.shutdown_grace)


def refuse_overlapping_grace(lease_ttl: float, shutdown_grace: float) -> None:
    """Refuse a grace that lets a standby start a pass beside one still running.

    A holder is sure of its lease for two thirds of the ttl after the last renewal it
    sent, and may ask its pass to stop as late as then: a signal after a renewal that
    failed, or the lease lost. The pass then runs for up to the grace, after which the
    process exits; a standby may take the lease a ttl after that renewal. So the grace
    must end within the last third, and at most a quarter of the ttl leaves a twelfth
    for a timer that fires late on a loaded machine. Renewing during the grace would not
    lift this: a lost lease cannot be renewed.
    """
    if not shutdown_grace <= lease_ttl / 4:
        one_line_if_it_ends_the_script()
        raise ConfigError(
            f"the sidecar's shutdown_grace ({shutdown_grace:g} s) must be at most a quarter "
            f"of its lease_ttl ({lease_ttl:g} s), or a standby may start a pass beside one "
            f"still finishing: lower shutdown_grace to {lease_ttl / 4:g} s, or raise "
            f"lease_ttl to {shutdown_grace * 4:g} s"
        )


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


def in_daemon_thread(fn: Callable[[], T]) -> asyncio.Future[T]:
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
            result, exc = fn(), None
        except BaseException as caught:
            result, exc = None, caught
        # A loop that stopped waiting may have closed (an abandoned pass): its outcome is moot.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, exc)

    threading.Thread(target=body, name="rastrillo-sidecar", daemon=True).start()
    return future


@dataclass
class _Outcome:
    result: object = None
    error: BaseException | None = None
    abandoned: bool = False
    forced: bool = False


class SidecarLoop:
    """Runs ``pass_fn`` until a signal, as docs/sidecar.md describes."""

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
        if lease is not None:
            refuse_overlapping_grace(lease.ttl, shutdown_grace)
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
        self._last_held_at = math.inf
        """The last renewal sent that held the lease, kept when the lease is lost."""
        self._lease_error: Exception | None = None
        self._holding: asyncio.Future[bool] | None = None
        """The last take or renewal of the lease, which may outlive a stop (see _release)."""
        self._hold_sent = -math.inf
        """When that take or renewal was sent."""
        self._signum: int | None = None
        self._stop: asyncio.Event
        self._force: asyncio.Event
        self._runner: _AsyncRunner | None = None

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """First call: stop after (or abandon) the current pass. Second: force the exit."""
        if self._stop.is_set():
            log.warning("sidecar: second signal %s; forcing exit", signal.Signals(signum).name)
            self._force.set()
            return
        self._signum = signum
        log.info("sidecar: %s received; stopping", signal.Signals(signum).name)
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
        log.info(
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
        log.info("sidecar exiting reason=%s exit_code=%d passes=%d", reason, code, self.passes)
        return code

    async def _loop(self) -> int:
        streaks = Streaks()
        scheduled_for = self.clock.now()
        while not self._stop.is_set():
            if self.lease is not None and not await self._wait_for_lease():
                return 0
            started = self.clock.monotonic()
            ctx = PassContext(
                stopping=threading.Event(),
                started_at=self.clock.now(),
                scheduled_for=scheduled_for,
                pass_id=self.passes + 1,
                first=self.passes == 0,
                db=self.db,
            )
            unavailable = await self._database_unavailable()
            if self.lease is not None and self._surely_held_for() <= 0:
                continue  # the lease lapsed while the database was looked at: take it first
            self.passes += 1
            outcome = _Outcome(error=unavailable) if unavailable else await self._run_pass(ctx)
            duration_ms = (self.clock.monotonic() - started) * 1000
            if outcome.abandoned or outcome.forced:
                log.error(
                    "sidecar pass pass_id=%d outcome=abandoned duration_ms=%.0f: it did not stop "
                    "within %g s of being asked",
                    ctx.pass_id,
                    duration_ms,
                    self.shutdown_grace,
                )
                return EXIT_ABANDONED if outcome.abandoned else 128 + (self._signum or 15)
            if isinstance(outcome.error, KeyboardInterrupt | SystemExit):
                raise outcome.error
            if ctx.stopping.is_set() and outcome.error is not None:
                log.info(
                    "sidecar pass pass_id=%d outcome=cancelled duration_ms=%.0f next_due=unchanged "
                    "sleep_s=0",
                    ctx.pass_id,
                    duration_ms,
                )
                continue
            plan = plan_next(
                result=outcome.result,
                error=outcome.error,
                streaks=streaks,
                now=self.clock.now(),
                monotonic=self.clock.monotonic(),
                started_monotonic=started,
                pass_id=ctx.pass_id,
                duration_ms=duration_ms,
                jitter=self.rng if self.jitter else None,
            )
            streaks = plan.streaks
            if plan.warning is not None:
                log.warning(plan.warning)
            log.log(plan.log_level, plan.log_line, exc_info=plan.error)
            if unavailable is None:
                await self._record(ctx, plan.ok, streaks.failures, plan.next_due)
            if await self._sleep_until(plan.wake):
                return 0
            scheduled_for = plan.wake.at
        return 0

    async def _sleep_until(self, wake: Wake) -> bool:
        """Sleep until the plan's wake-up; True when stopped instead."""
        while not self._stop.is_set():
            remaining = wake.remaining(self.clock.now(), self.clock.monotonic())
            if remaining <= 0:
                return False
            await self.sleeper(min(remaining, MAX_CHUNK, self._renew_every), self._stop)
            if self.lease is not None and not self._stop.is_set() and not await self._renew_lease():
                return False  # the lease is gone: back to standby before the next pass
        return True

    async def _database_unavailable(self) -> DatabaseUnavailable | None:
        """Why the database cannot serve a pass (its file deleted, say), or None."""
        if self.db is None:
            return None
        try:
            await in_daemon_thread(self.db.check)
        except DatabaseUnavailable as exc:
            return exc
        return None

    async def _run_pass(self, ctx: PassContext) -> _Outcome:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_Outcome] = loop.create_future()

        def settle(result: object, error: BaseException | None) -> None:
            loop.call_soon_threadsafe(_set_once, done, _Outcome(result, error))

        if self._runner is not None:  # made for an async pass function
            run_async = cast(Callable[[PassContext], Awaitable[PassResult]], self.pass_fn)
            cancel = self._runner.start(lambda: run_async(ctx), settle)
        else:
            cancel = None
            in_daemon_thread(lambda: self.pass_fn(ctx)).add_done_callback(
                lambda f: _set_once(done, _Outcome(*_unwrap(f)))
            )

        asked_at: float | None = None
        while True:
            if asked_at is None and self._stop.is_set():
                asked_at = self._ask_to_stop(ctx, cancel)
            timeout = None
            if asked_at is not None:
                timeout = self._abandon_at(asked_at) - self.clock.monotonic()
                if timeout <= 0:
                    return _Outcome(abandoned=True)
            watched: list[asyncio.Future[Any]] = [done, asyncio.ensure_future(self._force.wait())]
            if asked_at is None:
                watched.append(asyncio.ensure_future(self._stop.wait()))
            if self.lease is not None and asked_at is None:
                # Renew in time, and look again no later than the lease is surely ours.
                renew_in = min(self._renew_every, self._surely_held_for())
                await self.sleeper(max(0.0, renew_in), _woken_by(watched))
            elif timeout is not None:  # the grace left, on the loop's clock
                await self.sleeper(timeout, _woken_by(watched))
            else:
                await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            for waiter in watched[1:]:
                waiter.cancel()
            if done.done():
                return done.result()
            if self._force.is_set():
                return _Outcome(forced=True)
            if (
                self.lease is not None
                and asked_at is None
                and (self._surely_held_for() <= 0 or not await self._renew_lease())
                and not self._stop.is_set()
            ):
                log.error("sidecar: lease lost during a pass; asking the pass to stop")
                asked_at = self._ask_to_stop(ctx, cancel)

    def _ask_to_stop(self, ctx: PassContext, cancel: Callable[[], object] | None) -> float:
        ctx.stopping.set()
        if cancel is not None:
            cancel()
        return self.clock.monotonic()

    async def _wait_for_lease(self) -> bool:
        """Wait as a quiet standby until the lease is ours; False when stopped first."""
        standby_logged = False
        error_logged: str | None = None
        while not self._stop.is_set():
            if await self._renew_lease():
                if standby_logged or error_logged:
                    log.info("sidecar: lease acquired; leaving standby")
                return True
            if self._lease_error is not None:
                # Not another process: this one cannot take the lease at all. Say why,
                # once per distinct error, and keep trying.
                error = f"{type(self._lease_error).__name__}: {self._lease_error}"
                if error != error_logged:
                    log.error(
                        "sidecar: cannot take the lease (%s); retrying every %.1f s",
                        error,
                        self._standby_every,
                    )
                    error_logged = error
            elif not standby_logged:
                log.info(
                    "sidecar: standby, another process holds the lease; checking every %.1f s",
                    self._standby_every,
                )
                standby_logged = True
            await self.sleeper(self._standby_every, self._stop)
        return False

    @property
    def _standby_every(self) -> float:
        return self.lease.ttl / 4 if self.lease is not None else MAX_CHUNK

    async def _renew_lease(self) -> bool:
        """Take the lease, or renew it once a third of its ttl has passed; False when not ours.

        A renewal counts from when it was sent, not from its answer: the database may
        have run it at any moment in between, and a standby may take over a ttl after
        that. So the lease is surely ours for two thirds of the ttl after the last
        renewal sent, well before a standby may take over; a renewal is awaited no
        longer than that, and one that has not answered by then, or failed, loses it.
        A take (as a standby, or once the lease was lost) waits as long as it takes.
        """
        assert self.lease is not None
        if self.clock.monotonic() - self._renewed_at < self._renew_every:
            return True
        renewing = self._surely_held_for()
        if self._holding is None or self._holding.done():
            self._hold_sent = self.clock.monotonic()
            self._holding = in_daemon_thread(self.lease.hold)
        holding, sent = self._holding, self._hold_sent
        stop = asyncio.ensure_future(self._stop.wait())
        wake = _woken_by([holding, stop])
        try:
            if renewing > 0:
                await self.sleeper(renewing, wake)
            else:
                await wake.wait()
        finally:
            stop.cancel()
        if not holding.done():
            if not self._stop.is_set():  # a stop need not wait for a busy database
                log.warning(
                    "sidecar: lease renewal not answered within %.1f s; held=False", renewing
                )
                self._renewed_at = -math.inf
            return False
        try:
            held = holding.result()
        except Exception as exc:
            self._lease_error = exc
            held = self._surely_held_for() > 0
            if renewing > 0:  # renewing a lease held, not taking one
                log.warning(
                    "sidecar: lease renewal failed (%s: %s); held=%s", type(exc).__name__, exc, held
                )
            if not held:
                self._renewed_at = -math.inf
            return held
        self._lease_error = None
        self._renewed_at = sent if held else -math.inf
        if held:
            self._last_held_at = sent
        return self._surely_held_for() > 0

    def _abandon_at(self, asked_at: float) -> float:
        """When a pass asked to stop at ``asked_at`` is abandoned: a grace after the ask,
        and with a lease a grace after it stopped being surely held at the latest, so that
        a timer that asked late does not carry the pass past a standby's takeover."""
        if self.lease is not None:
            asked_at = min(asked_at, self._last_held_at + self.lease.ttl * 2 / 3)
        return asked_at + self.shutdown_grace

    def _surely_held_for(self) -> float:
        """Seconds the lease is still surely this process's: two thirds of the ttl after the
        last renewal sent that it answered (a third left over for the clocks and the
        database); -inf when this process does not hold it."""
        assert self.lease is not None
        return self._renewed_at + self.lease.ttl * 2 / 3 - self.clock.monotonic()

    async def _record(
        self, ctx: PassContext, ok: bool, failures: int, next_due: datetime | None
    ) -> None:
        if self.db is None:
            return
        try:
            await in_daemon_thread(
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
            log.error("sidecar: could not record the pass state (%s: %s)", type(exc).__name__, exc)

    async def _release(self) -> None:
        """Give the lease up, after a take or renewal a stop left running (which would
        otherwise take it back after the release, for a standby to wait out). As long as
        the database takes, within the shutdown grace; a second signal stops waiting."""
        assert self.lease is not None
        lease, holding = self.lease, self._holding

        async def release() -> None:
            if holding is not None:
                with contextlib.suppress(Exception):  # its error was logged, or is moot now
                    await holding
            await in_daemon_thread(lease.release)

        releasing = asyncio.ensure_future(release())
        force = asyncio.ensure_future(self._force.wait())
        await self.sleeper(self.shutdown_grace, _woken_by([releasing, force]))
        force.cancel()
        if not releasing.done():
            releasing.cancel()
            log.warning(
                "sidecar: the lease was not released (%s); a standby takes it over when it expires",
                "a second signal" if self._force.is_set() else f"{self.shutdown_grace:g} s passed",
            )
        elif releasing.exception() is not None:
            exc = releasing.exception()
            log.warning("sidecar: could not release the lease (%s: %s)", type(exc).__name__, exc)


def _woken_by(futures: list[asyncio.Future[Any]]) -> asyncio.Event:
    """An event set once any of ``futures`` is done: what a `Sleeper` wakes on."""
    wake = asyncio.Event()
    for future in futures:
        future.add_done_callback(lambda _: wake.set())
    return wake


def _set_once(future: asyncio.Future[_Outcome], outcome: _Outcome) -> None:
    if not future.done():
        future.set_result(outcome)


def _unwrap(future: asyncio.Future[Any]) -> tuple[object, BaseException | None]:
    exc = future.exception()
    return (None, exc) if exc is not None else (future.result(), None)
