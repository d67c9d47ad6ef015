"""The background writer of each database's audit rows, and writing rows through an outage.

Rows are written in batches, one commit for many, on a thread per database that ends
when idle. A database that cannot serve now (locked, unreachable) is waited out with a
growing pause; while it is, the rows waiting are bounded (:data:`QUEUED_MAX`), and one
past them is logged in full instead.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable

from rastrillo.storage import Database, is_unavailable
from rastrillo.tools.audit_rows import (
    INSERT,
    OUTCOME,
    Entry,
    as_json,
    keep_as_stored,
    stored_row,
)

log = logging.getLogger("rastrillo.tools.audit")

_RETRY_FIRST = 0.05
_RETRY_MAX = 2.0


def insert_rows(
    db: Database, rows: list[Entry], on_wait: Callable[[], None] | None = None
) -> list[Entry]:
    """Insert ``rows``, or for an approved write's, write its outcome to its row; return
    those the database refused, and any outcome whose row is not there, each logged in
    full.

    A database that cannot serve now (``storage.is_unavailable``: locked past
    the busy timeout, unreachable, out of room) is waited out: the rows are
    retried, with a growing pause, until written, ``on_wait`` called as the
    wait begins. Any other failure is a row's own: the rows are then written
    one at a time, so one refused row never costs another.
    """
    delay = _RETRY_FIRST
    waiting = False
    while True:
        try:
            with db.driver_write() as tx:
                new = [stored_row(row) for row in rows if row.row_id is None]
                if new:
                    tx.run_many(INSERT, new)
                rowless = [
                    row
                    for row in rows
                    if row.row_id is not None
                    and not tx.run(
                        OUTCOME,
                        row_id=row.row_id,
                        status=row.status,
                        duration_ms=row.duration_ms,
                    )
                ]
        except Exception as exc:
            if not is_unavailable(exc):
                refused = exc
                break
            if not waiting:
                log.warning("audit: %d rows wait for the database (%s); retrying", len(rows), exc)
                waiting = True
                if on_wait is not None:
                    on_wait()
            time.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)
        else:
            if waiting:
                log.warning("audit: %d rows written after waiting for the database", len(rows))
            for row in rowless:
                log.error("audit: no row to write this outcome to: %s", as_json(row))
            return rowless
    if len(rows) == 1:
        log.error("audit: the database refused a row: %s", as_json(rows[0]), exc_info=refused)
        return rows
    return [lost for row in rows for lost in insert_rows(db, [row])]


QUEUED_MAX = 10_000
"""The most rows one database's background writer keeps waiting, besides the batch it is
writing, while the database is locked or unreachable: calls made through an outage cost
bounded memory. The first rows are kept, the oldest of the outage (a :func:`flush` has
counted them as pending); a row appended past the bound is logged in full
(``rastrillo.tools.audit``, ERROR) instead, and counted as ``dropped`` by the next
:func:`flush`. A write is never queued: its row is written with its approval's use
(:func:`begin`), before it runs, and its outcome waits out the database in the thread that
ran it, so no write goes unrecorded."""
KEPT_AS_GIVEN = 1_000
"""Past this many waiting rows (the writer is behind), or once the writer waits for the
database, a row is queued as it is stored, bounded by :data:`ARGS_KEPT` and
:data:`ARG_TEXT_KEPT`, not holding the call's args as given. A healthy writer at full speed
finds up to a few hundred rows waiting when it takes a batch (on two loaded cores: a
median of 124-154, at most 392), so a lower bound would have reads make their rows'
stored form in the normal case; an outage is told by the writer, not by the count."""


class Writer:
    """Writes one database's queued rows in batches on a thread that ends when idle."""

    _IDLE_SECONDS = 1.0
    _LINGER_SECONDS = 0.02

    def __init__(self, db: Database) -> None:
        self._db = weakref.ref(db)
        """Weak: a database no one uses any more is collected, its writer with it."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._abandoning = threading.Lock()
        self._rows: list[Entry] = []
        self._batch: list[Entry] = []
        self._queued = 0
        self._done = 0
        self._handed_out = 0
        """Rows up to this count were handed out by :meth:`abandon` (and logged)."""
        self._lost = 0
        self._dropped = 0
        self._running = False
        self._outage = False
        """The database made the writer wait: a row is queued as it is stored."""
        self._idle = False
        """The thread waits for rows: a new row must wake it."""
        self._hurry = False
        """Someone waits for the rows queued: the next batch is taken without lingering."""

    def put(self, row: Entry) -> None:
        with self._lock:  # the condition's own lock, without its Python-level wrapper
            waiting = len(self._rows)
            if (waiting < KEPT_AS_GIVEN and not self._outage) or (
                row.stored is not None and waiting < QUEUED_MAX
            ):
                self._rows.append(row)
                self._queued += 1
                if self._idle:
                    self._cond.notify()
                if not self._running:
                    self._running = True
                    threading.Thread(target=self._run, name="rastrillo-audit", daemon=True).start()
                return
        self._put_behind(row)

    def _outage_began(self) -> None:
        """The database makes the writer wait: the rows queued already, and each one queued
        until it is written, are kept as they are stored, not with the calls' args as
        given (their memory bounded whatever the calls sent)."""
        with self._cond:
            self._outage = True
            self._cond.notify_all()  # a shutdown waits no longer
            queued = list(self._rows)
        for row in queued:  # the writer's from their put on: nobody else changes them
            keep_as_stored(row)  # one that cannot be made is lost when its turn comes

    def _put_behind(self, row: Entry) -> None:
        """A row behind many waiting ones: queued as it is stored (the caller's args let
        go), or, with :data:`QUEUED_MAX` waiting, not queued but logged in full."""
        if row.stored is None:
            # Outside the lock: only while the writer lags.
            if keep_as_stored(row):
                self.put(row)
            else:
                with self._lock:
                    self._lost += 1
                log.error("audit: row not written: %s", as_json(row))
            return
        with self._lock:
            self._dropped += 1
        log.error(
            "audit: %d rows already wait for the database, row not queued: %s",
            QUEUED_MAX,
            as_json(row),
        )

    def wait(self, timeout: float, *, until_outage: bool = False) -> int:
        """Wait until the rows queued so far are written or refused, or with
        ``until_outage`` (the exit's wait) until the writer waits for the database; return how
        many are not. The exit's wait counts the rows :meth:`abandon` handed out as settled:
        they are logged already, and a server's end logs them before the interpreter's exit
        handler runs, where waiting for them again took the stop past its bound."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._queued
            if self._settled(until_outage) < target:
                self._hurry = True
                self._cond.notify_all()  # the writer among the other waiters
            while (
                self._settled(until_outage) < target
                and not (until_outage and self._outage)
                and self._cond.wait(max(0.0, deadline - time.monotonic()))
            ):
                pass
            return max(0, target - self._settled(until_outage))

    def _settled(self, exiting: bool) -> int:
        """Rows written or refused; at exit, also those already handed out and logged."""
        return max(self._done, self._handed_out) if exiting else self._done

    def take_lost(self) -> tuple[int, int]:
        """How many rows the database refused, and how many found the queue full, since
        the last call."""
        with self._cond:
            lost, dropped, self._lost, self._dropped = self._lost, self._dropped, 0, 0
            return lost, dropped

    def abandon(self, say: Callable[[Entry], None]) -> None:
        """Give ``say`` each row not written yet that no earlier call gave it (of the one batch
        being written and every queued row, oldest first, those queued since). A row counts
        as handed out once ``say`` has returned: a call interrupted (a second Ctrl-C) leaves
        the rows it did not say to the next, never lost unsaid."""
        with self._abandoning:  # a second caller waits, then says only what is left
            with self._cond:
                pending = [*self._batch, *self._rows]
                start = max(self._done, self._handed_out)
                fresh = self._queued - start
                rows = pending[len(pending) - fresh :] if fresh > 0 else []
            for said, entry in enumerate(rows, start + 1):
                say(entry)
                with self._cond:
                    self._handed_out = max(self._handed_out, said)
                    self._cond.notify_all()  # an exit's wait counts it settled

    def _run(self) -> None:
        while True:
            with self._cond:
                # Let a batch gather (one commit for many rows), unless its rows are waited for.
                end = time.monotonic() + self._LINGER_SECONDS
                while not self._hurry and (left := end - time.monotonic()) > 0:
                    self._cond.wait(left)
                if not self._rows:
                    self._idle = True
                    self._cond.wait(self._IDLE_SECONDS)
                    self._idle = False
                if not self._rows:
                    self._running = False
                    return
                self._batch, self._rows = self._rows, []
                self._hurry = False
            db = self._db()
            if db is None:  # collected with rows queued: they have nowhere to go
                for entry in self._batch:
                    log.error("audit: database gone, row not written: %s", as_json(entry))
                lost = self._batch
            else:
                try:
                    lost = insert_rows(db, self._batch, self._outage_began)
                except Exception:  # the writer must outlive any batch: its rows count as lost
                    log.exception("audit: %d rows not written", len(self._batch))
                    lost = self._batch
                self._outage = False
                del db
            with self._cond:
                self._done += len(self._batch)
                self._lost += len(lost)
                self._batch = []
                self._cond.notify_all()


writers: dict[int, Writer] = {}
"""Each database's writer, by the database's ``id``: a plain dict is the cheapest lookup
for a row appended on every call, and a writer leaves it when its database is collected
(before the ``id`` can be reused)."""
_writers_lock = threading.Lock()


def writer_for(db: Database) -> Writer:
    writer = writers.get(id(db))
    if writer is None:
        with _writers_lock:
            writer = writers.get(id(db))
            if writer is None:
                writer = writers[id(db)] = Writer(db)
                # Not at exit: there shutdown() must still find the writer, to wait for its rows.
                weakref.finalize(db, writers.pop, id(db), None).atexit = False
    return writer
