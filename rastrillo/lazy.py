"""A package's public names imported on first use (PEP 562), so that ``import rastrillo``
and ``rastrillo.tools`` cost next to nothing and each command loads only what it runs."""

from __future__ import annotations

from importlib import import_module

# `typing.TYPE_CHECKING` without importing `typing`: see rastrillo/__init__.py.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def on_first_use(
    namespace: dict[str, Any], names: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose globals are ``namespace``:
    each of ``names`` is imported from its module (absolute, or relative to the package)
    when it is first asked for, then kept among the package's globals."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(import_module(module, package), name)
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
