"""Rastrillo: a small web framework whose actions become tools an AI agent can call, safely.

The names that need the web stack (`App`, `Options`, `handler`, `Context`,
`run`) are imported on first use (PEP 562), so ``import rastrillo`` and
``rastrillo generate`` stay cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .actor import Actor, Approval
from .errors import ConfigError, GenerateError, RastrilloError
from .limits import body_limit
from .registry.declare import Access, Arg, Tool, ToolDef, ToolRead, ToolWrite
from .registry.validate import ArgError

if TYPE_CHECKING:
    from .app import App, handler
    from .context import Context
    from .options import Options
    from .serve import run

__version__ = "0.1.0"

__all__ = [
    "Access",
    "Actor",
    "App",
    "Approval",
    "Arg",
    "ArgError",
    "ConfigError",
    "Context",
    "GenerateError",
    "Options",
    "RastrilloError",
    "Tool",
    "ToolDef",
    "ToolRead",
    "ToolWrite",
    "__version__",
    "body_limit",
    "handler",
    "run",
]

_LAZY = {
    "App": ".app",
    "Options": ".options",
    "handler": ".app",
    "Context": ".context",
    "run": ".serve",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rastrillo' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
