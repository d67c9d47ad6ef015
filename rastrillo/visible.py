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

Visible is not enough when a character is drawn as an ASCII one: ``paypal.com`` spelled
with a Cyrillic a (U+0430) is drawn pixel for pixel as ``paypal.com``; fullwidth digits
(U+FF11 U+FF10), or ``1`` and an Arabic-Indic zero (U+0660), read as ``10``; a one dot
leader (U+2024) or a division slash (U+2215) read as ``.`` and ``/``. Such a character
is a look-alike (:func:`lookalikes`): a page shows it with its code point beside it, a
terminal escapes it. Text wholly in one other script (a Russian, Japanese or Arabic
word, with its own punctuation) reads as written; what is marked
is a letter of a script drawn like Latin (Cyrillic, Greek …) in a word that has Latin
letters too, every digit that is not ASCII, a letter or digit that is an ASCII one
in another form (fullwidth, mathematical, a ligature), and punctuation drawn as ASCII
punctuation in a word with an ASCII letter or digit, or with no letter at all.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "Part",
    "field",
    "for_terminal",
    "is_hidden",
    "json_line",
    "literal",
    "lookalikes",
    "parts",
    "quoted",
]

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


_LATIN_LIKE_SCRIPTS = frozenset(
    {"ARMENIAN", "CANADIAN", "CHEROKEE", "COPTIC", "CYRILLIC", "GREEK", "LISU", "TIFINAGH"}
)
"""Scripts with letters drawn as Latin ones (Cyrillic U+0430 U+0435 U+043E as a e o,
Greek U+03BF U+03BD as o v, Armenian U+0585 as o, Cherokee U+13AA as A, Lisu U+A4EE as A,
Canadian syllabics U+146D as P, Tifinagh U+2D54 as O): a letter of theirs in a word
with Latin letters is marked. The script is the first word of a letter's Unicode
name (``CYRILLIC SMALL LETTER A``): Python's unicodedata has no Script property."""
_PUNCTUATION_LIKE = frozenset(
    "\u2215\u2044\u29f8\u2571"  # division, fraction, big slash; a box diagonal: as /
    "\u2216\u29f5"  # set minus, reverse solidus operator: as a backslash
    "\u2236\ua789\u0589\u05c3\u02f8\ua4fd"  # ratio, Armenian full stop … : as :
    "\ua4f8\ua4fa"  # Lisu tone marks: as . and ..
    "\ua4f9\ua4fb\u201a"  # Lisu tone marks, a low single quote: as , and .,
    "\u2010\u2011\u2012\u2043\u2212\u02d7\ua4fe"  # hyphens, minus signs: as -
    "\u01c3"  # the retroflex click letter: as !
    "\u01c0\u2223\u23d0\u05c0"  # the dental click letter, divides, paseq: as | (or l)
    "\u02c2\u2039\u02c3\u203a"  # arrowheads, single angle quotes: as < and >
    "\u02b9\u02bc\u02c8\u2032\u05f3"  # modifier primes, prime, geresh: as '
    "\u02ba\u2033\u05f4"  # double primes, gershayim: as "
    "\u2217\ua78a\u00d7\u2a2f"  # asterisk operator, short equals, multiplication: *, =, x
)
"""Punctuation drawn as ASCII punctuation that has no compatibility form to say so (those
that have one, a fullwidth solidus or a one dot leader, are found by it). Typographic
quotes and dashes (U+2018 to U+201F, U+2013, U+2014) are left out: they are the everyday
punctuation of prose."""
_ALWAYS, _PUNCTUATION, _LETTER = "always", "punctuation", "letter"


@lru_cache(maxsize=4096)
def _folded(char: str) -> str:
    """The text ``char`` is a form of, by NFKC (``a`` for a fullwidth a, ``.`` for a one dot
    leader, a Greek alpha for a mathematical one)."""
    return unicodedata.normalize("NFKC", char)


def _ascii_form(char: str) -> str:
    """The ASCII text ``char`` is a form of (itself, for ASCII), or "" if it is none."""
    folded = _folded(char)
    return folded if folded.isascii() else ""


@lru_cache(maxsize=4096)
def _kind(char: str) -> str:
    """Which kind of look-alike ``char`` is, "" for none: one marked wherever it stands
    (a digit not ASCII; a letter or number that is an ASCII one in another form), or one
    marked by the word it stands in (punctuation; a letter of a Latin-like script)."""
    if char.isascii():
        return ""
    category = unicodedata.category(char)
    form = _ascii_form(char)
    if unicodedata.decimal(char, None) is not None or (
        category[0] in "LN" and any(c.isalnum() for c in form)
    ):
        return _ALWAYS
    if (form.strip() and not any(c.isalnum() for c in form)) or char in _PUNCTUATION_LIKE:
        return _PUNCTUATION
    if category[0] == "L":
        name = unicodedata.name(_folded(char)[0], "")
        if name.split(" ", 1)[0] in _LATIN_LIKE_SCRIPTS:
            return _LETTER
    return ""


def lookalikes(text: str, *, before: str = "", after: str = "") -> list[bool]:
    """For each character of ``text``, whether it could pass for an ASCII one there.

    A word (a run of characters between whitespace) decides for its punctuation and its
    Latin-like letters: its punctuation is marked if it has an ASCII letter or digit (in
    any form), or no letter at all (Japanese keeps its fullwidth brackets, a fullwidth
    solidus alone is marked); its Cyrillic, Greek … letters if it has a Latin letter
    (``paypal`` with a Cyrillic a, not a Russian word). ``before`` and ``after``: the
    text around ``text`` on its line (a sentence's words around a value), whose words
    ``text``'s first and last words go on.
    """
    head = len(before) - _word_start(before[::-1])
    tail = _word_start(after)
    whole = before[head:] + text + after[:tail]
    flags: list[bool] = []
    for word in _split_words(whole):
        kinds = [_kind(c) for c in word]
        if any(kinds):
            forms = [_ascii_form(c) for c in word]
            latin = any(f.isalpha() for f in forms)
            ascii_alnum = any(any(c.isalnum() for c in f) for f in forms)
            letters = any(unicodedata.category(c)[0] == "L" for c in word)
            marked = {
                _ALWAYS: True,
                _PUNCTUATION: ascii_alnum or not letters,
                _LETTER: latin,
                "": False,
            }
            flags += [marked[k] for k in kinds]
        else:
            flags += [False] * len(word)
    return flags[len(before) - head : len(before) - head + len(text)]


def _word_start(text: str) -> int:
    """How many characters ``text`` starts with before its first whitespace."""
    return next((i for i, c in enumerate(text) if c.isspace()), len(text))


def _split_words(text: str) -> list[str]:
    """``text`` cut before and after each whitespace character, nothing lost."""
    pieces: list[str] = []
    start = 0
    for i, char in enumerate(text):
        if char.isspace():
            pieces += [text[start:i], char]
            start = i + 1
    pieces.append(text[start:])
    return [p for p in pieces if p]


def for_terminal(text: str) -> str:
    """``text`` on one line, each hidden character and each look-alike as a Python escape
    (``\\n``, ``\\x1b``, ``\\u200b``, ``\\u0430``), and each backslash as ``\\\\``:
    nothing reaches the terminal that could forge a line or drive it, or pass for an ASCII
    character, and every line names exactly one text. A backslash printed as itself would
    let the four characters ``\\x1b`` read as an escaped ESC."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    return _escape_shown(text, _escape, backslash=True)


def quoted(text: str) -> str:
    """``text`` in double quotes for a terminal, escaped as :func:`for_terminal` escapes it
    and its quotes as ``\\"``: a field a stranger chose (a client's name, a model's arg)
    that must end where its quotes do, not let what follows a quote inside it forge the
    fields after it (``revoked …``, ``→ 200``)."""
    return '"' + for_terminal(text).replace('"', '\\"') + '"'


def json_line(value: object) -> str:
    """``value`` as JSON on one line for a terminal, escaped once: JSON's own escapes.

    JSON already writes each backslash, quote and control character in a string as an
    escape, so what it leaves as it is and :func:`for_terminal` would escape (a look-alike,
    a line separator, a zero-width space, DEL) is written as a JSON escape too
    (``\\u2028``), not escaped again: the line parses (``json.loads``) back to ``value``."""
    text = json.dumps(value, ensure_ascii=False)
    if text.isascii() and text.isprintable():
        return text
    return _escape_shown(text, _json_escape, backslash=False)


def _json_escape(char: str) -> str:
    units = char.encode("utf-16-be")  # two UTF-16 units (a surrogate pair) past U+FFFF
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def literal(value: object) -> str:
    """``repr(value)`` for a terminal, escaped once: what a log line's ``%r`` prints.

    A Python literal (a string, bytes, a number, True, False, None, or a list, tuple, set
    or dict of them) already writes each of its backslashes as ``\\\\``: each one there
    begins an escape, so only what its repr leaves as it is and :func:`for_terminal`
    would escape (a look-alike, a blank-looking letter such as U+3164) is escaped, the
    same way, and the line reads back (``ast.literal_eval``) as the value itself. Any other
    object's repr is text of its own making, escaped by :func:`for_terminal` whole."""
    text = repr(value)
    if not _is_literal(value):
        return for_terminal(text)
    if text.isascii():
        return text
    return _escape_shown(text, _escape, backslash=False)


def _escape_shown(text: str, escape: Callable[[str], str], *, backslash: bool) -> str:
    """``text`` with each hidden character and each look-alike written by ``escape``, and
    with ``backslash`` each backslash too (where no escape of the text's own begins)."""
    marks = zip(text, _hidden(text), lookalikes(text), strict=True)
    return "".join(escape(c) if h or a or (backslash and c == "\\") else c for c, h, a in marks)


_ATOMS = frozenset({str, bytes, int, float, complex, bool, type(None)})
_CONTAINERS = frozenset({list, tuple, set, frozenset})


def _is_literal(value: object, inside: frozenset[int] = frozenset()) -> bool:
    """Whether ``repr(value)`` is a Python literal holding nothing but literals: exact types
    only (a subclass's repr may be any text), and no container inside itself (``[...]``)."""
    kind = type(value)
    if kind in _ATOMS:
        return True
    if id(value) in inside:
        return False
    inside |= {id(value)}
    if isinstance(value, dict) and kind is dict:
        return all(_is_literal(k, inside) and _is_literal(v, inside) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset) and kind in _CONTAINERS:
        return all(_is_literal(v, inside) for v in value)
    return False


_PLAIN_WORD = re.compile(r"[\w.:@/+-]+")
"""What a field of a terminal line may be unquoted: one word of letters, digits and
``_ . : @ / + -`` (a user id, an email, a tool's name), nothing that separates fields."""


def field(text: str) -> str:
    """``text`` as one field of a terminal line: as it is when it is one plain word that
    :func:`for_terminal` leaves alone (``3``, ``alice@example.com``), else :func:`quoted`.
    A field a stranger chose (a user name, a tool a model made up) then ends where it does,
    whatever spaces and fields of its own it holds."""
    if _PLAIN_WORD.fullmatch(text) and for_terminal(text) == text:
        return text
    return quoted(text)


def _escape(char: str) -> str:
    escaped = repr(char)[1:-1]
    if escaped != char:  # \\, \n, \t, \x1b, \u200b, \U000e0001 …
        return escaped
    # Printable to Python, blank or an ASCII look-alike to a reader (U+2800, U+0430 …).
    code = ord(char)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class Part(NamedTuple):
    """A run of plain text (``label`` None), or one character marked with its code point
    (``label`` ``"U+200B"``): a hidden one, which a page shows as its label alone, or a
    ``lookalike``, which it shows as itself with its label beside it."""

    text: str
    label: str | None = None
    lookalike: bool = False


def parts(
    text: str, *, leading: bool = True, trailing: bool = True, before: str = "", after: str = ""
) -> list[Part]:
    """``text`` as runs of plainly visible text and single marked characters, in order.

    A page shows each hidden character as a visible mark with its label, and each
    look-alike (:func:`lookalikes`) with its label beside it, so the person reading it
    sees every character there is, and none passes for another. Leading and trailing
    plain spaces count as hidden too: nothing shows where they end. ``leading`` or
    ``trailing`` False: ``text`` is a piece of a longer text that goes on on that side,
    where its spaces show; ``before`` and ``after``: that text, whose words the
    look-alikes are judged in.
    """
    out: list[Part] = []
    run: list[str] = []
    start = len(text) - len(text.lstrip(" ")) if leading else 0
    end = len(text.rstrip(" ")) if trailing else len(text)
    alike = lookalikes(text, before=before, after=after)
    for i, (char, hidden) in enumerate(zip(text, _hidden(text), strict=True)):
        if hidden or (char == " " and not start <= i < end) or alike[i]:
            if run:
                out.append(Part("".join(run)))
                run = []
            out.append(Part(char, label(char), lookalike=alike[i] and not hidden))
        else:
            run.append(char)
    if run:
        out.append(Part("".join(run)))
    return out
