"""The passes of real sidecar processes, read back from the marks they leave, for the tests
that run them (tests/sidecar/test_process.py, tests/test_sidecar_hosts.py).

A process appends ``<word> <time.monotonic()>`` to ``marks-<pid>`` in a folder: ``start``
as a pass begins, ``end`` as it ends. Stamps are compared across processes: on Linux the
monotonic clock is one clock for the whole machine, and no step of the wall clock (NTP, an
operator) moves it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import pairwise
from pathlib import Path


def read_marks(folder: Path, pid: int) -> list[tuple[str, float]]:
    """The marks process ``pid`` has written so far, in order."""
    path = folder / f"marks-{pid}"
    if not path.exists():
        return []
    lines = path.read_text().split("\n")[:-1]  # a line still being written is not one
    return [(word, float(at)) for word, at in (line.split() for line in lines)]


def passes(
    folder: Path, pids: Iterable[int], killed_at: Mapping[int, float]
) -> list[tuple[float, float, int]]:
    """Every pass of the processes ``pids`` as (start, end, pid), by start. A pass with no
    end ends at its process's kill, from ``killed_at``: one that has neither is an error."""
    found = []
    for pid in pids:
        start = None
        for word, at in read_marks(folder, pid):
            if word == "start":
                start = at
            elif word == "end" and start is not None:
                found.append((start, at, pid))
                start = None
        if start is not None:
            found.append((start, killed_at[pid], pid))
    return sorted(found)


def assert_no_overlap(found: list[tuple[float, float, int]]) -> None:
    """No pass of ``found`` (by start) began before the one before it ended."""
    for (_, end, pid), (start, _, next_pid) in pairwise(found):
        assert start >= end, f"pass of {next_pid} began before a pass of {pid} ended"
