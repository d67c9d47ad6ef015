"""The Python examples in docs/agents.md run, in order, as a reader would run them
(the conventions are tests/doc_examples.py's)."""

from __future__ import annotations

from tests.doc_examples import doc_blocks


def test_examples_run(capsys) -> None:
    blocks = doc_blocks("docs/agents.md", "python")
    assert len(blocks) >= 6
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"agents.md example {number}", "exec"), namespace)
    assert '"name": "orders_id_cancel_post"' in capsys.readouterr().out
