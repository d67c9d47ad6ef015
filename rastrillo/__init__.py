"""Rastrillo: a small web framework whose actions become tools an AI agent can call, safely."""

from .actor import Actor, Approval
from .app import App, Options, handler
from .context import Context
from .errors import ConfigError, GenerateError, RastrilloError
from .limits import body_limit
from .registry.declare import Access, Tool, ToolDef, ToolRead, ToolWrite
from .serve import run

__version__ = "0.1.0"

__all__ = [
    "Access",
    "Actor",
    "App",
    "Approval",
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
