"""The cycle collector paused for a burst of allocation, safely from any number of threads.

Rendering a large registry's schemas, or parsing and rendering a large app's actions,
allocates tens of thousands of containers that hold no reference cycle and stay alive until
the work returns. Every 700 of them set off a young collection, whose survivors count
towards a full one, which walks every object in the process: in a process whose start-up
heap is not frozen (``gc.freeze``, as ``rastrillo serve`` does), as much time as the work
itself (docs/performance.md, "Schemas"). Paused, the burst costs one young collection after
it instead.

``gc.disable`` is one switch for the whole process, so saving and restoring it around each
call is wrong as soon as two calls overlap in different threads: A pauses, B sees it paused,
A restores it on, B "restores" it off, and it stays off for good. Here the calls share one
count under a lock: the first to enter remembers whether the collector was on, and the last
to leave restores exactly that, so an app that turned the collector off itself keeps it off.
A call that turns it on or off inside the block is overridden when the last block ends.
"""

from __future__ import annotations

import gc
from _thread import allocate_lock  # threading's Lock, without importing threading

__all__ = ["collector_paused"]

_lock = allocate_lock()
_depth = 0
_was_enabled = False


class collector_paused:  # lower case, as `contextlib.suppress`: used like a function
    """A ``with`` block during which the cycle collector does not run; nestable, and safe
    for blocks in several threads overlapping in any order."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _was_enabled
        with _lock:
            if _depth == 0:
                _was_enabled = gc.isenabled()
                gc.disable()
            _depth += 1

    def __exit__(self, *exc_info: object) -> None:
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
