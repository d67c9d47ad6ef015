"""The approval page in Chromium for typed values: what the person reads is what runs.

A model writes numbers as it likes, ``1e2``, ``-0``, ``2.50``, ``-0.0``; JSON reads them
as numbers, and dispatch keeps a ``float`` arg's as a float and an ``int`` arg's as an
integer (docs/agents.md, "Dispatch: JSON values, no coercion"). The page shows each value
as it will reach the handler (``100.0``, ``0``, ``2.5``, ``-0.0``), with its kind, and text
in quotes: ``"2.50"``, the text, is not ``2.5``, the number. Approved, the handler gets
exactly the values shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import rastrillo
from rastrillo.app import App
from rastrillo.tools import Call, dispatch_sync
from tests.browser.approvals import approval_page, write_tool_served

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser

RAN: list[dict[str, object]] = []


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    RAN.clear()
    args = {
        "price": rastrillo.Arg("the price", type=float),
        "count": rastrillo.Arg("how many", type=int),
        "code": rastrillo.Arg("a code", required=False),
    }
    with write_tool_served(
        tmp_path, "/prices", "Set a price.", args, "Set {count} at {price}?", RAN
    ) as served:
        yield served


@pytest.mark.parametrize(
    ("sent", "sentence", "rows"),
    [
        (
            '{"price": 1e2, "count": -0, "code": "1e2"}',
            "Set 0 at 100.0?",
            ["price number 100.0", "count whole number 0", 'code text "1e2"'],
        ),
        (
            '{"price": 2.50, "count": 100000000000000000000, "code": "2.50"}',
            "Set 100000000000000000000 at 2.5?",
            ["price number 2.5", "count whole number 100000000000000000000", 'code text "2.50"'],
        ),
        (
            '{"price": -0.0, "count": 3, "code": "-0"}',
            "Set 3 at -0.0?",
            ["price number -0.0", "count whole number 3", 'code text "-0"'],
        ),
        (
            '{"price": 12345678901234567890, "count": 1}',
            "Set 1 at 1.2345678901234567e+19?",
            ["price number 1.2345678901234567e+19", "count whole number 1"],
        ),
    ],
    ids=["1e2", "2.50", "-0.0", "long-int-as-float"],
)
def test_the_person_reads_each_typed_value_as_it_runs(
    browser: Browser, app: App, sent: str, sentence: str, rows: list[str]
) -> None:
    from playwright.sync_api import expect

    args = json.loads(sent)  # as the model wrote them: what any JSON parser reads
    page = approval_page(browser, app, args)
    expect(page.locator(".sentence")).to_have_text(sentence)
    read = [" ".join(row.split()) for row in page.locator("tbody tr").all_inner_texts()]
    assert sorted(read) == sorted(rows)
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_text("Approved")).to_be_visible()
    approval = page.url.rstrip("/").rpartition("/")[2]
    page.context.close()
    [tool] = app.tools
    session = rastrillo.sessions.create_session(app.db, "1")
    call = Call(
        tool=tool.id,
        args=args,
        actor=rastrillo.Actor.agent("helper"),
        session=session,
        approval=approval,
    )
    with ThreadPoolExecutor(1) as thread:  # Playwright holds an event loop in this one
        assert thread.submit(dispatch_sync, app, call).result().status == 200
    [ran] = RAN
    shown = {row.split()[0]: row.rpartition(" ")[2] for row in rows}
    assert {k: v for k, v in ran.items() if v is not None}.keys() == shown.keys()
    for name, value in shown.items():
        assert (json.dumps(ran[name]) if isinstance(ran[name], str) else repr(ran[name])) == value
