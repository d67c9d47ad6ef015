"""The README's action (conventions: tests/doc_examples.py): it runs as it stands, and it
is the tickets demo's action of that path, declaring the same tool. Its ``handle`` is
elided (``...``): the demo's is the one served, and tested."""

from __future__ import annotations

import ast

from tests.doc_examples import ROOT, doc_actions

ACTIONS = ROOT / "examples" / "tickets" / "actions"


def tool_statement(source: str) -> str:
    """The module's ``TOOL = ...`` statement, as its syntax tree."""
    [statement] = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets) == "TOOL"
    ]
    return ast.dump(statement.value)


def test_the_readmes_action_is_the_demos_and_declares_the_same_tool() -> None:
    [(path, block)] = doc_actions("README.md").items()
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert callable(namespace["handle"])
    demo = (ACTIONS / path).read_text(encoding="utf-8")
    assert tool_statement(block) == tool_statement(demo)
