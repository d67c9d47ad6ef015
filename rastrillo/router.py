"""Matching a request to a route: its method and raw, still percent-encoded path.

Matching happens on the segments of the raw path, and a parameter is decoded
only after matching, so an encoded slash (``%2F``) never adds a segment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from rastrillo.errors import RastrilloError
from rastrillo.routing import Route, param_name, split_path


class _Node:
    __slots__ = ("literal", "param", "routes")

    def __init__(self) -> None:
        self.literal: dict[str, _Node] = {}
        self.param: _Node | None = None
        self.routes: dict[str, Route] = {}


@dataclass(frozen=True)
class Match:
    """A matched route with its decoded path parameters."""

    route: Route
    params: dict[str, str]


class Router:
    """Matches (method, raw path) to a route; literal segments win over parameters."""

    def __init__(self, routes: Sequence[Route]) -> None:
        self._root = _Node()
        self._routes = {(route.method, route.path): route for route in routes}
        for route in routes:
            node = self._root
            segments = split_path(route.path)
            if segments is None:
                raise ValueError(
                    f"route path {route.path!r} must start with / and have no empty segment"
                )
            for seg in segments:
                if param_name(seg) is not None:
                    node.param = node.param or _Node()
                    node = node.param
                else:
                    node = node.literal.setdefault(seg, _Node())
            if route.method in node.routes:
                raise RastrilloError(
                    f"two routes for {route.method} {route.path}: "
                    f"{node.routes[route.method].source} and {route.source}"
                )
            node.routes[route.method] = route

    def match(self, method: str, raw_path: str) -> Match | None:
        """The route for this method and raw path, with its parameters; None if there is none.

        ``HEAD`` is answered by the ``GET`` route.
        """
        segments = split_path(raw_path)
        node = None if segments is None else self._find(self._root, segments, 0)
        route = None if node is None else node.routes.get("GET" if method == "HEAD" else method)
        if route is None:
            return None
        assert segments is not None
        return Match(route, _param_values(route, segments))

    def allowed_methods(self, raw_path: str) -> list[str]:
        """The methods some route answers at this raw path, sorted; empty if none does."""
        segments = split_path(raw_path)
        node = None if segments is None else self._find(self._root, segments, 0)
        return [] if node is None else sorted(node.routes)

    def match_route(self, method: str, pattern: str, params: Mapping[str, str]) -> Match | None:
        """The route ``pattern`` itself, with ``params`` as its parameters' values.

        For a dispatched tool call: it reaches exactly its tool's route, never a
        literal sibling (``/notes/export`` for ``/notes/{id}`` with id ``export``),
        and its parameters are the values dispatch put in the path, not read back
        from it. None when there is no such route, or ``params`` are not exactly its
        parameters, each a non-empty value.
        """
        route = self._routes.get(("GET" if method == "HEAD" else method, pattern))
        if route is None or len(params) != len(route.params):
            return None
        for _, name in route.params:
            if not params.get(name):
                return None
        return Match(route, dict(params))

    def _find(self, node: _Node, segments: list[str], i: int) -> _Node | None:
        if i == len(segments):
            return node if node.routes else None
        seg = segments[i]
        child = node.literal.get(unquote(seg))
        if child is not None:
            found = self._find(child, segments, i + 1)
            if found is not None:
                return found
        if node.param is not None and seg:
            return self._find(node.param, segments, i + 1)
        return None


def _param_values(route: Route, segments: list[str]) -> dict[str, str]:
    return {name: unquote(segments[i]) for i, name in route.params}
