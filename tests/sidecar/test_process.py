"""Real sidecar processes: signals, exit codes, and the lease between two processes.

How fast a process reacts is measured in bench/, not here: these tests wait
on what the processes write (log lines, marks, the lease row) and on their exit,
never on a fixed delay. A process of these needs about a second of CPU to start,
many more seconds of wall time on a loaded machine: every wait is bounded by
:data:`PATIENCE` only so that a hung process fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rastrillo.sidecar import SHUTDOWN_GRACE, SidecarLoop, as_sidecar
from rastrillo.storage import Database
from tests.doc_examples import doc_block
from tests.sidecar.marks import assert_no_overlap, passes, read_marks
from tests.support import until

APP = Path(__file__).with_name("sidecar_app.py")
RUN = shlex.split(doc_block("docs/sidecar.md", "sh", "sidecar run"))
"""The command docs/sidecar.md gives, ``python app.py sidecar run``: run here for this app."""
assert RUN[:2] == ["python", "app.py"], RUN
SECRET = "platform-admin-token-never-logged"
PATIENCE = 120.0
"""Seconds any wait here gives up after: a hung process's bound, no claim on speed."""
LEASE = "SELECT holder FROM rastrillo_sidecar_lease"


class Sidecar:
    """One ``python sidecar_app.py sidecar run`` process, its stderr in a file."""

    def __init__(self, workdir: Path, mode: str, *, ttl: float = 60.0, grace: float = 15.0) -> None:
        self.workdir = workdir
        self.stderr_path = workdir / f"stderr-{mode}-{time.monotonic_ns()}"
        env = {
            **os.environ,
            "SIDECAR_DIR": str(workdir),
            "SIDECAR_MODE": mode,
            "SIDECAR_TTL": str(ttl),
            "SIDECAR_GRACE": str(grace),
            "CARLOS_ADMIN_TOKEN": SECRET,
        }
        with open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, str(APP), *RUN[2:]],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    @property
    def log(self) -> str:
        return self.stderr_path.read_text()

    def marks(self) -> list[tuple[str, float]]:
        return read_marks(self.workdir, self.proc.pid)

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self) -> int:
        """The exit code, once the process has exited."""
        return self.proc.wait(PATIENCE)

    def until(self, check: Callable[[], object]) -> None:
        """Wait until ``check()`` holds, failing at once, with the log, if the process exits."""
        until(lambda: check() or self.proc.poll() is not None, "the check, or an exit", PATIENCE)
        assert check(), f"exited with {self.proc.returncode} first:\n{self.log}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    Database(str(tmp_path / "app.db")).open()  # the tables exist before processes race to them
    return tmp_path


@pytest.fixture
def started(workdir: Path) -> Iterator[Callable[..., Sidecar]]:
    procs: list[Sidecar] = []

    def start(mode: str, **kwargs: float) -> Sidecar:
        procs.append(Sidecar(workdir, mode, **kwargs))
        return procs[-1]

    yield start
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


@pytest.mark.parametrize(
    ("mode", "signum"),
    [("idle", signal.SIGTERM), ("idle", signal.SIGINT), ("failing", signal.SIGTERM)],
)
def test_a_signal_while_sleeping_or_backing_off_exits_0_before_another_pass(
    started: Callable[..., Sidecar], mode: str, signum: int
) -> None:
    sidecar = started(mode)
    sidecar.until(lambda: "sidecar pass pass_id=1" in sidecar.log)
    sidecar.signal(signum)
    assert sidecar.wait() == 0
    assert len(sidecar.marks()) == 1  # no pass started after the signal
    assert "reason=signal exit_code=0" in sidecar.log
    assert SECRET not in sidecar.log


def test_a_sync_pass_sees_the_stop_flag_and_the_process_exits_0_releasing_its_lease(
    started: Callable[..., Sidecar], workdir: Path
) -> None:
    sidecar = started("cooperative")
    sidecar.until(lambda: sidecar.marks())
    assert len(Database(str(workdir / "app.db")).query(LEASE)) == 1
    sidecar.signal(signal.SIGTERM)
    assert sidecar.wait() == 0
    assert [word for word, _ in sidecar.marks()] == ["start", "stopped"]
    assert Database(str(workdir / "app.db")).query(LEASE) == []  # a standby need not wait


def test_an_async_pass_is_cancelled_and_the_process_exits_0(
    started: Callable[..., Sidecar],
) -> None:
    sidecar = started("cancellable")
    sidecar.until(lambda: sidecar.marks())
    sidecar.signal(signal.SIGINT)
    assert sidecar.wait() == 0
    assert [word for word, _ in sidecar.marks()] == ["start", "cancelled"]
    assert "outcome=cancelled" in sidecar.log


def test_a_pass_that_ignores_the_stop_is_abandoned_after_the_grace(
    started: Callable[..., Sidecar],
) -> None:
    sidecar = started("stubborn", grace=0.5)
    sidecar.until(lambda: sidecar.marks())
    sidecar.signal(signal.SIGTERM)
    assert sidecar.wait() != 0
    assert "outcome=abandoned" in sidecar.log
    assert "did not stop within 0.5 s of being asked" in sidecar.log


def test_the_grace_is_15_seconds_unless_configured() -> None:
    assert SHUTDOWN_GRACE == 15.0
    assert as_sidecar(lambda ctx: None).shutdown_grace == 15.0  # type: ignore[union-attr]
    assert SidecarLoop(lambda ctx: None).shutdown_grace == 15.0


def test_a_second_signal_forces_the_exit(started: Callable[..., Sidecar]) -> None:
    sidecar = started("stubborn")
    sidecar.until(lambda: sidecar.marks())
    sidecar.signal(signal.SIGTERM)
    sidecar.until(lambda: "SIGTERM received" in sidecar.log)
    sidecar.signal(signal.SIGINT)
    assert sidecar.wait() != 0
    assert "forcing exit" in sidecar.log


def test_sidecar_run_without_a_sidecar_fails_saying_so_before_it_starts(
    started: Callable[..., Sidecar],
) -> None:
    sidecar = started("none")
    assert sidecar.wait() != 0
    assert "Options.sidecar is not set" in sidecar.log
    assert "Traceback" not in sidecar.log
    assert "sidecar starting" not in sidecar.log


def test_two_processes_never_run_passes_at_once_and_a_standby_takes_over(
    started: Callable[..., Sidecar], workdir: Path
) -> None:
    # A graceful exit waits for the pass and the lease's release, each within the grace,
    # which may be at most a quarter of the ttl: 1 s gives a loaded machine time for both.
    ttl, grace = 4.0, 1.0
    a = started("busy", ttl=ttl, grace=grace)
    a.until(lambda: a.marks())
    b = started("busy", ttl=ttl, grace=grace)
    b.until(lambda: "standby" in b.log)
    seen = len(a.marks())
    a.until(lambda: len(a.marks()) >= seen + 40)  # twenty passes of a's while b stands by
    assert b.marks() == []
    # One line, however many looks at the lease. (Once b holds it, a loaded machine may
    # starve b past its lease, and b stands by again, saying so.)
    assert b.log.count("sidecar: standby") == 1
    a.signal(signal.SIGTERM)
    assert a.wait() == 0
    # A graceful exit gives the lease up: b takes it at its next look, not once it expires.
    holders = [row.holder for row in Database(str(workdir / "app.db")).query(LEASE)]
    assert not any(f":{a.proc.pid}:" in holder for holder in holders), holders
    assert "release" not in a.log  # neither failed nor given up
    b.until(lambda: len(b.marks()) >= 10)
    b.signal(signal.SIGTERM)
    assert b.wait() == 0
    found = passes(workdir, [a.proc.pid, b.proc.pid], {})
    assert {pid for _, _, pid in found} == {a.proc.pid, b.proc.pid}
    assert len(found) > 10
    assert_no_overlap(found)


def test_a_holder_killed_with_sigkill_is_taken_over_once_its_lease_expires(
    started: Callable[..., Sidecar],
) -> None:
    ttl, grace = 2.0, 0.5  # the grace at most a quarter of the ttl, for b's exit
    a = started("busy", ttl=ttl, grace=grace)
    a.until(lambda: a.marks())
    b = started("busy", ttl=ttl, grace=grace)
    b.until(lambda: "standby" in b.log)
    a.proc.kill()
    killed = time.monotonic()
    a.wait()
    b.until(lambda: b.marks())  # how soon after the kill: bench/bench_sidecar_takeover.py
    b.signal(signal.SIGTERM)
    assert b.wait() == 0
    assert_no_overlap(passes(a.workdir, [a.proc.pid, b.proc.pid], {a.proc.pid: killed}))
