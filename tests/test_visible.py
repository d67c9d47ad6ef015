"""What a person reads of a value: no character passes for an ASCII one unmarked, and text
in one script reads as written (rastrillo.visible)."""

from __future__ import annotations

import ast
import json
import re
import string
import unicodedata

from hypothesis import assume, example, given
from hypothesis import strategies as st

from rastrillo import visible
from rastrillo.visible import field, for_terminal, json_line, literal, lookalikes, parts

PRINTABLE = string.ascii_letters + string.digits + string.punctuation + " "

HOMOGLYPHS = {
    "a": "\u0430",
    "c": "\u0441",
    "e": "\u0435",
    "i": "\u0456",
    "j": "\u0458",
    "o": "\u043e\u03bf",
    "p": "\u0440",
    "s": "\u0455",
    "v": "\u03bd",
    "x": "\u0445",
    "y": "\u0443",
    "A": "\u0410\u0391",
    "B": "\u0412\u0392",
    "C": "\u0421",
    "E": "\u0415\u0395",
    "H": "\u041d\u0397",
    "I": "\u0406\u0399",
    "K": "\u041a\u039a",
    "M": "\u041c\u039c",
    "N": "\u039d",
    "O": "\u041e\u039f\u0555",
    "P": "\u0420\u03a1",
    "S": "\u0405\u0405",
    "T": "\u0422\u03a4",
    "X": "\u0425\u03a7",
    "Z": "\u0396",
}
"""Cyrillic, Greek and Armenian letters drawn as the ASCII letter."""
PUNCTUATION = {
    ".": "\u2024\ua4f8",
    "/": "\u2215\u2044",
    ":": "\u2236\ua789\u0589",
    "-": "\u2010\u2212",
    "!": "\u01c3",
    ";": "\u037e",
    "'": "\u02bc\u2032",
    ",": "\u201a",
}
"""Punctuation drawn as the ASCII one, with no compatibility form to say so."""


def forms(char: str) -> str:
    """Every look-alike of an ASCII character that the tests use, by kind."""
    out = chr(ord(char) + 0xFEE0) if "!" <= char <= "~" else ""  # fullwidth
    if char.isdigit():
        d = int(char)
        out += chr(0x660 + d) + chr(0x6F0 + d) + chr(0x966 + d) + chr(0x1D7CE + d)
    if char.isalpha():
        base = 0x1D400 if char.isupper() else 0x1D41A  # mathematical bold
        out += chr(base + ord(char.upper()) - ord("A"))
    return out + HOMOGLYPHS.get(char, "") + PUNCTUATION.get(char, "")


def words(text: str) -> list[range]:
    """The positions of each run of characters between whitespace."""
    out, start = [], 0
    for i, c in enumerate(text + " "):
        if c.isspace():
            if start < i:
                out.append(range(start, i))
            start = i + 1
    return out


def ascii_form(char: str) -> str:
    folded = unicodedata.normalize("NFKC", char)
    return folded if folded.isascii() else ""


@st.composite
def lookalike_of_ascii(draw: st.DrawFn) -> tuple[str, str, set[int]]:
    """An ASCII value, and one made from it by putting look-alikes in its place at some
    positions (which are returned): a letter of another script only in a word that keeps
    a Latin letter, punctuation only in a word with an ASCII letter or digit or with no
    letter at all (the words where a person reads them as ASCII)."""
    original = draw(st.text(st.sampled_from(PRINTABLE), min_size=1, max_size=30))
    at = draw(st.sets(st.integers(0, len(original) - 1), min_size=1, max_size=4))
    chars = list(original)
    for i in sorted(at):
        candidates = forms(original[i])
        assume(candidates)
        chars[i] = draw(st.sampled_from(candidates))
    value = "".join(chars)
    for word in words(value):
        word_forms = [ascii_form(value[i]) for i in word]
        latin = any(f.isalpha() for f in word_forms)
        alnum = any(c.isalnum() for f in word_forms for c in f)
        letters = any(unicodedata.category(value[i])[0] == "L" for i in word)
        for i in set(word) & at:
            if value[i] in "".join(HOMOGLYPHS.values()):
                assume(latin)
            digit = unicodedata.decimal(value[i], None) is not None
            if not digit and not ascii_form(value[i]).isalnum():  # punctuation
                assume(alnum or not letters)
    return original, value, at


@given(lookalike_of_ascii())
def test_a_value_made_to_pass_for_an_ascii_one_is_marked_where_it_differs(
    made: tuple[str, str, set[int]],
) -> None:
    original, value, at = made
    assert [i in at for i in range(len(value))] == lookalikes(value)
    marked = [p for p in parts(value) if p.lookalike]
    assert "".join(p.text for p in marked) == "".join(value[i] for i in sorted(at))
    # Its rendering is never an ASCII value's: that has no look-alike mark at all.
    assert not any(p.lookalike for p in parts(original))
    assert for_terminal(value).isascii()


@given(st.text(st.sampled_from(PRINTABLE)))
def test_ascii_reads_as_written(text: str) -> None:
    assert not any(lookalikes(text))
    assert for_terminal(text) == text.replace("\\", "\\\\")


ESCAPE = re.compile(r"\\(?:([\\ntr])|x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))|[^\\]", re.S)
"""One thing a terminal line shows: an escape, or a character that is not a backslash."""


def read_back(shown: str) -> str:
    """The one text ``shown`` can be the terminal form of: each escape read as the
    character it names, every other character as itself; an error if ``shown`` is no
    terminal form at all (a backslash that begins no escape)."""
    out, at = [], 0
    while at < len(shown):
        found = ESCAPE.match(shown, at)
        assert found is not None, f"a backslash that begins no escape at {at}: {shown!r}"
        simple, *code = found.groups()
        hexa = next((c for c in code if c), None)
        if simple:
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(simple, simple))
        else:
            out.append(chr(int(hexa, 16)) if hexa else found[0])
        at = found.end()
    return "".join(out)


TRICKY = "\\xuU0123456789abcdefntr\"' \x1b\x9b\n\r\t\u200b\u202e\u0430\u2024\uff11\u0301\U000e0041"


@given(st.text(st.sampled_from(TRICKY)) | st.text())
@example("\\x1b")
@example("\x1b")
@example("\\\\x1b")
def test_a_terminal_line_names_exactly_one_text(text: str) -> None:
    """Each printed form maps back to exactly one input: a text holding the four
    characters ``\\x1b`` is not printed as an escaped ESC is, nor a backslash the
    operator reads as beginning an escape."""
    assert read_back(for_terminal(text)) == text


@given(st.text(st.sampled_from(TRICKY + ' "()=[]@.:-_')) | st.text())
@example("")
@example("3")
@example("alice@example.com")
def test_a_field_is_one_word_or_quoted_and_names_one_text(text: str) -> None:
    """A field a stranger chose is printed as it is only when it is one plain word; else in
    quotes, so its spaces and quotes cannot end it. Either way it reads back as ``text``."""
    shown = field(text)
    if shown.startswith('"'):
        inner = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', shown)
        assert inner is not None, shown
        assert read_back(inner[1].replace('\\"', '"')) == text
    else:
        assert shown == text and re.fullmatch(r"[\w.:@/+-]+", text)


HOSTILE_VALUES = st.recursive(
    st.text(st.sampled_from(TRICKY))
    | st.text()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(TRICKY), inner, max_size=3),
    max_leaves=8,
)
"""What a model sends, or an app returns: texts with escapes and look-alikes, numbers, and
lists and objects of them."""


def terminal_safe(line: str) -> bool:
    """Nothing on ``line`` is hidden, and a look-alike in a word of ASCII letters is
    escaped (a terminal shows it as ``\\u0430``)."""
    return not any(map(visible.is_hidden, line)) and "p\u0430y" not in line


@given(HOSTILE_VALUES)
@example("\\x1b")
@example(['a"b\\c', "\u2028", "p\u0430ypal"])
def test_a_value_logged_with_r_is_escaped_once_and_reads_back_as_itself(value: object) -> None:
    """``%r`` in a log line: Python's repr, whose backslashes already begin escapes, is not
    escaped again (``'\\x1b'``, not ``'\\\\x1b'``), and what repr leaves and a
    terminal must not show is escaped the same way: the line is the value's literal."""
    shown = literal(value)
    assert terminal_safe(shown), shown
    assert ast.literal_eval(shown) == value
    assert shown == repr(value) or not repr(value).isascii()


@given(HOSTILE_VALUES)
@example({"note": 'say "hi"\\n', "to": "p\u0430ypal"})
def test_json_on_a_terminal_is_escaped_once_and_parses_back_as_itself(value: object) -> None:
    """A JSON body (``tools call``), a list arg (``rastrillo audit``): JSON's escapes are the
    one escaping, so ``\\"`` stays ``\\"`` and the line parses back to the value."""
    shown = json_line(value)
    assert terminal_safe(shown), shown
    assert json.loads(shown) == value


def test_a_terminal_tells_an_escape_from_the_text_of_one() -> None:
    forms = {
        for_terminal(t)
        for t in ("\x1b", "\\x1b", "\\\\x1b", "\u200b", "\\u200b", "\u0430", "\\u0430")
    }
    assert len(forms) == 7
    assert for_terminal("\\x1b[2J") == "\\\\x1b[2J"


SCRIPTS = {
    "cyrillic": [chr(c) for c in range(0x0410, 0x0450)] + ["\u0451", "\u0456"],
    "greek": [chr(c) for c in range(0x0391, 0x03AA) if c != 0x03A2]
    + [chr(c) for c in range(0x03AC, 0x03CF)],
    "armenian": [chr(c) for c in range(0x0561, 0x0587)],
    "japanese": [chr(c) for c in range(0x3041, 0x3097)]
    + [chr(c) for c in range(0x30A1, 0x30FB)]
    + list(
        "\u6771\u4eac\u6e0b\u8c37\u90fd\u3005\u30fc\uff08\uff09\uff1f\uff01\uff1a\u3001\u3002\u300c\u300d"
    ),
    "arabic": [chr(c) for c in range(0x0621, 0x063B)]
    + [chr(c) for c in range(0x0641, 0x064B)]
    + list("\u060c\u061f\u061b"),
    "hebrew": [chr(c) for c in range(0x05D0, 0x05EB)] + ["\u05be"],
    "devanagari": [chr(c) for c in range(0x0905, 0x093A)],
}
"""The letters of one script each, with its own punctuation (Japanese writes fullwidth
brackets, question and exclamation marks)."""


def words_of(script: str) -> st.SearchStrategy[str]:
    """Words of ``script``, its letters and punctuation, each word with a letter: a word of
    punctuation alone (U+FF01, a fullwidth !, by itself) is one a person may read as ASCII, and
    is marked."""
    word = st.text(st.sampled_from([*SCRIPTS[script], *".,!?()-:'\""]), min_size=1).filter(
        lambda w: any(unicodedata.category(c)[0] == "L" for c in w)
    )
    return st.lists(word, min_size=1, max_size=6).map(" ".join)


@given(st.sampled_from(sorted(SCRIPTS)).flatmap(words_of))
def test_text_in_one_script_reads_as_written(text: str) -> None:
    assert not any(lookalikes(text))
    assert not any(p.lookalike for p in parts(text))
    assert for_terminal(text) == text


def test_every_digit_that_is_not_ascii_is_marked_in_any_text() -> None:
    for value in ("\u0661\u0660", "\uff11\uff10", "1\u0660", "\u0967\u0966", "\U0001d7cf"):
        assert lookalikes(value) == [not c.isascii() for c in value], value
    # Even in words of their own script: a number is read, and parsed, as ASCII digits.
    assert lookalikes("\u0627\u0644\u0639\u062f\u062f \u0661\u0660") == [False] * 6 + [True] * 2


def test_a_value_is_judged_in_the_words_of_the_sentence_around_it() -> None:
    """``www.{host}.com`` with a host all in Cyrillic letters reads ``www.pay.com``."""
    host = "\u0440\u0430\u0443"  # Cyrillic p, a, y
    assert not any(lookalikes(host))
    assert all(lookalikes(host, before="Visit www.", after=".com now"))
    assert not any(lookalikes(host, before="Visit www. ", after=" .com"))
    pieces = parts(host, leading=False, trailing=False, before="Visit www.", after=".com")
    assert [p.text for p in pieces if p.lookalike] == list(host)


def test_a_terminal_shows_a_lookalike_escaped() -> None:
    assert for_terminal("p\u0430ypal.com") == "p\\u0430ypal.com"
    assert for_terminal("pay\u2024com \uff11\uff10") == "pay\\u2024com \\uff11\\uff10"
    assert (
        for_terminal("\u041c\u043e\u0441\u043a\u0432\u0430")
        == "\u041c\u043e\u0441\u043a\u0432\u0430"
    )
