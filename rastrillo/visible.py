"""Text shown to a person, with nothing hidden: every character that displays as nothing
(or moves other text) made visible.

A value a model chose reaches a terminal (``rastrillo audit``) and the approval
page. Control characters there forge lines or drive the terminal; invisible
ones (zero-width spaces, line separators, bidirectional marks, variation
selectors, tag characters, blank-looking letters) make ``"1"`` followed by forty
of them read as ``1``. Combining marks past the first two on one character are
hidden too: marks stack above and below their letter, and forty of them are
drawn over the lines around it (over the host a consent page names, say). One
definition of "not plainly visible" serves both renderings: :func:`for_terminal`
escapes each such character, and :func:`parts` splits text so a page can show each
one as a labelled mark.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

__all__ = ["Part", "for_terminal", "is_hidden", "parts"]

# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties): code points a
# renderer shows as nothing when it has no glyph for them, whatever their category.
_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# Controls, format characters, surrogates, private use, unassigned, line and
# paragraph separators, and every space but the plain one.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_BLANK = frozenset({0x2800, 0xFFFC})
"""Neither ignorable nor a space to Unicode, yet drawn as blank (the braille pattern
blank) or as nothing at all (the object replacement character, in Chromium)."""
_MARKS = frozenset({"Mn", "Me"})
_MARKS_SHOWN = 2
"""Combining marks shown on one character; each one past these is hidden. Two is what
everyday text stacks (a Vietnamese vowel's two accents, Arabic shadda and a vowel)."""


@lru_cache(maxsize=4096)
def is_hidden(char: str) -> bool:
    """Whether ``char`` could display as nothing, as blank, or move the text around it."""
    if char == " ":
        return False
    code = ord(char)
    if code in _BLANK or unicodedata.category(char) in _HIDDEN_CATEGORIES:
        return True
    return any(low <= code <= high for low, high in _IGNORABLE)


def label(char: str) -> str:
    """``U+200B``: how a page names a hidden character."""
    return f"U+{ord(char):04X}"


@lru_cache(maxsize=4096)
def _is_mark(char: str) -> bool:
    return unicodedata.category(char) in _MARKS


def _hidden(text: str) -> list[bool]:
    """For each character of ``text``, whether it is hidden: :func:`is_hidden`, or a
    combining mark past the first :data:`_MARKS_SHOWN` on one character."""
    flags: list[bool] = []
    marks = 0
    for char in text:
        marks = marks + 1 if _is_mark(char) else 0
        flags.append(marks > _MARKS_SHOWN or is_hidden(char))
    return flags


def for_terminal(text: str) -> str:
    """``text`` on one line, each hidden character as a Python escape (``\\n``, ``\\x1b``,
    ``\\u200b``): nothing reaches the terminal that could forge a line or drive it."""
    hidden = _hidden(text)
    if not any(hidden):
        return text
    return "".join(_escape(c) if h else c for c, h in zip(text, hidden, strict=True))


def _escape(char: str) -> str:
    escaped = repr(char)[1:-1]
    if escaped != char:  # \n, \t, \x1b, \u200b, \U000e0001 …
        return escaped
    # Printable to Python, blank to a reader (U+2800, U+3164, U+FFFC …).
    code = ord(char)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


Part = tuple[str, str | None]
"""A run of plain text ``(text, None)``, or one hidden character ``(char, "U+200B")``."""


def parts(text: str, *, leading: bool = True, trailing: bool = True) -> list[Part]:
    """``text`` as runs of plainly visible text and single hidden characters, in order.

    A page shows each hidden character as a visible mark with its label, so the
    person reading it sees every character there is. Leading and trailing plain
    spaces count as hidden too: nothing shows where they end. ``leading`` or
    ``trailing`` False: ``text`` is a piece of a longer text that goes on on that side,
    where its spaces show.
    """
    out: list[Part] = []
    run: list[str] = []
    start = len(text) - len(text.lstrip(" ")) if leading else 0
    end = len(text.rstrip(" ")) if trailing else len(text)
    for i, (char, hidden) in enumerate(zip(text, _hidden(text), strict=True)):
        if hidden or (char == " " and not start <= i < end):
            if run:
                out.append(("".join(run), None))
                run = []
            out.append((char, label(char)))
        else:
            run.append(char)
    if run:
        out.append(("".join(run), None))
    return out
