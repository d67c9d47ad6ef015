"""The approval page's sentence in Chromium when a value holds right-to-left letters.

No bidirectional control reaches a value (dispatch refuses them), but a Hebrew or an
Arabic letter is ordinary text, and the Unicode bidirectional algorithm lets it carry
the neutral characters and the numbers after it into its right-to-left run: put
straight into the sentence, the value ``א`` made "Move א → 5?" read "Move 5 → א?",
the other value and the arrow moved. Each value must stay within its own place.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rastrillo.app import App
from tests.browser.approvals import approval_page, write_tool_served

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser

MOVE = "Move {box} → {shelf}?"

VISUAL_ORDER = """(element) => {
  const chars = [];
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      chars.push([range.getBoundingClientRect().left, node.data[i]]);
    }
  }
  chars.sort((a, b) => a[0] - b[0]);
  return chars.map((c) => c[1]).join("");
}"""
"""The element's characters as they stand on the screen, left to right (one line)."""


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with write_tool_served(
        tmp_path, "/moves", "Move a box to a shelf.", {"box": "the box", "shelf": "the shelf"}, MOVE
    ) as served:
        yield served


@pytest.mark.parametrize(
    ("box", "shelf"),
    [("\u05d0", "5"), ("\u0627", "5"), ("12 \u05d0", "34"), ("5 \u05d0", "6"), ("a", "\u05d0")],
)
def test_a_right_to_left_value_moves_nothing_else_in_the_sentence(
    browser: Browser, app: App, box: str, shelf: str
) -> None:
    page = approval_page(browser, app, {"box": box, "shelf": shelf})
    sentence = page.locator(".sentence")
    shown = sentence.evaluate(VISUAL_ORDER)
    # Around each value, the sentence stands as written: "Move ", the box, " → ", the
    # shelf, "?" (a value's own letters may run right to left within its place).
    start, arrow, end = "Move ", " → ", "?"
    assert shown.startswith(start) and shown.endswith(end)
    middle = shown[len(start) : -len(end)]
    assert arrow in middle
    shown_box, _, shown_shelf = middle.partition(arrow)
    # Each value stands as it would alone on a left-to-right line, the page's direction.
    page.evaluate(
        "(text) => { const p = document.createElement('p'); p.id = 'alone';"
        " p.textContent = text; document.body.append(p); }",
        box,
    )
    alone = page.locator("#alone").evaluate(VISUAL_ORDER)
    assert shown_box == alone and sorted(shown_shelf) == sorted(shelf)
    page.context.close()
