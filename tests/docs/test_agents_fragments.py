"""docs/agents.md's ```py fragments run, verbatim, in the context the page gives them
(conventions: tests/doc_examples.py), on SQLite and on PostgreSQL.

The page's own app is the tickets demo: a copy of it, with orders 7 and 8 of user 1, is
``OPTIONS``; ``session_id`` is user 1's session. The fragments after the dispatch one
continue its module (``app``, ``Call``, ``dispatch``), as a reader pastes them. The two
provider loops run with the provider's own SDK client, pointed at a fake of its HTTP API
that answers with tool calls and checks what the loop sends back: the requests are the
SDK's real ones, only the network is not.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pydantic
import pytest
from starlette.testclient import TestClient

import rastrillo
from rastrillo.cli.main import main
from rastrillo.loader import load_options
from rastrillo.sessions import cookie_name, create_session
from rastrillo.testing import TestApp
from tests.doc_examples import doc_block, handle_py
from tests.support import write_app

PAGE = "docs/agents.md"
TICKETS = Path(__file__).parents[2] / "examples" / "tickets"
CANCEL_7 = "Cancel order 7? Its tickets go back on sale."


async def run(block: str, namespace: dict[str, Any], name: str) -> None:
    """Run ``block`` in ``namespace`` as a module's top level, ``await`` allowed there."""
    code = compile(block, f"{PAGE} {name}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    done = eval(code, namespace)
    if inspect.iscoroutine(done):
        await done


def tickets_copy(folder: Path) -> Path:
    """The tickets demo with one action more: the page's own approval page (the
    ``consent.get``/``decide`` fragment as a handle's body), generated."""
    app_dir = folder / "tickets"
    shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("*.db*", "__pycache__"))
    page = doc_block(PAGE, "py", "from rastrillo.tools import consent")
    body = f"approval_id = ctx.params['approval_id']\n{page}"
    decide = app_dir / "actions" / "my-approvals" / "[approval_id].POST.py"
    decide.parent.mkdir(parents=True)
    decide.write_text(handle_py(body, "ctx.json({'sentence': record.sentence})"))
    assert main(["generate", str(app_dir)]) == 0
    return app_dir


def add_orders(db: Any) -> None:
    """Orders 7 and 8, user 1's, as the page's calls name them."""
    for order_id in (7, 8):
        db.execute(
            "INSERT INTO orders (id, user_id, event_id, quantity, status, created_at)"
            " VALUES (:id, 1, 1, 2, 'paid', '2026-06-01T12:00:00+00:00')",
            id=order_id,
        )


def fake_api(answer: Callable[[dict[str, Any]], dict[str, Any]]) -> httpx2.AsyncClient:
    """An HTTP client (of the SDKs' own HTTP package) whose every request the function
    ``answer`` answers, JSON in and out."""

    def respond(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=answer(json.loads(request.content)))

    return httpx2.AsyncClient(transport=httpx2.MockTransport(respond))


def anthropic_api(sent: list[dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        sent.append(body)
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "orders_id_get",
                    "input": {"id": "7"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "orders_id_cancel_post",
                    "input": {"id": "7"},
                },
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    return answer


def openai_api(sent: list[dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        sent.append(body)
        call = {"name": "orders_id_get", "arguments": json.dumps({"id": "8"})}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
        }
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        }

    return answer


async def the_page(app_dir: Path, db_url: str, tmp_path: Path) -> None:
    options = dataclasses.replace(load_options(app_dir), db=db_url)
    started = rastrillo.handler(options)
    add_orders(started.db)
    session_id = create_session(started.db, "1")
    started.db.dispose()
    ns: dict[str, Any] = {"OPTIONS": options, "session_id": session_id}

    # Dispatch: the read runs as user 1.
    await run(doc_block(PAGE, "py", "dispatch_sync\n\napp = rastrillo.handler"), ns, "Dispatch")
    app = ns["app"]
    try:
        await the_fragments(ns, app, session_id, tmp_path)
    finally:
        app.db.dispose()


async def the_fragments(ns: dict[str, Any], app: Any, session_id: str, tmp_path: Path) -> None:
    # The providers' SDKs take seconds to import, and every pytest worker imports this
    # module to collect it; only the one that runs the test imports them.
    import anthropic
    import openai

    result = ns["result"]
    assert (result.status, result.headers["content-type"]) == (200, "application/json")
    assert result.json()["order"]["id"] == 7

    # With the Anthropic SDK: a reply of two tool calls, the read run and the write held.
    await run(doc_block(PAGE, "py", "import json\n\nimport anthropic"), ns, "Anthropic")
    sent: list[dict[str, Any]] = []
    ns["client"] = anthropic.AsyncAnthropic(api_key="-", http_client=fake_api(anthropic_api(sent)))
    messages = [{"role": "user", "content": "Cancel order 7, I can't go."}]
    messages = await ns["ask"](app, session_id, messages)
    assert sent[0]["tools"] == json.loads(json.dumps(rastrillo.tools.schemas(app.tools)))
    read, write = messages[-1]["content"]
    assert (read["tool_use_id"], read["is_error"]) == ("toolu_1", False)
    assert json.loads(read["content"])["order"]["id"] == 7
    assert (write["tool_use_id"], write["is_error"]) == ("toolu_2", True)
    assert CANCEL_7 in write["content"]
    await ns["ask"](app, session_id, messages)  # the next turn sends the results back
    assert [m["role"] for m in sent[1]["messages"]] == ["user", "assistant", "user"]
    assert sent[1]["messages"][2]["content"][1]["tool_use_id"] == "toolu_2"
    pydantic.TypeAdapter(list[anthropic.types.MessageParam]).validate_python(sent[1]["messages"])

    # With the OpenAI SDK (Chat Completions).
    await run(doc_block(PAGE, "py", "import json\n\nimport openai"), ns, "OpenAI")
    sent = []
    ns["client"] = openai.AsyncOpenAI(api_key="-", http_client=fake_api(openai_api(sent)))
    messages = await ns["ask"](app, session_id, [{"role": "user", "content": "Order 8?"}])
    assert messages[-1]["tool_call_id"] == "call_1"
    assert messages[-1]["content"].startswith("HTTP 200\n")
    assert json.loads(messages[-1]["content"].partition("\n")[2])["order"]["id"] == 8
    await ns["ask"](app, session_id, messages)
    assert [m["role"] for m in sent[1]["messages"]] == ["user", "assistant", "tool"]
    assert sent[0]["tools"][0]["function"]["strict"] is True

    # Consent: the write waits for user 1, whose own page approves it.
    await run(doc_block(PAGE, "py", "from rastrillo.tools import ConfirmRequired"), ns, "Consent")
    pending = ns["pending"]
    assert pending.sentence == CANCEL_7
    assert pending.url == f"{app.origin}/_rastrillo/approvals/{pending.approval_id}"
    browser = TestClient(app, base_url=app.origin, headers={"Origin": app.origin})
    browser.cookies.set(cookie_name(app.origin), session_id)
    decided = await asyncio.to_thread(browser.post, f"/my-approvals/{pending.approval_id}")
    assert (decided.status_code, decided.json()) == (200, {"sentence": CANCEL_7})
    await run(doc_block(PAGE, "py", "import dataclasses\n\nresult = await"), ns, "the call again")
    with pytest.raises(rastrillo.tools.ApprovalInvalid):  # once
        await run(
            doc_block(PAGE, "py", "import dataclasses\n\nresult = await"), ns, "the call again"
        )

    # TooManyApprovals: 20 proposals of the agent already wait for user 1.
    for order_id in range(100, 120):
        with pytest.raises(rastrillo.tools.ConfirmRequired):
            await ns["dispatch"](app, dataclasses.replace(ns["cancel"], args={"id": str(order_id)}))
    await run(
        doc_block(PAGE, "py", "from rastrillo.tools import TooManyApprovals"),
        ns,
        "TooManyApprovals",
    )
    assert ns["waiting"] == 20


def test_the_fragments_run_as_the_page_shows(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):  # as a reader's shell has them
        monkeypatch.setenv(key, "-")
    app_dir = tickets_copy(tmp_path)
    asyncio.run(the_page(app_dir, db_url, tmp_path))


def test_the_testing_example_runs_on_the_tickets_demo(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"APP_DIR": TICKETS}
    asyncio.run(
        run(doc_block(PAGE, "py", "from rastrillo.testing import TestApp"), namespace, "Testing")
    )
    namespace["test_an_agent_cancels_an_order_once_approved"](tmp_path)


EVENT_HTML = "{{ error }}"
BUY_TOOL = """\
import rastrillo
from rastrillo import sessions

TOOL = rastrillo.Tool(
    description="Buy tickets for an event.",
    access=rastrillo.ToolWrite,
    args={
        "id": "the event id",
        "quantity": rastrillo.Arg("how many tickets", type=int, minimum=1, maximum=10),
    },
    confirm="Buy {quantity} tickets for event {id}?",
)


"""


def test_the_handle_reading_ctx_args_answers_a_bad_quantity_with_the_page(
    db_url: str, tmp_path: Path
) -> None:
    """The fragment's last line, ``...``, is the rest of the handler: here, the quantity."""
    handle = doc_block(PAGE, "py", "@sessions.require").replace(
        "    ...\n", "    return ctx.json(quantity)\n"
    )
    app_dir = write_app(
        tmp_path / "app",
        {"events/[id]/buy.POST.py": BUY_TOOL + handle},
        files={"templates/event.html": EVENT_HTML},
    )
    app = TestApp(app_dir, tmp_path, db=db_url)
    try:
        app.sign_in(app.client, 1)
        bought = app.client.post("/events/1/buy", data={"quantity": "2"})
        assert (bought.status_code, bought.json()) == (200, 2)
        refused = app.client.post("/events/1/buy", data={"quantity": "ten"})
        assert refused.status_code == 400
        assert refused.text == "must be an integer from 1 to 10, not the string &#39;ten&#39;"
        signed_out = app.browser().post("/events/1/buy", data={"quantity": "2"})
        assert signed_out.status_code == 403  # @sessions.require: no session, no purchase
    finally:
        app.db.dispose()
