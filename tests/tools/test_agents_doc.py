"""The Python examples in docs/agents.md run, in order, as a reader would run them."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "agents.md"


def test_examples_run(capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 6
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"{DOC.name} example {number}", "exec"), namespace)
    assert '"name": "orders_id_cancel_post"' in capsys.readouterr().out
