"""Whether calling something gives a coroutine: the one test routing, ``@require`` and
the sidecar use to decide between awaiting a callable and running it in a thread."""

from __future__ import annotations

import functools
import inspect

__all__ = ["is_async_callable"]


def is_async_callable(obj: object) -> bool:
    """True for an ``async def`` function or method, a ``functools.partial`` of one, and
    an object whose class defines ``async def __call__``."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    if inspect.iscoroutinefunction(obj):
        return True
    if isinstance(obj, type) or not callable(obj):
        return False
    return inspect.iscoroutinefunction(type(obj).__call__)
