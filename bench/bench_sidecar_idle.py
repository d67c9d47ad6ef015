"""CPU of an idle sidecar: nothing scheduled, so it sleeps the one-minute floor.

Goal: under 1% of one core over a minute. Starts a real ``sidecar run``
process of a tiny app whose pass returns None, waits for its first pass,
then reads the process's user + system CPU time from ``/proc/<pid>/stat``
before and after the measured window (Linux only). The window includes
the lease renewals (every 20 s at the default 60 s lease) and one pass.

    python bench/bench_sidecar_idle.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_PERCENT = 1.0

APP = """
import sys
import rastrillo

OPTIONS = rastrillo.Options(db="idle.db", sidecar=lambda ctx: None)
sys.exit(rastrillo.run(OPTIONS, ["sidecar", "run"]))
"""


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "app.py").write_text(APP)
        log = Path(tmp) / "sidecar.log"
        with open(log, "w") as stderr:
            proc = subprocess.Popen([sys.executable, "app.py"], cwd=tmp, stderr=stderr)
        try:
            deadline = time.monotonic() + 30
            while "outcome=ok" not in log.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.stderr.write(log.read_text())
                    return 1
                time.sleep(0.05)
            before, started = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(args.seconds)
            used, elapsed = cpu_seconds(proc.pid) - before, time.monotonic() - started
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
        passes = log.read_text().count("sidecar pass ")
    percent = 100 * used / elapsed
    print(f"idle sidecar: {used:.3f} s CPU over {elapsed:.1f} s = {percent:.3f}% of one core")
    met = percent < GOAL_PERCENT
    print(f"passes in the log: {passes}; goal < {GOAL_PERCENT}%: {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
