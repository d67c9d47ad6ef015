"""``rastrillo generate`` on an app folder from someone else (a cloned repository, say):
what it prints about the folder's files reaches the terminal escaped, one line a problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from rastrillo import visible
from rastrillo.cli.main import main


def test_a_hostile_file_name_in_a_problem_is_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file name can hold any character but ``/``: an ESC sequence there would drive
    the terminal, a NEL or line separator would forge another problem's line. The
    problem's message already quoted what it names; its file name must be escaped too."""
    actions = tmp_path / "app" / "actions"
    actions.mkdir(parents=True)
    (tmp_path / "app" / "app.py").write_text("import rastrillo\nOPTIONS = rastrillo.Options()\n")
    hostile = "evil\x1b]0;owned\x07\x85\u2028fake.GET.oops.PUSH.py"
    (actions / hostile).write_text("def handle(ctx): ...\n")
    assert main(["generate", str(tmp_path / "app")]) == 1
    err = capsys.readouterr().err
    lines = err.split("\n")
    assert lines[-1] == ""
    problems = lines[:-2]  # the last line counts them
    assert len(problems) == 1, err
    assert "actions/evil\\x1b]0;owned\\x07\\x85\\u2028fake.GET.oops.PUSH.py: " in problems[0]
    assert not any(visible.is_hidden(c) for line in lines for c in line)


def test_a_folder_without_actions_is_named_with_what_generate_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer runs ``rastrillo generate`` one folder too high, or in a folder whose name
    holds an ESC sequence: the line names the folder looked in, escaped, and what it lacks."""
    folder = tmp_path / "not\x1b[2Jan app"
    folder.mkdir()
    assert main(["generate", str(folder)]) == 1
    shown = visible.for_terminal(str(folder))
    assert capsys.readouterr().err == (
        f"{shown}: no actions/ folder, where an app keeps one file per route "
        "(actions/index.GET.py answers GET /): give the app's folder, or run this in it\n"
        "1 problem; gen/ left as it was\n"
    )
