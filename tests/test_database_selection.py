"""One database selection for every process of an app: ``--db``, else ``RASTRILLO_DB``,
else ``Options.db``; serving, ``sidecar run`` and the command line alike."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rastrillo.cli.main import main
from tests.support import until, write_app

ACTIONS = {
    "ticks/index.GET.py": """
        def handle(ctx):
            return ctx.json([r.source for r in ctx.db.query("SELECT source FROM ticks")])
    """,
}
FILES = {"migrations/0001_ticks.sql": "CREATE TABLE IF NOT EXISTS ticks (source TEXT);"}
PRELUDE = """
def tick(ctx):
    ctx.db.execute("INSERT INTO ticks (source) VALUES ('sidecar')")
    return None
"""


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    return write_app(tmp_path / "app", ACTIONS, extra="sidecar=tick,", files=FILES, prelude=PRELUDE)


def ticks(db: Path) -> list[str]:
    if not db.exists():
        return []
    try:
        return [r[0] for r in sqlite3.connect(db).execute("SELECT source FROM ticks")]
    except sqlite3.OperationalError:  # not migrated yet
        return []


def run_sidecar_until_it_ticks(app_dir: Path, db: Path, *flags: str, env: dict[str, str]) -> str:
    process = subprocess.Popen(
        [sys.executable, str(app_dir / "app.py"), "sidecar", "run", *flags],
        cwd=app_dir,
        env={**os.environ, **env},
        stderr=subprocess.PIPE,
        text=True,
    )

    def ticked() -> bool:
        assert process.poll() is None, process.communicate()[1]
        return bool(ticks(db))

    try:
        until(ticked, f"the sidecar to run a pass on {db}", every=0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    return stderr


def test_sidecar_run_takes_the_same_db_flag_as_serve(app_dir: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "chosen.db"
    run_sidecar_until_it_ticks(app_dir, chosen, "--db", str(chosen), env={})
    assert ticks(chosen) == ["sidecar"]
    assert not (app_dir / "app.db").exists()


def test_the_environment_selects_the_database_for_serve_sidecar_and_cli(
    app_dir: Path, tmp_path: Path, serve, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    platform = tmp_path / "platform.db"
    monkeypatch.setenv("RASTRILLO_DB", str(platform))
    run_sidecar_until_it_ticks(app_dir, platform, env={})
    server = serve(app_dir)
    with server.client() as c:
        assert c.get("/ticks").json() == ["sidecar"]
    assert server.stop() == 0
    assert main(["audit", "--app", str(app_dir)]) == 0
    assert "no tool calls yet" in capsys.readouterr().out
    assert not (app_dir / "app.db").exists()


def test_the_flag_wins_over_the_environment(
    app_dir: Path, tmp_path: Path, serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RASTRILLO_DB", str(tmp_path / "platform.db"))
    flagged = tmp_path / "flagged.db"
    sqlite3.connect(flagged).executescript(
        "CREATE TABLE ticks (source TEXT); INSERT INTO ticks VALUES ('flag');"
    )
    server = serve(app_dir, "--db", str(flagged))
    with server.client() as c:
        assert c.get("/ticks").json() == ["flag"]
    assert server.stop() == 0
    assert not (tmp_path / "platform.db").exists()


def test_sidecar_run_refuses_other_flags(app_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(app_dir / "app.py"), "sidecar", "run", "--addr", "x:1"],
        cwd=app_dir,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "sidecar run [--db PATH]" in done.stderr


@pytest.mark.parametrize(
    ("url", "error"),
    [
        (
            "mysql://app:s3cret@db/app",
            "error: mysql://app:***@db/app: Rastrillo runs on SQLite and PostgreSQL only\n",
        ),
        (
            "postgresql://app:s3cret@db/app",
            "error: no driver for postgresql://app:***@db/app (No "
            "module named 'psycopg2'): install psycopg and write the URL as "
            "postgresql+psycopg://user:password@host/database\n",
        ),
        (
            "postgres://app:s3cret@db/app",
            "error: postgres://app:***@db/app: SQLAlchemy reads no postgres:// URL; "
            "write postgresql+psycopg://app:***@db/app\n",
        ),
        *(
            (
                url,
                f"error: {url}: each connection would open its own empty database in memory; "
                "give a SQLite file (app.db) or a PostgreSQL URL\n",
            )
            for url in ("sqlite:///:memory:", "sqlite://", "sqlite:///")
        ),
        (
            "://app",
            "error: cannot read the database URL: Could not parse SQLAlchemy URL from "
            "given URL string\n",
        ),
    ],
)
def test_a_database_url_rastrillo_cannot_use_is_one_line_with_no_password(
    app_dir: Path, url: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from rastrillo import run
    from rastrillo.loader import load_options

    assert run(load_options(app_dir), ["--db", url]) == 1
    assert capsys.readouterr().err == error
    assert main(["audit", "--app", str(app_dir), "--db", url]) == 1
    assert capsys.readouterr().err == error


@pytest.mark.parametrize("command", [[], ["sidecar", "run"]], ids=["serve", "sidecar run"])
def test_a_database_that_does_not_answer_is_one_line_not_a_traceback(
    app_dir: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from rastrillo import run
    from rastrillo.loader import load_options

    # Nothing listens on port 1 of the loopback: the connection is refused at once.
    argv = [*command, "--db", "postgresql+psycopg://nobody@127.0.0.1:1/app"]
    assert run(load_options(app_dir), argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot start: the database does not answer (")
    assert "Connection refused" in err
    assert "Traceback" not in err
