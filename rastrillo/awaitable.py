"""Whether calling something gives a coroutine: the one test routing, ``@require`` and
the sidecar use to decide between awaiting a callable and running it in a thread; and
the refusal of an awaitable from a hook that is called, never awaited."""

from __future__ import annotations

import functools
import inspect

from rastrillo.errors import ConfigError

__all__ = ["is_async_callable", "refuse_awaitable"]


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


def refuse_awaitable(result: object, hook: str) -> None:
    """Refuse with a `ConfigError` what ``hook`` returned when it is awaitable: the hook is
    called, never awaited, so its work would not be done (a ``lambda`` around an ``async
    def`` passes `Options`' own check, which sees only the lambda)."""
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()  # never to run: no "never awaited" warning as well
        raise ConfigError(
            f"{hook} returned {type(result).__name__}, which is never awaited:"
            " make it a plain function (def, not async def)"
        )
