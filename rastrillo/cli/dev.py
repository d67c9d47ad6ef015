"""``rastrillo dev``: serve an app, regenerating and restarting it on every change.

When a change breaks ``generate``, the problems are printed and the last good
build keeps serving until the next change fixes them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from watchfiles import DefaultFilter, watch

from rastrillo.errors import GenerateError
from rastrillo.generate import generate
from rastrillo.loader import app_file
from rastrillo.pages.console import DEV_ENV


class _SourceFilter(DefaultFilter):
    """Ignore what generate and the server write themselves: gen/ and the database."""

    def __call__(self, change: object, path: str) -> bool:
        parts = Path(path).parts
        if "gen" in parts or path.endswith((".db", ".db-wal", ".db-shm", "-journal")):
            return False
        return super().__call__(change, path)  # type: ignore[arg-type]


class DevServer:
    """The app's server process, replaced only by a build that generated cleanly."""

    def __init__(self, app_dir: Path, addr: str) -> None:
        self.app_dir = app_dir
        self.addr = addr
        self.process: subprocess.Popen[bytes] | None = None

    def rebuild(self) -> bool:
        """Regenerate; on success restart the server. Returns whether it restarted."""
        try:
            generate(self.app_dir, processes=1)  # beside the file watcher's thread: no fork
        except GenerateError as exc:
            print(
                f"rastrillo dev: generate failed, still serving the last good build:\n{exc}",
                file=sys.stderr,
                flush=True,
            )
            return False
        self.stop()
        env = dict(os.environ, **{DEV_ENV: "1"})
        self.process = subprocess.Popen(
            [sys.executable, "app.py", "--addr", self.addr], cwd=self.app_dir, env=env
        )
        print(f"rastrillo dev: serving {self.app_dir} on http://{self.addr}", flush=True)
        return True

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def run_dev(app_dir: Path, addr: str) -> int:
    app_dir = app_file(app_dir).parent  # a folder that is no app is refused before serving
    server = DevServer(app_dir, addr)
    # SIGTERM (a process manager, `kill`) ends the watch like Ctrl+C does, and
    # through the finally below, so the server it started never outlives it.
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.rebuild()
    try:
        for _changes in watch(app_dir, watch_filter=_SourceFilter(), stop_event=stop):
            server.rebuild()
    finally:
        server.stop()
    return 0
