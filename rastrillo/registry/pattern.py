"""A declared ``pattern``, read as the providers read it: as an ECMA-262 (JavaScript)
regular expression, which is what JSON Schema's ``pattern`` is.

Python's ``re`` reads the same text otherwise, in ways a model can use to pass a
value the schema it was given refuses: ``$`` also matches before a final newline
(``^[0-9]+$`` takes ``"12\\n"``), ``\\d`` and ``\\w`` take every script's digits and
letters (``"١٢"``), ``.`` takes a carriage return or a line separator, and ``\\s``
misses a byte-order mark. :func:`compile_pattern` rewrites those few tokens so that
``re`` runs the pattern with ECMA-262's meaning; :func:`pattern_problem` refuses the
syntax only Python has, which a provider would read as something else, or not at all.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

__all__ = ["compile_pattern", "pattern_problem"]

_SPACE = " \t\n\x0b\x0c\r\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
"""ECMA-262's white space and line terminators: what its ``\\s`` matches."""
_OUTSIDE = {
    ".": "[^\n\r\u2028\u2029]",
    "$": r"\Z",
    r"\s": f"[{_SPACE}]",
    r"\S": f"[^{_SPACE}]",
    r"\B": r"(?!\b)",  # Python's \B never matches in an empty value
}
"""Each token whose meaning differs, outside a character class, as ``re`` says it."""
_INSIDE = {r"\s": _SPACE}
"""The same inside a character class."""
_PYTHON_ONLY = (
    (r"\\[AZ]", "\\A and \\Z are Python's: write ^ and $"),
    (r"\(\?P", "(?P…) groups are Python's: write (…) or (?:…)"),
    (r"\(\?[#>aiLmsux-]", "this (?…) group is Python's"),
    (r"[*+?}]\+", "possessive quantifiers (*+, ++, ?+) are Python's"),
    (r"\(\?\(", "conditional groups (?(1)…|…) are Python's"),
    (
        r"(?<!\\)\{,[0-9]*\}",
        "{,n} is a quantifier only to Python (to JavaScript it is text): write {0,n}",
    ),
)
"""Syntax only Python's ``re`` has, outside a character class, and what to write instead.
Searched as text (``re`` caches it): compiled at import, it would cost every CLI start."""


def _tokens(pattern: str) -> Iterator[tuple[str, bool]]:
    """The pattern's tokens (an escape is one), each with whether it is inside a
    character class; a class's opening (``[``, ``[^``, and a ``]`` right after, which is
    a literal there) is one token."""
    i, end, in_class = 0, len(pattern), False
    while i < end:
        char = pattern[i]
        if char == "\\":
            yield pattern[i : i + 2], in_class
            i += 2
        elif char == "[" and not in_class:
            j = i + 1 + (pattern[i + 1 : i + 2] == "^")
            j += pattern[j : j + 1] == "]"
            yield pattern[i:j], False
            in_class, i = True, j
        else:
            if char == "]":
                in_class = False
            yield char, in_class
            i += 1


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be declared, or None: syntax only Python's ``re`` has, a
    ``\\S`` inside a character class (not expressible for ``re``), a Unicode property
    (``\\p{L}``: ``re`` has none), or no regular expression at all."""
    outside: list[str] = []
    for token, in_class in _tokens(pattern):
        if token in ("[]", "[^]"):
            return f"pattern {pattern!r}: a ] first in [...] is literal only to Python: write \\]"
        if token == r"\S" and in_class:
            return f"pattern {pattern!r}: \\S inside [...] is not supported; write (?:\\S|[...])"
        if token in (r"\U", r"\N"):
            return (
                f"pattern {pattern!r}: {token} escapes are Python's (to JavaScript {token} is "
                f"the letter {token[1]}): write the character itself, or \\uXXXX"
            )
        if token in (r"\p", r"\P"):
            return (
                f"pattern {pattern!r}: Python's re has no Unicode property escapes "
                f"({token}{{…}}): write the ranges, as [A-Za-z\\u00C0-\\u024F]"
            )
        outside.append(" " if in_class else token)
    for syntax, problem in _PYTHON_ONLY:
        if re.search(syntax, "".join(outside)):
            return f"pattern {pattern!r}: {problem}; providers read it as JavaScript does"
    try:
        re.compile(pattern)  # first as written: an error's position is the author's
        compile_pattern(pattern)
    except re.error as exc:
        return f"pattern does not compile: {exc}"
    return None


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled to match what it matches for ECMA-262 (``re.ASCII`` makes
    ``\\d``, ``\\w`` and ``\\b`` ASCII, as there); raises ``re.error``."""
    said = (
        (_INSIDE if in_class else _OUTSIDE).get(token, token)
        for token, in_class in _tokens(pattern)
    )
    return re.compile("".join(said), re.ASCII)
