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
    threading = sys.modules.get("threading")  # not imported: no thread but this one
    return threading is not None and threading.active_count() > 1


def map_chunks(
    work: Callable[[Sequence[Item]], list[Result]], items: Sequence[Item], processes: int
) -> list[Result]:
    """``work(items)``, computed as ``processes`` consecutive chunks at once, joined in order.

    The first chunk is worked in this process, the others each in a forked child, which
    sends its list back pickled through a pipe and ends with `os._exit` (no `atexit`, no
    flushing of buffers the parent also holds). A child whose ``work`` raised is replaced
    by this process working that chunk itself; a child that ended without its results
    raises `WorkerLost`. Children left when this process stops early (an exception, a
    Ctrl-C) are killed and reaped, never left running.
    """
    if processes <= 1 or len(items) < 2:
        return work(items)
    import pickle  # only here: a sequential run never needs it

    size = -(-len(items) // processes)
    chunks = [items[start : start + size] for start in range(0, len(items), size)]
    children: list[tuple[int, int, Sequence[Item]]] = []  # (pid, its pipe, its chunk)
    try:
        for chunk in chunks[1:]:
            children.append((*_fork(work, chunk, pickle.dumps), chunk))
        results = work(chunks[0])
        while children:
            pid, fd, chunk = children[0]
            data = _read_all(fd)
            status = os.waitpid(pid, 0)[1]
            del children[0]
            os.close(fd)
            if status == 0:
                results += pickle.loads(data)
            elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == _WORK_RAISED:
                results += work(chunk)
            else:
                raise WorkerLost(_lost(status, len(chunk)))
        return results
    finally:
        for pid, fd, _ in children:
            os.kill(pid, _SIGKILL)
            os.waitpid(pid, 0)
            os.close(fd)


def _fork(
    work: Callable[[Sequence[Item]], list[Result]],
    chunk: Sequence[Item],
    dumps: Callable[[object], bytes],
) -> tuple[int, int]:
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except BaseException:  # no process to hand the pipe to (EAGAIN: too many processes)
        os.close(read_end)
        os.close(write_end)
        raise
    if pid:
        os.close(write_end)
        return pid, read_end
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


def _lost(status: int, count: int) -> str:
    if os.WIFSIGNALED(status):
        import signal  # only for this message

        number = os.WTERMSIG(status)
        how = f"was ended by signal {number} ({signal.strsignal(number) or 'unknown'})"
    else:
        how = f"exited with status {os.WEXITSTATUS(status)}"
    return (
        f"a process reading {count} of the action files {how} before sending what it read; "
        "nothing was written: run the command again"
    )
