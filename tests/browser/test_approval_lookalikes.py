"""The approval page in Chromium when a value holds characters that pass for ASCII ones.

A string value is shown exactly, but exactly is not enough when a character is drawn as
an ASCII one: ``paypal.com`` spelled with a Cyrillic a (U+0430) is drawn pixel for
pixel as ``paypal.com``; fullwidth digits (U+FF11 U+FF10), or ``1`` and an
Arabic-Indic zero (U+0660), read as ``10`` (and ``int()`` reads both as 10); a one dot
leader, a division slash or a fullwidth solidus read as ``.`` and ``/`` in a host or a
path. The person would approve one value reading another. Each such character must be
marked, in the sentence and in the table, with its code point, as an invisible
character is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rastrillo.app import App
from tests.browser.approvals import approval_page, write_tool_served
from tests.browser.chromium import ARTIFACTS

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser

SEND = "Send {amount} to {host}?"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with write_tool_served(
        tmp_path,
        "/sends",
        "Send an amount to a host.",
        {"amount": "how much", "host": "where to"},
        SEND,
    ) as served:
        yield served


@pytest.mark.parametrize(
    ("amount", "host", "lookalikes"),
    [
        ("10", "p\u0430ypal.com", "\u0430"),  # a Cyrillic a in a Latin word
        ("10", "\u0440\u0430ypal.com", "\u0440\u0430"),  # a Cyrillic p and a
        ("10", "ex\u03bfmple.com", "\u03bf"),  # Greek omicron
        ("\uff11\uff10", "paypal.com", "\uff11\uff10"),  # fullwidth digits
        ("1\u0660", "paypal.com", "\u0660"),  # an Arabic-Indic zero
        ("10", "paypal\u2024com", "\u2024"),  # one dot leader as "."
        ("10", "paypal.com\u2215evil", "\u2215"),  # division slash as "/"
        ("10", "paypal.com\uff0fevil", "\uff0f"),  # fullwidth solidus as "/"
    ],
)
def test_a_character_that_passes_for_ascii_is_marked_where_the_person_reads_it(
    browser: Browser, app: App, amount: str, host: str, lookalikes: str
) -> None:
    from playwright.sync_api import expect

    page = approval_page(browser, app, {"amount": amount, "host": host})
    marks = [f"{c}U+{ord(c):04X}" for c in lookalikes]
    # Each look-alike is drawn with its code point beside it, in the sentence and the table.
    expect(page.locator(".sentence .lookalike")).to_have_text(marks)
    expect(page.locator("td .lookalike")).to_have_text(marks)
    expect(page.locator("main .hidden")).to_have_count(0)
    page.screenshot(path=ARTIFACTS / f"approval-lookalike-{ord(lookalikes[0]):04x}.png")
    # The value's cell is not drawn as its ASCII twin's would be; drawn bare, it was.
    name, value = ("amount", amount) if lookalikes[0] in amount else ("host", host)
    twin = "".join(ASCII_TWIN.get(c, c) for c in value)
    cell = page.locator("tr", has=page.locator("th code", has_text=name)).locator("td code")
    shown = cell.screenshot()
    bare = cell.evaluate(SHOT, f'"{value}"') and cell.screenshot()
    ascii_shot = cell.evaluate(SHOT, f'"{twin}"') and cell.screenshot()
    assert shown != ascii_shot
    if value == "p\u0430ypal.com":  # the attack: pixel for pixel the ASCII value
        assert bare == ascii_shot
    page.context.close()


ASCII_TWIN = {
    "\u0430": "a",
    "\u0440": "p",
    "\u03bf": "o",
    "\uff11": "1",
    "\uff10": "0",
    "\u0660": "0",
    "\u2024": ".",
    "\u2215": "/",
    "\uff0f": "/",
}
SHOT = "(cell, text) => { cell.textContent = text; return true; }"
"""Put ``text`` bare in a cell, in the page's own font and size."""


@pytest.mark.parametrize(
    ("amount", "host"),
    [
        ("10", "\u041c\u043e\u0441\u043a\u0432\u0430"),  # Moscow, in Russian
        (
            "10",
            "\u6771\u4eac\u90fd\uff08\u6e0b\u8c37\uff09\uff1f",
        ),  # Tokyo (Shibuya)? in Japanese, fullwidth brackets
        ("10", "\u0627\u0644\u0642\u0627\u0647\u0631\u0629"),  # Cairo, in Arabic
        ("10", "\u0391\u03b8\u03ae\u03bd\u03b1"),  # Αθήνα
        ("10", "caf\u00e9 M\u00fcller"),
    ],
)
def test_a_value_in_one_script_reads_as_written(
    browser: Browser, app: App, amount: str, host: str
) -> None:
    from playwright.sync_api import expect

    page = approval_page(browser, app, {"amount": amount, "host": host})
    expect(page.locator(".sentence")).to_have_text(f"Send {amount} to {host}?")
    expect(page.locator("main .lookalike, main .hidden")).to_have_count(0)
    page.context.close()
