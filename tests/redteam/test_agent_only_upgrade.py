"""A database made before sessions could be agent-only, opened by this version
(docs/sessions.md, "Sessions made for an agent"): what it already holds must not stay a
road around the rule, and a shape this version cannot use is refused at start, in one
clear error, never a traceback and never lost rows.

The grant sessions an earlier version made are in the database when it is upgraded. Their
ids may have leaked already (before 8115627 a dispatched call carried the session in its
``Cookie`` header, which a handler could return to the model): the upgrade must make them
the agent's alone, as it makes every grant session from then on. On SQLite and PostgreSQL,
served by uvicorn on loopback.
"""

from __future__ import annotations

import dataclasses
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from rastrillo.agents.grants import Grant
from rastrillo.app import App
from rastrillo.errors import ConfigError
from rastrillo.loader import load_options
from rastrillo.sessions import create_session
from rastrillo.storage import Database
from rastrillo.testing import live_server
from rastrillo.tools import Call, dispatch_sync
from tests.redteam.test_agent_only_session import FILES, PAGES, browser, leaked
from tests.support import write_app


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    return write_app(tmp_path / "app", PAGES, extra="mcp=True,", files=FILES)


def made_before_the_column(app_dir: Path, db_url: str) -> tuple[App, str, Grant, str]:
    """An app whose database is as an earlier version left it: a person's session and a
    grant's session, both plain rows (no ``agent_only``), the grant's linked to it. Returns
    the app (closed), the person's session, the grant and the grant's session."""
    app = App(dataclasses.replace(load_options(app_dir), db=db_url)).start()
    person = create_session(app.db, "3")
    grant, agents = leaked(app)
    app.db.execute("ALTER TABLE rastrillo_sessions DROP COLUMN agent_only")
    app.db.dispose()
    return app, person, grant, agents


def test_a_grants_session_made_before_the_upgrade_is_the_agents_alone_after_it(
    app_dir: Path, db_url: str
) -> None:
    old, person, grant, agents = made_before_the_column(app_dir, db_url)
    with live_server(old.options) as upgraded:
        with browser(upgraded, None) as stranger, browser(upgraded, agents) as program:
            expected = stranger.get("/account")
            answered = program.get("/account")
            posted = program.post("/notes", data={"body": "the agent's own"})
        assert (answered.status_code, answered.headers.get("location")) == (
            expected.status_code,
            expected.headers.get("location"),
        )
        assert "account of" not in answered.text
        assert (posted.status_code, posted.text) == (403, "Sign in first.")
        # The person's session made before the upgrade is still theirs; the grant's still
        # acts in the grant's calls.
        with browser(upgraded, person) as owner:
            assert owner.get("/account").text == "account of 3"
        read = dispatch_sync(upgraded, Call(tool="notes_get", actor=grant.actor, session=agents))
        assert read.json()["user"] == "3"
    assert upgraded.db.query_one("SELECT COUNT(*) AS n FROM notes").n == 0


def test_hosts_starting_at_once_on_an_older_database_upgrade_it_once(
    app_dir: Path, db_url: str
) -> None:
    """Two processes started together on the older database (a deploy's web process and
    sidecar, say): both start, the column is added once, no row is lost."""
    made_before_the_column(app_dir, db_url)
    script = (
        "import dataclasses, sys\n"
        "from pathlib import Path\n"
        "from rastrillo.app import App\n"
        "from rastrillo.loader import load_options\n"
        "app = App(dataclasses.replace(load_options(Path(sys.argv[1])), db=sys.argv[2]))\n"
        "print('built', flush=True)\n"
        "sys.stdin.readline()\n"
        "app.start().db.dispose()\n"
        "print('started')\n"
    )
    hosts = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(app_dir), db_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for host in hosts:  # both built (the imports done): then both start at once
        assert host.stdout is not None and host.stdout.readline() == "built\n"
    for host in hosts:
        assert host.stdin is not None
        host.stdin.write("go\n")
        host.stdin.flush()
    answers = [host.communicate(timeout=60) for host in hosts]
    assert [(host.returncode, *answer) for host, answer in zip(hosts, answers, strict=True)] == [
        (0, "started\n", "")
    ] * 2
    db = Database(db_url)
    try:
        rows = db.query("SELECT agent_only FROM rastrillo_sessions ORDER BY agent_only")
        assert [bool(row.agent_only) for row in rows] == [False, True]
    finally:
        db.dispose()


def _start(app_dir: Path, db_url: str) -> None:
    App(dataclasses.replace(load_options(app_dir), db=db_url)).start().db.dispose()


def _run(db_url: str, *statements: str) -> None:
    """The app's own changes to its database, made outside the framework."""
    db = Database(db_url)
    try:
        for statement in statements:
            db.execute(statement)
    finally:
        db.dispose()


def _rows(db_url: str, table: str) -> int:
    db = Database(db_url)
    try:
        return int(db.query_one(f"SELECT COUNT(*) AS n FROM {table}").n)
    finally:
        db.dispose()


def test_a_view_in_the_place_of_a_framework_table_is_refused_by_name(
    app_dir: Path, db_url: str
) -> None:
    """An app that kept its old sessions table under another name and left a view in its
    place: refused at start as a ConfigError naming it, not the database's own error (a
    traceback for whoever starts the app), and the rows behind the view kept."""
    made_before_the_column(app_dir, db_url)
    _run(
        db_url,
        "ALTER TABLE rastrillo_sessions RENAME TO old_sessions",
        "CREATE VIEW rastrillo_sessions AS SELECT * FROM old_sessions",
    )
    with pytest.raises(ConfigError, match="rastrillo_sessions is a view"):
        _start(app_dir, db_url)
    assert _rows(db_url, "old_sessions") == 2


@pytest.mark.parametrize("kind", ["TEXT", "INTEGER"])
def test_a_column_of_the_apps_own_under_the_framework_s_name_is_refused(
    app_dir: Path, db_url: str, kind: str
) -> None:
    """``agent_only`` added to the sessions table by the app itself, of another type: this
    version cannot tell an agent's session from a person's by it (on SQLite every value the
    app stored reads true, so everyone's session would be taken for an agent's; on
    PostgreSQL a grant's session could not be written, a failure at the first MCP call).
    Refused at start, naming the table and the column; the app's values kept."""
    made_before_the_column(app_dir, db_url)
    _run(db_url, f"ALTER TABLE rastrillo_sessions ADD COLUMN agent_only {kind} DEFAULT '0'")
    with pytest.raises(ConfigError, match="rastrillo_sessions has no usable column agent_only"):
        _start(app_dir, db_url)
    assert _rows(db_url, "rastrillo_sessions") == 2


@pytest.mark.postgres
def test_a_role_that_may_not_alter_the_table_is_told_so_in_one_line(
    app_dir: Path, pg_url: str
) -> None:
    """Production often runs the app as a role that reads and writes rows but owns no
    table. Started by it, the upgrade cannot add the column: ``python app.py`` says so in
    one line and what to do (start this version once as the tables' owner), not the
    driver's traceback; nothing is changed, and the owner's start then upgrades it."""
    made_before_the_column(app_dir, pg_url)
    role = f"app_{secrets.token_hex(4)}"
    owner = Database(pg_url)
    owner.execute(f"CREATE ROLE {role} LOGIN")
    owner.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
    as_role = make_url(pg_url).set(username=role).render_as_string(hide_password=False)
    try:
        done = subprocess.run(
            [sys.executable, str(app_dir / "app.py"), "--db", as_role],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1
        [line] = done.stderr.splitlines()
        assert line.startswith("error: the database ")
        assert "rastrillo_sessions" in line and "must be owner of table" in line
        assert "start this version once as a role that may" in line
        assert not owner.query(
            "SELECT 1 FROM information_schema.columns WHERE column_name = 'agent_only'"
        )
        _start(app_dir, pg_url)  # as the owner: upgraded, the grant's session marked
        rows = owner.query("SELECT agent_only FROM rastrillo_sessions ORDER BY agent_only")
        assert [row.agent_only for row in rows] == [False, True]
    finally:
        owner.execute(f"DROP OWNED BY {role}")
        owner.execute(f"DROP ROLE {role}")
        owner.dispose()
