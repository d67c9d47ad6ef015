"""Filesystem routing: from an action file's path to a route, and a route path's parts.

An action is ``actions/<dirs>/<name>.<METHOD>.py``. Its route path is the
directories plus ``name``; ``[param]`` becomes ``{param}``; ``index`` adds no
segment. Matching a request to a route is `rastrillo.router`'s: `rastrillo generate`
needs this module and not that one (nor the URL parsing it imports).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from rastrillo.awaitable import is_async_callable
from rastrillo.errors import RastrilloError

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

# `typing.TYPE_CHECKING` without importing `typing`: 8 % of what `rastrillo generate` imports.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Handle = Callable[[Any], Any] | Callable[[Any], Awaitable[Any]]
    """An action's `handle`: called with the request's context, awaited if it is async."""


# The paths the framework serves itself, ahead of the app's routes. Defined here, the
# lowest layer that needs them: generate refuses an action an app could never reach.
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
VERSION_PATH = "/api/version"
NEXT_DUE_PATH = "/api/next-due"
MCP_PATH = "/mcp"
"""Where ``Options(mcp=True)`` serves MCP (Streamable HTTP)."""
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
"""The protected-resource metadata (RFC 9728) a 401 from ``/mcp`` points to."""
AUTHORIZATION_SERVER_PATH = "/.well-known/oauth-authorization-server"
OAUTH_AUTHORIZE_PATH = "/_rastrillo/oauth/authorize"
OAUTH_TOKEN_PATH = "/_rastrillo/oauth/token"
OAUTH_REGISTER_PATH = "/_rastrillo/oauth/register"
OAUTH_REVOKE_PATH = "/_rastrillo/oauth/revoke"
CONSENT_PATH = "/_rastrillo/agents/authorize"
"""The page where a person lets an MCP client in (``rastrillo.pages.authorize``)."""
OAUTH_PATHS = (
    RESOURCE_METADATA_PATH,
    RESOURCE_METADATA_PATH + MCP_PATH,
    AUTHORIZATION_SERVER_PATH,
    OAUTH_AUTHORIZE_PATH,
    OAUTH_TOKEN_PATH,
    OAUTH_REGISTER_PATH,
    OAUTH_REVOKE_PATH,
)
"""The OAuth endpoints and metadata ``Options(mcp=True)`` serves outside the app's middleware
(RFC 9728 puts the resource's path after the well-known name; both forms answer)."""
FRAMEWORK_PREFIX = "/_rastrillo/"
"""Under it, the framework's pages: approvals, the console, agents, OAuth."""
STATIC_PREFIX = "/static/"
"""Under it, the files of the app's ``static/`` folder."""

_FRAMEWORK_PATHS = {
    HEALTH_PATH: "the health check",
    READY_PATH: "the readiness check",
    VERSION_PATH: "the app's version",
    NEXT_DUE_PATH: "when the app next needs waking",
    MCP_PATH: "MCP, with Options(mcp=True)",
    RESOURCE_METADATA_PATH: "OAuth metadata",
    RESOURCE_METADATA_PATH + MCP_PATH: "OAuth metadata",
    AUTHORIZATION_SERVER_PATH: "OAuth metadata",
}
_FRAMEWORK_PREFIXES = {
    FRAMEWORK_PREFIX: "the framework's pages",
    STATIC_PREFIX: "the static/ folder",
}


def framework_use(path: str) -> str | None:
    """What the framework serves at a route ``path`` (``/orders/{id}``), which the app's
    action there would never be reached for; None when the path is the app's."""
    if path in _FRAMEWORK_PATHS:
        return _FRAMEWORK_PATHS[path]
    for prefix, use in _FRAMEWORK_PREFIXES.items():
        if path.startswith(prefix):
            return use
    return None


class RouteFileError(RastrilloError):
    """An action file's name or folders do not form a valid route."""


@dataclass(frozen=True)
class Route:
    """One action: its method, path, source file (relative to the app) and handler."""

    method: str
    path: str
    source: str
    handle: Handle = field(compare=False, repr=False)
    is_async: bool = field(init=False, compare=False, repr=False)
    """Whether calling ``handle`` gives a coroutine; decided once, not per request."""
    params: tuple[tuple[int, str], ...] = field(init=False, compare=False, repr=False)
    """The path's parameters as (segment index, name); found once, not per request."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", is_async_callable(self.handle))
        parts = split_path(self.path) or []
        params = tuple(
            (i, name) for i, part in enumerate(parts) if (name := param_name(part)) is not None
        )
        object.__setattr__(self, "params", params)


def is_action_part(name: str) -> bool:
    """Files and folders whose name starts with `_` (or `.`) are never actions."""
    return not name.startswith(("_", "."))


def route_for_file(relative: str) -> tuple[str, str]:
    """Return (method, path) for a file relative to ``actions/`` (``orders/[id].GET.py``).

    Raises :class:`RouteFileError` with a message naming what is wrong.
    """
    *dirs, filename = relative.split("/")
    if not filename.endswith(".py"):
        raise RouteFileError("an action file must end in .py")
    stem = filename[: -len(".py")]
    name, dot, method = stem.rpartition(".")
    if not dot or not name:
        raise RouteFileError(
            "an action file is named <name>.<METHOD>.py (start helper modules with _)"
        )
    if method not in METHODS:
        raise RouteFileError(f"bad method {method!r}: use one of {', '.join(METHODS)}")
    segments = [_segment(part) for part in dirs]
    if name != "index":
        segments.append(_segment(name))
    path = "/" + "/".join(segments)
    if path.count("{") > 1:  # only a path with two parameters can give one name twice
        params = path_params(path)
        if len(params) != len(set(params)):
            raise RouteFileError(f"a path parameter appears twice in {path}")
    return method, path


def _segment(part: str) -> str:
    # String tests, not a regular expression: a thousand actions' folders make it count.
    if not (len(part) > 1 and part[0] == "[" and part[-1] == "]"):
        if "[" in part or "]" in part or "{" in part or "}" in part:
            raise RouteFileError(f"bad path segment {part!r}: a parameter is written [name]")
        return part
    name = part[1:-1]
    if not name:
        raise RouteFileError("empty parameter []: name it, as in [id]")
    if not (name.isascii() and name.isidentifier()):  # [A-Za-z_][A-Za-z0-9_]*
        raise RouteFileError(f"bad parameter name [{name}]: use letters, digits and _")
    return "{" + name + "}"


_PARAM = re.compile(r"(?<![^/])\{([^/]*)\}(?![^/])")
"""A parameter of a route path: a whole segment in braces, ``{id}``; its group, the name.

The one place a route path's parameters are parsed, for a segment (`param_name`) and for a
whole path in one pass (`path_params`, `route_shape`, `fill_path`): a Python call for each
segment of each action's path was a hundredth of `rastrillo generate`."""


def param_name(segment: str) -> str | None:
    """``id`` for the segment ``{id}`` of a route path (a text with no ``/``); None for a
    literal segment."""
    found = _PARAM.fullmatch(segment)
    return None if found is None else found[1]


def path_params(path: str) -> list[str]:
    """The parameter names of a route path, in order."""
    return _PARAM.findall(path)


def route_shape(path: str) -> str:
    """The path with every parameter unnamed: ``/orders/{id}`` and ``/orders/{n}`` are one route."""
    return _PARAM.sub("{}", path)


def fill_path(path: str, values: Mapping[str, str]) -> str:
    """The raw path of a route with its parameters filled in, each percent-encoded whole."""
    from urllib.parse import quote  # here: with ipaddress, a twelfth of generate's imports

    return _PARAM.sub(lambda param: quote(values[param[1]], safe=""), path)


def raw_path(scope: Mapping[str, Any]) -> str:
    """The request's path as sent, still percent-encoded: what every route matches on, so
    an encoded slash stays inside one segment."""
    raw = scope.get("raw_path")
    return raw.decode("latin-1").split("?", 1)[0] if raw else scope["path"]


def split_path(path: str) -> list[str] | None:
    """Split a raw path into segments; `/` is no segment, one trailing `/` is ignored; None
    for a path that does not start with `/` or has an empty segment."""
    if not path.startswith("/"):
        return None
    body = path[1:]
    if body.endswith("/"):
        body = body[:-1]
    if not body:
        return []
    segments = body.split("/")
    return None if "" in segments else segments
