"""``rastrillo agents list|revoke``: an operator sees every grant and can end one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rastrillo.agents import grants
from rastrillo.app import handler
from rastrillo.cli.main import main
from rastrillo.loader import load_options
from rastrillo.options import select_database
from rastrillo.storage import Database
from tests.support import write_app

INDEX = """\
import rastrillo


def handle(ctx: rastrillo.Context):
    return ctx.text("hi")
"""


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    return write_app(tmp_path / "shop", {"index.GET.py": INDEX})


@pytest.fixture
def db(app_dir: Path):
    app = handler(load_options(app_dir))
    yield app.db
    app.db.dispose()


def test_an_app_that_never_ran_has_no_grants_and_gets_no_database(app_dir: Path, capsys):
    assert main(["agents", "list", "--app", str(app_dir)]) == 0
    assert capsys.readouterr().out == "no live grants\n"
    assert main(["agents", "revoke", "abc", "--app", str(app_dir)]) == 1
    assert not (app_dir / "app.db").exists()


def test_list_shows_every_users_grants_and_revoke_ends_one(app_dir: Path, db: Database, capsys):
    assert main(["agents", "list", "--app", str(app_dir)]) == 0
    assert capsys.readouterr().out == "no live grants\n"
    alice = grants.create_grant(db, user_id="1", agent="desk", client="Claude", client_id="c-1")
    tokens = grants.issue_tokens(db, alice.id)
    bob, _, _ = grants.personal_token(db, user_id="2", agent="script")

    assert main(["agents", "list", "--app", str(app_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f'{bob.id}  user 2  agent:script  client "personal token"  created ')
    assert lines[1].startswith(f'{alice.id}  user 1  agent:desk  client "Claude"  created ')
    assert lines[1].endswith("last used never")
    assert main(["agents", "list", "--app", str(app_dir), "--user", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == lines[1:]

    assert main(["agents", "revoke", alice.id, "--app", str(app_dir)]) == 0
    assert capsys.readouterr().out == f"revoked {alice.id}: agent:desk for user 1\n"
    assert grants.authenticate(db, tokens.access_token) is None  # the next call is refused
    assert grants.rotate_refresh(db, tokens.refresh_token) is None

    assert main(["agents", "list", "--app", str(app_dir)]) == 0
    assert capsys.readouterr().out.splitlines() == lines[:1]
    assert main(["agents", "list", "--app", str(app_dir), "--all"]) == 0
    assert " revoked 20" in capsys.readouterr().out.splitlines()[1]


def test_revoking_an_unknown_or_revoked_grant_is_a_clear_error(app_dir: Path, db: Database, capsys):
    assert main(["agents", "revoke", "nope\x1b[2J", "--app", str(app_dir)]) == 1
    err = capsys.readouterr().err
    assert err == "error: no grant 'nope\\x1b[2J': see rastrillo agents list\n"
    grant = grants.create_grant(db, user_id="1", agent="desk", client="Claude")
    assert main(["agents", "revoke", grant.id, "--app", str(app_dir)]) == 0
    assert main(["agents", "revoke", grant.id, "--app", str(app_dir)]) == 1
    assert "already revoked" in capsys.readouterr().err


def test_every_grant_id_can_be_typed_after_agents_revoke(app_dir: Path, db: Database):
    # An id starting with "-" would read as an option: revoke could not be given it.
    ids = [
        grants.create_grant(db, user_id="1", agent=f"desk-{n}", client="c").id for n in range(200)
    ]
    assert not [grant_id for grant_id in ids if not grant_id[0].isalnum()]
    assert main(["agents", "revoke", ids[0], "--app", str(app_dir)]) == 0


def test_a_hostile_user_id_reaches_the_terminal_escaped(app_dir: Path, db: Database, capsys):
    grants.create_grant(db, user_id="1\n\x1b]0;owned\x07", agent="desk", client="Claude")
    assert main(["agents", "list", "--app", str(app_dir)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert out.count("\n") == 1
    assert 'user "1\\n\\x1b]0;owned\\x07"  agent:desk' in out


def test_a_user_id_holding_the_text_of_an_escape_does_not_print_as_the_escape(
    app_dir: Path, db: Database, capsys
):
    """A user id is the app's to choose, often from what a person typed: one holding the
    four characters ``\\x1b`` is printed apart from one holding an ESC, so an operator
    can tell which of the two it is."""
    grants.create_grant(db, user_id="1\x1b[2J", agent="real", client="Claude")
    grants.create_grant(db, user_id="1\\x1b[2J", agent="forged", client="Claude")
    assert main(["agents", "list", "--app", str(app_dir)]) == 0
    shown = {
        re.search(r"agent:(\w+)", line)[1]: re.search(r'  user "(\S+)"  ', line)[1]
        for line in capsys.readouterr().out.splitlines()
    }
    assert shown == {"real": "1\\x1b[2J", "forged": "1\\\\x1b[2J"}


def unquoted(shown: str) -> str:
    """A field as ``agents list`` prints it, read back: its quotes and escapes undone."""
    return re.sub(r"\\(.)", r"\1", shown[1:-1]) if shown.startswith('"') else shown


@pytest.mark.parametrize(
    ("user", "client"),
    [
        ('1  agent:console  client "Claude Code"', "Desk"),
        ("1", 'Desk"  created 2026-01-01 00:00:00 UTC  last used never  revoked 2026-01-02\\'),
    ],
    ids=["user", "client"],
)
def test_a_user_id_or_a_client_name_cannot_end_its_field_and_forge_the_next(
    app_dir: Path, db: Database, capsys, user: str, client: str
):
    """A client names itself at registration, anyone's choice, and a user id is the app's,
    often what a person typed (a user name): one holding a quote, two spaces and the fields
    that follow would read as another grant's user, agent and client, or show a live grant
    as revoked (``revoked …``). Each is quoted unless it is one plain word, its quotes and
    backslashes escaped, so it ends where its field does."""
    grant = grants.create_grant(db, user_id=user, agent="desk", client=client, client_id="c-1")
    assert main(["agents", "list", "--app", str(app_dir)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    quoted = r'"(?:[^"\\]|\\.)*"'
    fields = re.fullmatch(
        rf"{grant.id}  user ({quoted}|\d+)  agent:desk  client ({quoted})  created [^\"]+  "
        r"last used never",
        line,
    )
    assert fields is not None, line
    assert (unquoted(fields[1]), unquoted(fields[2])) == (user, client)


def test_an_operator_reaches_the_database_the_app_serves_on(
    app_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    """A platform that sets ``RASTRILLO_DB`` (or an operator's ``--db``) serves the app on
    another database than ``Options.db``: its grants are listed and revoked there."""
    served = tmp_path / "served.db"
    db = handler(select_database(load_options(app_dir), str(served))).db
    try:
        grant = grants.create_grant(db, user_id="1", agent="desk", client="Claude")
        tokens = grants.issue_tokens(db, grant.id)
        assert main(["agents", "list", "--app", str(app_dir)]) == 0
        assert capsys.readouterr().out == "no live grants\n"  # the app's own database

        assert main(["agents", "list", "--app", str(app_dir), "--db", str(served)]) == 0
        assert capsys.readouterr().out.startswith(f"{grant.id}  user 1  agent:desk  ")
        monkeypatch.setenv("RASTRILLO_DB", str(served))
        assert main(["agents", "revoke", grant.id, "--app", str(app_dir)]) == 0
        assert capsys.readouterr().out == f"revoked {grant.id}: agent:desk for user 1\n"
        assert grants.authenticate(db, tokens.access_token) is None
    finally:
        db.dispose()
