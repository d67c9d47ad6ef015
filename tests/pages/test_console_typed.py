"""The console's form for typed args: the inputs it shows and the call it makes of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rastrillo.pages.console import CONSOLE_PATH
from rastrillo.testing import TestApp
from tests.support import write_app

ACTION = """\
import rastrillo

TOOL = rastrillo.Tool(
    description="Find things.",
    args={
        "n": rastrillo.Arg("how many", type=int, minimum=1, maximum=10),
        "price": rastrillo.Arg("at most", type=float, required=False),
        "sure": rastrillo.Arg("really", type=bool),
        "gift": rastrillo.Arg("wrapped", type=bool, required=False),
        "seat": rastrillo.Arg("where", choices=["aisle", "window"], required=False),
        "note": rastrillo.Arg("a note", required=False),
        "q": "what",
    },
)


def handle(ctx):
    return ctx.json({"args": dict(ctx.args), "query": ctx.request.url.query})
"""


@pytest.fixture
def app(tmp_path: Path) -> TestApp:
    root = write_app(tmp_path / "app", {"things.GET.py": ACTION})
    test_app = TestApp(root, tmp_path, console=True)
    test_app.sign_in(test_app.client, 1)
    return test_app


def field(page: str, name: str) -> str:
    found = re.search(rf'<(input|select)[^>]*name="arg\.{name}"[^>]*>', page)
    assert found is not None, name
    return found[0]


def test_each_arg_gets_the_input_of_its_type(app: TestApp) -> None:
    page = app.client.get(CONSOLE_PATH).text
    assert 'type="number" step="1"' in field(page, "n")
    assert 'type="number" step="any"' in field(page, "price")
    assert 'type="checkbox"' in field(page, "sure") and 'value="true"' in field(page, "sure")
    assert 'type="checkbox"' in field(page, "gift")
    assert field(page, "seat").startswith("<select")
    assert '<option value="">(leave out)</option>' in page
    assert '<option value="aisle">aisle</option>' in page
    assert "type=" not in field(page, "note") and "type=" not in field(page, "q")
    assert "(optional)" in page


def call(app: TestApp, **fields: str) -> dict[str, object]:
    data = {"tool": "things_get", "agent": "console", "format": "anthropic"}
    data.update({f"arg.{k}": v for k, v in fields.items()})
    page = app.client.post(CONSOLE_PATH, data=data).text
    body = re.search(r'<pre class="body">(.*?)</pre>', page, re.S)
    assert body is not None, re.search(r'<p class="refused">(.*?)</p>', page, re.S)
    return json.loads(body[1].replace("&#34;", '"').replace("&#39;", "'").replace("&amp;", "&"))


def test_the_form_becomes_a_typed_call_and_empty_optional_fields_are_left_out(
    app: TestApp,
) -> None:
    answer = call(app, n="3", price="", seat="", note="", q="x")
    assert answer == {
        "args": {
            "n": 3,
            "price": None,
            "sure": False,
            "gift": None,
            "seat": None,
            "note": None,
            "q": "x",
        },
        "query": "n=3&q=x&sure=false",
    }
    answer = call(app, n="3", price="2.5", sure="true", gift="true", seat="aisle", q="")
    assert answer["args"] == {
        "n": 3,
        "price": 2.5,
        "sure": True,
        "gift": True,
        "seat": "aisle",
        "note": None,
        "q": "",
    }


def test_text_that_is_not_a_number_is_refused_as_a_model_would_be(app: TestApp) -> None:
    page = app.client.post(
        CONSOLE_PATH, data={"tool": "things_get", "arg.n": "3 ", "arg.q": "x"}
    ).text
    assert "Refused: tool &#39;things_get&#39;, arg &#39;n&#39;: must be an integer" in page
    page = app.client.post(
        CONSOLE_PATH, data={"tool": "things_get", "arg.n": "11", "arg.q": "x"}
    ).text
    assert "from 1 to 10, not the integer 11" in page
