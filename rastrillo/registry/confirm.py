"""The consent sentence: a write tool's `confirm` filled in with the call's real args."""

from __future__ import annotations

import re
from collections.abc import Mapping

from rastrillo.registry.declare import Tool, ToolDef

__all__ = ["PLACEHOLDER", "confirm_parts", "confirm_sentence", "placeholders"]

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""A `{name}` in a confirm template; generate checks each one names an arg."""


def placeholders(template: str) -> list[str]:
    """The placeholder names of a confirm template, in order of appearance."""
    return PLACEHOLDER.findall(template)


def confirm_sentence(defn: Tool | ToolDef, args: Mapping[str, str]) -> str:
    """Render `defn.confirm` with `args`, so the human approves what will actually run.

    One left-to-right pass over the template: a value is inserted literally and
    never expanded again (a value `{reason}` stays `{reason}`), and a
    placeholder without a value stays as written. The result depends only on
    the template and the values, never on the order of `args`.
    """
    return "".join(text for text, _ in confirm_parts(defn, args))


def confirm_parts(defn: Tool | ToolDef, args: Mapping[str, str]) -> list[tuple[str, bool]]:
    """The sentence :func:`confirm_sentence` renders, in pieces: the template's text
    (False) and each value put in it (True), in order, none empty.

    A page needs to know where a value stands: a right-to-left letter in one value
    otherwise carries the neutral characters and numbers after it into its run, and the
    sentence around it (another value included) reads in another order.
    """
    template, parts, start = defn.confirm, [], 0
    for m in PLACEHOLDER.finditer(template):
        value = args.get(m[1])
        parts += [
            (template[start : m.start()], False),
            (m[0], False) if value is None else (value, True),
        ]
        start = m.end()
    parts.append((template[start:], False))
    return [(text, value) for text, value in parts if text]
