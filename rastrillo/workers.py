"""``--workers N``: N server processes sharing one listening socket.

The parent binds the address (or unix socket) once, then forks the workers;
the kernel hands each new connection to one of them. The app is built once
in the parent before the fork (so migrations and ``setup`` run once), with its
database pool emptied, so each worker opens connections of its own.

The parent only supervises: SIGTERM or SIGINT is passed on to every worker,
each drains its requests in flight as a single server would, and the parent
exits 0 once all have. A
worker that dies on its own is replaced; one that keeps dying (more
replacements in a minute than there are workers) stops the whole server with
exit code 1, so a supervisor above sees the failure instead of a crash loop.
Should the parent itself be killed (``kill -9``), every worker drains and
exits as on SIGTERM: none is left serving on its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger("rastrillo.workers")

_STOP = {signal.SIGTERM, signal.SIGINT}
_WATCHED = _STOP | {signal.SIGCHLD}
_REPLACEMENT_WINDOW = 60.0


def listen(host: str, port: int, uds: str | None) -> socket.socket:
    """A bound socket for the workers to share (uvicorn calls ``listen`` on it)."""
    if uds is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(uds):
            os.unlink(uds)
        sock.bind(uds)
        os.chmod(uds, 0o666)
    else:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def supervise(count: int, sock: socket.socket, serve_one: Callable[[], None]) -> int:
    """Run ``serve_one`` in ``count`` forked workers until SIGTERM/SIGINT; the exit code."""
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    workers: set[int] = set()
    replaced: list[float] = []
    # Every worker reads the parent's end of this pipe: end of file means the parent is gone.
    lifeline = os.pipe()
    try:
        for _ in range(count):
            workers.add(_fork(serve_one, lifeline))
        while True:
            info = signal.sigwaitinfo(_WATCHED)
            if info.si_signo in _STOP:
                break
            for pid, status in _reap(workers):
                log.warning("worker %d ended (%s); starting another", pid, _describe(status))
                now = time.monotonic()
                replaced = [t for t in replaced if now - t < _REPLACEMENT_WINDOW] + [now]
                if len(replaced) > count:
                    log.error("workers keep ending; stopping the server")
                    sock.close()
                    _stop(workers)
                    return 1
                workers.add(_fork(serve_one, lifeline))
        sock.close()  # nothing new queues for workers that are draining
        _stop(workers)
        return 0
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        for fd in lifeline:
            os.close(fd)


def _fork(serve_one: Callable[[], None], lifeline: tuple[int, int]) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.close(lifeline[1])
        threading.Thread(target=_stop_when_orphaned, args=(lifeline[0],), daemon=True).start()
        serve_one()
        code = 0
    except BaseException:  # a worker must never return into the parent's code
        log.exception("worker %d failed", os.getpid())
    finally:
        logging.shutdown()
        os._exit(code)


def _stop_when_orphaned(read_end: int) -> None:
    os.read(read_end, 1)  # returns only at end of file: the parent's write end closed
    os.kill(os.getpid(), signal.SIGTERM)


def _stop(workers: set[int]) -> None:
    for pid in workers:
        _signal(pid, signal.SIGTERM)
    while workers:
        if signal.sigwait(_WATCHED) in _STOP:  # a second signal: the workers' own forced exit
            for pid in workers:
                _signal(pid, signal.SIGINT)
        _reap(workers)


def _reap(workers: set[int]) -> list[tuple[int, int]]:
    """Collect every worker that has ended (SIGCHLD signals coalesce)."""
    ended = []
    for pid in list(workers):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            workers.discard(pid)
            ended.append((pid, status))
    return ended


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"
