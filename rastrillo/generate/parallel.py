"""Work over a list in forked processes, with the result a sequential run gives.

Parsing a thousand action files is most of `rastrillo generate`, and each file's reading
is independent of the others': where the process may use more than one CPU, consecutive
chunks of the files are read at once, the first in this process and each other in a
child forked after the imports (so a child starts in a fraction of a millisecond, with
everything loaded). A child sends back its chunk's small results, pickled, not syntax
trees, and they are joined in the chunks' order: the same list, in the same order, as
one process reading every file.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence

from rastrillo.errors import RastrilloError

TYPE_CHECKING = False
if TYPE_CHECKING:  # generate imports no `typing`
    from typing import TypeVar

    Item = TypeVar("Item")
    Result = TypeVar("Result")

_SIGKILL = 9  # POSIX's; no `signal` import, whose enums cost a start of the command line
_WORK_RAISED = 3
"""A child's exit status when ``work`` raised: the parent then runs that chunk itself, so
the exception is the one a sequential run raises, raised where a sequential run raises it."""


class WorkerLost(RastrilloError):
    """A child ended (killed, out of memory) before sending its chunk's results."""


def processes_for(count: int, least: int) -> int:
    """How many processes to read ``count`` items with: one for each CPU this process may
    run on, while each has at least ``least`` items (below that, a fork and the results'
    way back cost more than the reading they share); one where there is no `os.fork`
    (Windows) or where another thread runs (a fork copies only the calling thread, and a
    lock another holds stays held in the child)."""
    if not hasattr(os, "fork") or _other_threads():
        return 1
    return max(1, min(_cpus(), count // least))


def _cpus() -> int:
    """The CPUs this process may run on: its affinity mask, not the machine's count."""
    if sys.version_info >= (3, 13):
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _other_threads() -> bool:
    """Whether a thread besides this one runs: the kernel's count where there is one (a
    thread a library started in C, as a file watcher's, is not in `threading`'s)."""
    try:
        return len(os.listdir("/proc/self/task")) > 1
    except OSError:  # no /proc (macOS)
        threading = sys.modules.get("threading")  # not imported: no thread but this one
        return threading is not None and threading.active_count() > 1


def map_chunks(
    work: Callable[[Sequence[Item]], list[Result]],
    items: Sequence[Item],
    processes: int,
    *,
    sending: float = 0.0,
) -> list[Result]:
    """``work(items)``, computed as ``processes`` consecutive chunks at once, joined in order.

    The first chunk is worked in this process, the others each in a forked child, which
    sends its list back pickled through a pipe and ends with `os._exit` (no `atexit`, no
    flushing of buffers the parent also holds). A child whose ``work`` raised is replaced
    by this process working that chunk itself; a child that ended without its results
    raises `WorkerLost`. A chunk no child could be forked for (EAGAIN: too many
    processes) is worked here too. Children left when this process stops early (an
    exception, a Ctrl-C) are killed and reaped, never left running.

    ``sending``: what pickling one result costs a child, as a share of working its item.
    Each child's chunk is that much smaller than this process's, so that a child has sent
    its results by the time this process has worked its own chunk, rather than keep it
    waiting.
    """
    processes = min(processes, len(items))
    if processes <= 1:
        return work(items)
    import pickle  # only here: a sequential run never needs it

    size = max(1, int(len(items) / (processes + sending)))  # each child's
    first = len(items) - (processes - 1) * size
    chunks = [items[:first]]
    chunks += [items[start : start + size] for start in range(first, len(items), size)]
    parent = os.getpid()
    children: list[tuple[_Child, Sequence[Item]]] = []  # each with its chunk
    try:
        here = [chunks[0]]
        for index, chunk in enumerate(chunks[1:], 1):
            try:
                children.append((_fork(work, chunk, pickle.dumps), chunk))
            except OSError:  # no more processes: the rest is read here, in order
                here += chunks[index:]
                break
        results = work(here[0])
        while children:
            child, chunk = children[0]
            data = _read_all(child.pipe)
            code = child.reaped()
            del children[0]
            child.close()
            if code == 0 or (code is None and data):
                results += _loaded(data, code, len(chunk))
            elif code is None or code == _WORK_RAISED:
                results += work(chunk)  # it raised (or its status is unknown): as here
            else:
                raise WorkerLost(_lost(code, len(chunk)))
        for chunk in here[1:]:
            results += work(chunk)
        return results
    finally:
        if os.getpid() != parent:  # a child interrupted as it was forked: never the parent's
            os._exit(_WORK_RAISED)
        for child, _ in children:
            child.kill()
            child.reaped()
            child.close()


def _loaded(data: bytes, code: int | None, count: int) -> list[Result]:
    """A child's results; `WorkerLost` when what came through its pipe is not all of them
    (killed as it wrote, its status gone with it: the kernel reaped it)."""
    import pickle  # loaded already by map_chunks, which alone forks

    try:
        result: list[Result] = pickle.loads(data)
        return result
    except Exception as exc:  # cut short, a truncated pickle fails in many ways
        raise WorkerLost(_lost(code, count)) from exc


class _Child:
    """A forked child and the pipe its results come through.

    Where Linux gives one (`os.pidfd_open`), the child is named by a descriptor, not by
    its number: once a child has ended and been reaped, by the kernel itself when this
    process ignores SIGCHLD, its number may be given to any new process, and a SIGKILL
    sent to the number would end that stranger. A descriptor names the one process,
    ended or not. ``pid`` is None once the child is known to be gone.
    """

    __slots__ = ("pid", "pidfd", "pipe")

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid: int | None = pid
        self.pidfd: int | None = None
        self.pipe = pipe
        if hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(pid)
                # A process that is not this one's child (its number given again before the
                # descriptor was opened) cannot be waited for: ChildProcessError.
                os.waitid(os.P_PIDFD, self.pidfd, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except (ProcessLookupError, ChildProcessError):  # gone, its number free again
                self.pid = None
                self._close_pidfd()
            except OSError:  # a kernel without them (waiting on one: 5.4): by its number
                self._close_pidfd()

    def kill(self) -> None:
        """SIGKILL, unless the child is gone."""
        if self.pidfd is not None:
            import signal  # only when a run stops early

            with contextlib.suppress(ProcessLookupError):  # ended already
                signal.pidfd_send_signal(self.pidfd, _SIGKILL)
        elif self.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # ended and reaped already
                os.kill(self.pid, _SIGKILL)

    def reaped(self) -> int | None:
        """Its exit code once it has ended (minus the signal that ended it); None when it
        was reaped by another (this process ignores SIGCHLD, so the kernel reaps its
        children itself)."""
        try:
            if self.pidfd is not None:
                ended = os.waitid(os.P_PIDFD, self.pidfd, os.WEXITED)
                assert ended is not None  # None only with WNOHANG
                code = ended.si_status
                return code if ended.si_code == os.CLD_EXITED else -code
            if self.pid is not None:
                return os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        except ChildProcessError:
            pass
        return None

    def close(self) -> None:
        os.close(self.pipe)
        self._close_pidfd()

    def _close_pidfd(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _fork(
    work: Callable[[Sequence[Item]], list[Result]],
    chunk: Sequence[Item],
    dumps: Callable[[object], bytes],
) -> _Child:
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except BaseException:  # no process to hand the pipe to (EAGAIN), or interrupted
        os.close(read_end)
        os.close(write_end)
        raise
    if pid:
        os.close(write_end)
        return _Child(pid, read_end)
    status = _WORK_RAISED
    try:
        os.close(read_end)
        data = dumps(work(chunk))
        status = 1  # from here on a failure is one of the pipe's: the parent reports it
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view) :]
        status = 0
    finally:
        os._exit(status)  # never back into the parent's code, whatever was raised


def _read_all(fd: int) -> bytes:
    chunks = []
    while data := os.read(fd, 1 << 20):
        chunks.append(data)
    return b"".join(chunks)


def _lost(code: int | None, count: int) -> str:
    if code is None:
        how = "ended"
    elif code < 0:
        import signal  # only for this message

        how = f"was ended by signal {-code} ({signal.strsignal(-code) or 'unknown'})"
    else:
        how = f"exited with status {code}"
    return (
        f"a process reading {count} of the action files {how} before sending what it read; "
        "nothing was written: run the command again"
    )
