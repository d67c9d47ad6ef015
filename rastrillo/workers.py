"""``--workers N``: N server processes on one address.

On TCP the parent opens one listening socket per worker, all bound to the same
address with ``SO_REUSEPORT``, and the kernel spreads new connections evenly
across them. (One socket shared by every worker would leave the spreading to
whichever worker wakes first, and that one takes every connection waiting: a
client opening its keep-alive connections at once, like a proxy or a load
generator, ends up on one worker while the others idle.) Before it binds them
the parent checks that nothing listens on the address, so a second server
started there fails instead of quietly sharing its connections. A unix socket
cannot be shared that way, so there the workers share one socket.

The app is built once in the parent before the fork (so migrations and
``setup`` run once), with its database pool emptied, so each worker opens
connections of its own.

The parent only supervises: SIGTERM or SIGINT is passed on to every worker,
each drains its requests in flight as a single server would, and the parent
exits 0 once all have. A
worker that dies on its own is replaced, on the same socket; one that keeps dying (more
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
from collections.abc import Callable, Iterable, Sequence

from rastrillo.connections import BACKLOG

log = logging.getLogger("rastrillo.workers")

_STOP = {signal.SIGTERM, signal.SIGINT}
_WATCHED = _STOP | {signal.SIGCHLD}
_REPLACEMENT_WINDOW = 60.0


def listen(host: str, port: int, uds: str | None, count: int) -> list[socket.socket]:
    """The listening socket of each of ``count`` workers: its own on TCP, one shared on
    a unix socket. Raises OSError when the address is taken."""
    if uds is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(uds):
            os.unlink(uds)
        sock.bind(uds)
        os.chmod(uds, 0o666)
        return [_listening(sock)] * count
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Sockets with SO_REUSEPORT bind beside any other such group of this user's:
    # this one, without it, fails if anything listens on the address.
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
        port = probe.getsockname()[1]  # the port the kernel chose for port 0
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            # Made as a TCP socket by name: asyncio turns Nagle's algorithm off only on
            # connections whose socket says IPPROTO_TCP, and with it on, every answer on a
            # keep-alive connection waits ~40 ms for the client's delayed ACK.
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            socks.append(sock)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            _listening(sock)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


def _listening(sock: socket.socket) -> socket.socket:
    # Listening before the fork: connections queue while the workers start.
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def supervise(sockets: Sequence[socket.socket], serve_one: Callable[[socket.socket], None]) -> int:
    """Run ``serve_one`` in a forked worker on each of ``sockets`` until SIGTERM/SIGINT;
    the exit code."""
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    workers: dict[int, socket.socket] = {}
    replaced: list[float] = []
    # Every worker reads the parent's end of this pipe: end of file means the parent is gone.
    lifeline = os.pipe()
    try:
        for sock in sockets:
            workers[_fork(serve_one, sock, sockets, lifeline)] = sock
        while True:
            info = signal.sigwaitinfo(_WATCHED)
            if info.si_signo in _STOP:
                break
            for pid, status, sock in _reap(workers):
                log.warning("worker %d ended (%s); starting another", pid, _describe(status))
                now = time.monotonic()
                replaced = [t for t in replaced if now - t < _REPLACEMENT_WINDOW] + [now]
                if len(replaced) > len(sockets):
                    log.error("workers keep ending; stopping the server")
                    _close(sockets)
                    _stop(workers)
                    return 1
                workers[_fork(serve_one, sock, sockets, lifeline)] = sock
        _close(sockets)  # nothing new queues for workers that are draining
        _stop(workers)
        return 0
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        for fd in lifeline:
            os.close(fd)


def _fork(
    serve_one: Callable[[socket.socket], None],
    sock: socket.socket,
    sockets: Sequence[socket.socket],
    lifeline: tuple[int, int],
) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.close(lifeline[1])
        _close(s for s in sockets if s is not sock)  # the others' queues are theirs alone
        threading.Thread(target=_stop_when_orphaned, args=(lifeline[0],), daemon=True).start()
        serve_one(sock)
        code = 0
    except BaseException:  # a worker must never return into the parent's code
        log.exception("worker %d failed", os.getpid())
    finally:
        logging.shutdown()
        os._exit(code)


def _close(sockets: Iterable[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def _stop_when_orphaned(read_end: int) -> None:
    os.read(read_end, 1)  # returns only at end of file: the parent's write end closed
    os.kill(os.getpid(), signal.SIGTERM)


def _stop(workers: dict[int, socket.socket]) -> None:
    for pid in workers:
        _signal(pid, signal.SIGTERM)
    while workers:
        if signal.sigwait(_WATCHED) in _STOP:  # a second signal: the workers' own forced exit
            for pid in workers:
                _signal(pid, signal.SIGINT)
        _reap(workers)


def _reap(workers: dict[int, socket.socket]) -> list[tuple[int, int, socket.socket]]:
    """Collect every worker that has ended (SIGCHLD signals coalesce), with its socket."""
    ended = []
    for pid in list(workers):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            ended.append((pid, status, workers.pop(pid)))
    return ended


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"
