"""docs/mcp.md's examples (conventions: tests/doc_examples.py): the app.py that turns
``/mcp`` on, the test that lists its tools with a personal token, and the operator's
``rastrillo agents`` commands, each doing what its comment says, and the call limit it
sets."""

from __future__ import annotations

import shlex

from rastrillo.agents import grants
from rastrillo.cli.main import main
from rastrillo.limits import CallCounter
from rastrillo.loader import load_options
from rastrillo.testing import ManualClock, TestApp
from tests.doc_examples import app_py, doc_block
from tests.support import write_app

PAGE = "docs/mcp.md"
ORDER = """\
import rastrillo

TOOL = rastrillo.Tool(description="One of my orders.", access=rastrillo.ToolRead,
                      args={"id": "the order id"})


def handle(ctx):
    return ctx.json({"id": ctx.params["id"]})
"""


def test_the_testing_example_lists_the_tools_of_the_app_shown(tmp_path):
    options = doc_block(PAGE, "python", "mcp=True,\n")
    app_dir = write_app(
        tmp_path / "app", {"orders/[id].GET.py": ORDER}, files={"app.py": app_py(options)}
    )
    assert load_options(app_dir).mcp is True
    namespace = {"app_dir": app_dir, "tmp_path": tmp_path}
    example = doc_block(PAGE, "python", "TestApp(")
    exec(compile(example, "mcp.md testing example", "exec"), namespace)
    answer = namespace["answer"]
    assert answer.status_code == 200
    [tool] = answer.json()["result"]["tools"]
    assert (tool["name"], tool["annotations"]["readOnlyHint"]) == ("orders_id_get", True)


def operator_commands() -> list[tuple[list[str], str]]:
    """The page's ``rastrillo agents`` lines for an operator: (argv, what its comment says)."""
    block = doc_block(PAGE, "sh", "rastrillo agents list")
    lines = [line.partition("#") for line in block.splitlines()]
    return [(shlex.split(command), said.strip()) for command, _, said in lines]


def test_the_operators_commands_do_what_their_comments_say(tmp_path, monkeypatch, capsys):
    app_dir = write_app(
        tmp_path / "app",
        {"orders/[id].GET.py": ORDER},
        files={"app.py": app_py(doc_block(PAGE, "python", "mcp=True,\n"))},
    )
    monkeypatch.chdir(app_dir)  # `--app .`, as the page writes it
    [live, every, one_user, revoke] = operator_commands()
    clock = ManualClock()
    with TestApp(app_dir, tmp_path, db=str(app_dir / "app.db"), clock=clock) as t:
        gone = grants.create_grant(t.db, user_id="3", agent="old", client="Claude")
        grants.revoke(t.db, gone.id)
        desk, token, _ = grants.personal_token(t.db, user_id="3", agent="desk")
        clock.advance(1)
        later = grants.create_grant(t.db, user_id="4", agent="script", client="Cursor")

        def listed(argv: list[str]) -> list[str]:
            assert main(argv[1:]) == 0, argv
            return [line.split("  ")[0] for line in capsys.readouterr().out.splitlines()]

        assert live[1] == "live grants, newest first: id, user, agent, client, dates"
        assert listed(live[0]) == [later.id, desk.id]
        assert every[1] == "revoked ones too"
        assert set(listed(every[0])) == {later.id, desk.id, gone.id}
        assert (one_user[1], listed(one_user[0])) == ("one user's", [desk.id])

        assert tools_list(t, token).status_code == 200
        assert revoke[1] == "its tokens fail from the next call on"
        argv = [desk.id if word == "GRANT_ID" else word for word in revoke[0]]
        assert main(argv[1:]) == 0
        assert capsys.readouterr().out == f"revoked {desk.id}: agent:desk for user 3\n"
        assert tools_list(t, token).status_code == 401
        assert listed(live[0]) == [later.id]


def tools_list(t: TestApp, token: str):
    return t.client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        },
    )


def test_the_example_in_docs_mcp_sets_the_limit_it_says():
    block = doc_block(PAGE, "python", "mcp_call_limit")
    namespace: dict[str, object] = {}
    exec(compile(block, "docs/mcp.md", "exec"), namespace)
    limit = namespace["OPTIONS"].mcp_call_limit
    # What its comment says: 600 calls at once, then one a second.
    clock = ManualClock()
    counter = CallCounter(limit, clock)
    assert [counter.take("g") is None for _ in range(601)] == [True] * 600 + [False]
    clock.advance(1)
    assert counter.take("g") is None
    assert counter.take("g") is not None
