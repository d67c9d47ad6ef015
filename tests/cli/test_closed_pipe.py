"""Any command's output piped into a reader that has gone (``| head -1``) ends quietly.

The pipe's read end is closed before the command writes, so its first write meets a
closed pipe every run, as ``head`` leaves it once it has its line.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TICKETS = Path(__file__).resolve().parents[2] / "examples" / "tickets"


@pytest.mark.parametrize(
    "argv",
    [
        ["tools", "schemas", "--format", "openai", "--app", str(TICKETS)],
        ["tools", "list", "--app", str(TICKETS)],
    ],
    ids=["tools schemas", "tools list"],
)
def test_output_into_a_closed_pipe_exits_141_without_a_traceback(argv):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rastrillo.cli.main", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")
