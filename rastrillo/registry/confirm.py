"""The consent sentence: a write tool's `confirm` filled in with the call's real args."""

from __future__ import annotations

import re
from collections.abc import Mapping

from rastrillo.registry.declare import Tool, ToolDef

__all__ = ["PLACEHOLDER", "confirm_sentence", "placeholders"]

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
    return PLACEHOLDER.sub(lambda m: args.get(m[1], m[0]), defn.confirm)
