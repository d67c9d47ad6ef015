"""docs/agents.md's terminal examples: the command shown prints what the page shows, run in a
copy of the tickets demo's folder (conventions: tests/doc_examples.py)."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from rastrillo.cli.main import main
from tests.doc_examples import doc_block

PAGE = "docs/agents.md"
TICKETS = Path(__file__).parents[2] / "examples" / "tickets"


def session(block: str) -> tuple[list[str], str]:
    """A ```console block's command (after ``$``) and the output it shows."""
    first, _, shown = block.partition("\n")
    return shlex.split(first.removeprefix("$ ")), shown


def test_a_write_from_the_command_line_prints_what_the_page_shows(tmp_path, monkeypatch, capsys):
    app_dir = tmp_path / "tickets"
    shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("*.db*", "__pycache__"))
    monkeypatch.chdir(app_dir)
    argv, shown = session(doc_block(PAGE, "console", "$ rastrillo tools call"))
    assert main(argv[1:]) == 3
    printed = capsys.readouterr().out
    approval = re.search(r"/_rastrillo/approvals/([\w-]+)\n", printed)[1]
    assert printed.replace(approval, "Xk3…") == shown

    argv, shown = session(doc_block(PAGE, "console", "$ rastrillo audit"))
    assert main(argv[1:]) == 0
    [line] = capsys.readouterr().out.splitlines()  # the one call made: the refused write
    assert when_and_cost(line) == when_and_cost(shown.splitlines()[1])


def when_and_cost(line: str) -> str:
    """An audit line with its time and its ``[duration, call id]`` left out."""
    return re.sub(r"^\S+ \S+|\[.*\]$", "…", line)
