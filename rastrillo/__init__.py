"""Rastrillo: a small web framework whose actions become tools an AI agent can call, safely.

Every public name is imported on first use (PEP 562), so ``import rastrillo``
costs next to nothing and ``rastrillo generate`` loads only what it runs.
"""

from __future__ import annotations

from rastrillo.lazy import on_first_use

# `typing.TYPE_CHECKING` without importing `typing`: 8 % of what `rastrillo generate` imports.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from rastrillo.actor import Actor, Approval
    from rastrillo.app import App, handler
    from rastrillo.context import Context
    from rastrillo.errors import ConfigError, GenerateError, RastrilloError
    from rastrillo.limits import body_limit
    from rastrillo.options import Options
    from rastrillo.registry.declare import Access, Arg, Tool, ToolDef, ToolRead, ToolWrite
    from rastrillo.registry.validate import ArgError
    from rastrillo.serve import run

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
    "Access": ".registry.declare",
    "Actor": ".actor",
    "App": ".app",
    "Approval": ".actor",
    "Arg": ".registry.declare",
    "ArgError": ".registry.validate",
    "ConfigError": ".errors",
    "Context": ".context",
    "GenerateError": ".errors",
    "Options": ".options",
    "RastrilloError": ".errors",
    "Tool": ".registry.declare",
    "ToolDef": ".registry.declare",
    "ToolRead": ".registry.declare",
    "ToolWrite": ".registry.declare",
    "body_limit": ".limits",
    "handler": ".app",
    "run": ".serve",
}


__getattr__, __dir__ = on_first_use(globals(), _LAZY)
