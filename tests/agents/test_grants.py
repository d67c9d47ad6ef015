"""Agent grants and tokens, on SQLite and on PostgreSQL: digests only, expiry, revocation."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError

from rastrillo.agents import grants
from rastrillo.agents.grants import GrantError
from rastrillo.sessions.store import create_session, end_sessions, find_session
from rastrillo.storage import Database
from rastrillo.testing import ManualClock
from rastrillo.tools import ApprovalInvalid, consent


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC))


@pytest.fixture
def db(db_url, clock):
    database = Database(db_url, clock=clock)
    database.open()
    yield database
    database.dispose()


def oauth_grant(db: Database, user: str = "3", agent: str = "claude") -> grants.Grant:
    return grants.create_grant(
        db, user_id=user, agent=agent, client="Claude Code", client_id="client-1"
    )


def test_tokens_are_stored_only_as_digests_and_never_logged(db, caplog):
    caplog.set_level(logging.DEBUG)
    grant = oauth_grant(db)
    tokens = grants.issue_tokens(db, grant.id)
    _, personal, _ = grants.personal_token(db, user_id=3, agent="openai")
    secrets_ = [tokens.access_token, tokens.refresh_token, personal]
    assert all(len(t) >= 43 + 7 for t in secrets_) and len(set(secrets_)) == 3
    with db.read() as conn:
        dump = repr(
            [
                list(r)
                for t in (grants.tokens_table, grants.grants_table)
                for r in conn.execute(t.select())
            ]
        )
    for token in secrets_:
        assert token not in dump and token[7:] not in dump
        assert token not in caplog.text
    assert tokens.access_token not in repr(tokens)


def test_an_access_token_authenticates_its_grant_and_notes_the_use(db, clock):
    grant = oauth_grant(db)
    assert grant.last_used_at is None
    tokens = grants.issue_tokens(db, grant.id)
    found = grants.authenticate(db, tokens.access_token)
    assert found is not None
    assert (found.id, found.user_id, found.agent, found.client, found.client_id) == (
        grant.id,
        "3",
        "claude",
        "Claude Code",
        "client-1",
    )
    assert str(found.actor) == f"agent:claude (grant {grant.id})"
    assert grants.get_grant(db, grant.id).last_used_at == clock.now()
    clock.advance(timedelta(seconds=30).total_seconds())  # touched at most once a minute
    grants.authenticate(db, tokens.access_token)
    assert grants.get_grant(db, grant.id).last_used_at == clock.now() - timedelta(seconds=30)
    clock.advance(timedelta(seconds=31).total_seconds())
    grants.authenticate(db, tokens.access_token)
    assert grants.get_grant(db, grant.id).last_used_at == clock.now()


@pytest.mark.parametrize(
    "token",
    [
        "",
        "Bearer x",
        "rst_at_",
        "rst_at_" + "A" * 42,
        "rst_at_" + "A" * 43,
        "rst_at_" + "A" * 44,
        "rst_xx_" + "A" * 43,
        "rst_at_" + "A" * 42 + "\n",
        "rst_at_" + "A" * 42 + "é",
    ],
)
def test_anything_but_an_issued_token_is_refused(db, token):
    grants.issue_tokens(db, oauth_grant(db).id)
    assert grants.authenticate(db, token) is None
    assert grants.refresh_grant(db, token) is None
    assert grants.rotate_refresh(db, token) is None
    assert grants.revoke_token(db, token) is False


def test_a_trailing_newline_on_a_real_token_is_refused(db):
    tokens = grants.issue_tokens(db, oauth_grant(db).id)
    assert grants.authenticate(db, tokens.access_token + "\n") is None
    assert grants.authenticate(db, tokens.access_token[:-1]) is None


def test_tokens_expire_access_after_an_hour_refresh_after_30_days(db, clock):
    tokens = grants.issue_tokens(db, oauth_grant(db).id)
    assert tokens.access_expires_at == clock.now() + timedelta(hours=1)
    assert tokens.refresh_expires_at == clock.now() + timedelta(days=30)
    clock.advance(timedelta(minutes=59, seconds=59).total_seconds())
    assert grants.authenticate(db, tokens.access_token) is not None
    clock.advance(timedelta(seconds=1).total_seconds())
    assert grants.authenticate(db, tokens.access_token) is None
    clock.advance((timedelta(days=30) - timedelta(hours=1, seconds=1)).total_seconds())
    assert grants.refresh_grant(db, tokens.refresh_token) is not None
    clock.advance(timedelta(seconds=1).total_seconds())
    assert grants.refresh_grant(db, tokens.refresh_token) is None
    assert grants.rotate_refresh(db, tokens.refresh_token) is None


def test_a_refresh_token_is_not_an_access_token_and_vice_versa(db):
    tokens = grants.issue_tokens(db, oauth_grant(db).id)
    assert grants.authenticate(db, tokens.refresh_token) is None
    assert grants.refresh_grant(db, tokens.access_token) is None
    assert grants.rotate_refresh(db, tokens.access_token) is None


def test_refresh_rotates_and_a_second_use_revokes_the_grant(db):
    grant = oauth_grant(db)
    first = grants.issue_tokens(db, grant.id)
    second = grants.rotate_refresh(db, first.refresh_token)
    assert second is not None and second.grant.id == grant.id
    assert grants.authenticate(db, second.access_token).id == grant.id
    assert grants.authenticate(db, first.access_token).id == grant.id  # until it expires
    assert grants.rotate_refresh(db, first.refresh_token) is None  # replay
    assert grants.get_grant(db, grant.id).revoked_at is not None
    for token in (first.access_token, second.access_token):
        assert grants.authenticate(db, token) is None
    assert grants.rotate_refresh(db, second.refresh_token) is None


def test_of_concurrent_rotations_one_wins_and_the_grant_is_then_revoked(db):
    grant = oauth_grant(db)
    tokens = grants.issue_tokens(db, grant.id)
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(lambda _: grants.rotate_refresh(db, tokens.refresh_token), range(8))
        )
    winners = [r for r in results if r is not None]
    assert len(winners) <= 1
    assert grants.get_grant(db, grant.id).revoked_at is not None
    assert grants.authenticate(db, tokens.access_token) is None


def test_revocation_holds_on_the_next_call_and_only_for_the_owner(db):
    grant = oauth_grant(db, user="3")
    tokens = grants.issue_tokens(db, grant.id)
    assert grants.authenticate(db, tokens.access_token) is not None
    assert grants.revoke(db, grant.id, user_id="4") is False  # another user's grant
    assert grants.authenticate(db, tokens.access_token) is not None
    assert grants.revoke(db, grant.id, user_id=3) is True
    assert grants.authenticate(db, tokens.access_token) is None
    assert grants.refresh_grant(db, tokens.refresh_token) is None
    assert grants.revoke(db, grant.id) is False  # already revoked
    with pytest.raises(GrantError):
        grants.issue_tokens(db, grant.id)


def test_revoking_a_grant_ends_the_sessions_of_its_calls_and_no_other(db):
    grant, other = oauth_grant(db), oauth_grant(db, agent="other")
    mine, theirs = grants.grant_session(db, grant), grants.grant_session(db, other)
    browser = create_session(db, "3")
    assert (
        mine
        and theirs
        and all(find_session(db, s, tool_call=True) for s in (mine, theirs, browser))
    )
    assert grants.revoke(db, grant.id)
    assert find_session(db, mine, tool_call=True) is None
    assert find_session(db, theirs, tool_call=True) is not None
    assert find_session(db, browser, tool_call=True) is not None
    assert grants.grant_session(db, grant) is None  # and it leaves no session behind
    assert db.query_one("SELECT COUNT(*) AS n FROM rastrillo_sessions").n == 2
    # The user ends every session, keeping the grants: the links to them go when the next
    # one is made.
    end_sessions(db, "3")
    assert grants.grant_session(db, other) is not None
    assert db.query_one("SELECT COUNT(*) AS n FROM rastrillo_agent_sessions").n == 1


def test_revoke_token_revokes_its_whole_grant(db):
    grant = oauth_grant(db)
    tokens = grants.issue_tokens(db, grant.id)
    assert grants.revoke_token(db, tokens.refresh_token) is True
    assert grants.authenticate(db, tokens.access_token) is None


def test_a_personal_token_is_a_grant_of_its_own(db, clock):
    grant, token, expires = grants.personal_token(
        db, user_id="3", agent="openai", ttl=timedelta(days=7)
    )
    assert expires == clock.now() + timedelta(days=7)
    assert (grant.client, grant.client_id, grant.agent) == ("personal token", None, "openai")
    assert grants.authenticate(db, token).id == grant.id
    assert grants.refresh_grant(db, token) is None
    clock.advance((expires - clock.now()).total_seconds())
    assert grants.authenticate(db, token) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda db: grants.personal_token(db, user_id="3", agent="openai"),
        lambda db: grants.grant_with_tokens(
            db, user_id="3", agent="openai", client="c", client_id="c"
        ),
    ],
    ids=["personal token", "OAuth code traded"],
)
def test_a_token_that_cannot_be_stored_leaves_no_grant(db, monkeypatch, make):
    """The grant and its tokens are one transaction: no agent listed that no token reaches,
    and none whose token a revocation between the two would make worthless once shown."""

    def fails(*args: object) -> str:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(grants, "_insert_token", fails)
    with pytest.raises(RuntimeError):
        make(db)
    assert grants.list_grants(db, "3") == []


def test_grants_listed_per_user_newest_first_revoked_left_out(db, clock):
    a = oauth_grant(db, user="3", agent="a")
    clock.advance(timedelta(seconds=1).total_seconds())
    b, _, _ = grants.personal_token(db, user_id="3", agent="b")
    clock.advance(timedelta(seconds=1).total_seconds())
    oauth_grant(db, user="4", agent="c")
    assert [g.agent for g in grants.list_grants(db, "3")] == ["b", "a"]
    assert [g.agent for g in grants.list_grants(db)] == ["c", "b", "a"]
    grants.revoke(db, a.id)
    assert [g.id for g in grants.list_grants(db, 3)] == [b.id]
    assert [g.id for g in grants.list_grants(db, 3, include_revoked=True)] == [b.id, a.id]


@pytest.mark.parametrize("agent", ["", "-x", "a b", "a\n", "x" * 65, "agent:x", "é"])
def test_a_bad_agent_name_is_refused(db, agent):
    with pytest.raises(GrantError, match="agent name"):
        grants.create_grant(db, user_id="3", agent=agent, client="c")
    with pytest.raises(GrantError):
        grants.personal_token(db, user_id="3", agent=agent)
    assert grants.list_grants(db) == []


def test_a_client_name_is_kept_printable_and_short(db):
    grant = grants.create_grant(db, user_id="3", agent="a", client="Evil\x1b[31m\u202eClient" * 20)
    assert "\x1b" not in grant.client and "\u202e" not in grant.client
    assert len(grant.client) == 100
    assert grants.get_grant(db, grant.id).client == grant.client
    assert grants.create_grant(db, user_id="3", agent="b", client=" ").client == "unnamed client"


@pytest.mark.parametrize("agent", ["console", "Console", "CONSOLE"])
def test_no_grant_may_take_the_tool_consoles_agent_name(db, agent):
    """The tool console's calls are ``agent:console``, and it runs only what it proposed:
    a grant by that name would write rows that pass for the console's, and share its
    approvals both ways."""
    from rastrillo.pages import console

    assert console.AGENT in grants.RESERVED_AGENTS
    with pytest.raises(GrantError, match="console"):
        grants.create_grant(db, user_id="3", agent=agent, client="Console")
    with pytest.raises(GrantError, match="console"):
        grants.personal_token(db, user_id="3", agent=agent)
    assert grants.list_grants(db) == []
    assert grants.personal_token(db, user_id="3", agent="console-2")[0].agent == "console-2"


def test_revoking_a_grant_ends_its_agents_approvals_still_to_be_used(db, clock):
    """Revoking a grant ends what the user approved or was asked for it: a grant made
    later under the same name is another agent and redeems none of it. The app's own
    in-process agent of that name, other grants and other users keep theirs."""
    grant = oauth_grant(db)
    mine = str(grant.actor)
    assert mine == f"agent:claude (grant {grant.id})"

    def ask(body: str, actor: str = mine, user: str = "3") -> consent.ApprovalRecord:
        return consent.request_approval(
            db,
            tool="notes_post",
            args={"body": body},
            sentence=f"Post {body}?",
            actor=actor,
            user_id=user,
        )

    def settle(body: str, approval: str | None, actor: str) -> object:
        with db.driver_write() as tx:
            return consent.settle(
                tx,
                clock.now(),
                approval,
                tool="notes_post",
                args={"body": body},
                actor=actor,
                user_id="3",
                sentence=f"Post {body}?",
            )

    approved, pending = ask("approved"), ask("pending")
    consent.decide(db, "3", approved.id, True)
    others = [
        ask("approved", actor="agent:claude"),  # the app's own, in-process
        ask("approved", actor="agent:openai"),
        ask("approved", user="4"),
    ]
    for other in others:
        consent.decide(db, other.user_id, other.id, True)
    assert grants.revoke(db, grant.id, user_id="3")
    now = clock.now()
    assert [consent.get(db, a.id).state(now) for a in (approved, pending)] == ["expired"] * 2
    assert [consent.get(db, a.id).state(now) for a in others] == ["approved"] * 3
    again = str(oauth_grant(db).actor)  # "claude" again, a new grant
    assert again != mine
    assert settle("approved", approved.id, again) is None  # refused
    assert settle("approved", others[0].id, again) is None  # the in-process agent's
    asked = settle("approved", None, again)  # the identical call is asked anew
    assert isinstance(asked, consent.ApprovalRecord) and asked.status == "pending"
    assert asked.id not in (approved.id, pending.id, others[0].id)


def test_a_token_is_looked_up_at_the_drivers_level(tmp_path, clock):
    """Every /mcp request but a remembered tool call looks its token up: on SQLite one
    SELECT sent straight to the driver, as the framework's other hot-path statements are
    (SQLAlchemy's connection and result machinery cost several times what SQLite takes)."""
    db = Database(str(tmp_path / "grants.db"), clock=clock)
    db.open()
    tokens = grants.issue_tokens(db, oauth_grant(db).id)
    assert grants.authenticate(db, tokens.access_token) is not None  # notes the first use
    through_sqlalchemy: list[str] = []
    event.listen(
        db.engine,
        "before_cursor_execute",
        lambda _conn, _cursor, statement, *_: through_sqlalchemy.append(statement),
    )
    clock.advance(30)  # the last use is not noted again yet
    found = grants.authenticate_until(db, tokens.access_token)
    assert found is not None and found[0].agent == "claude"
    assert found[1] == tokens.access_expires_at
    assert grants.authenticate(db, tokens.refresh_token) is None
    assert grants.authenticate(db, "rst_at_" + "x" * 43) is None
    assert through_sqlalchemy == []
    db.dispose()


def test_one_user_has_one_live_grant_per_agent_name_in_any_case(db):
    """Approvals and the audit log know an agent by its name and user: a second live grant
    under a name one of the user's live grants has would share its approvals. Refused, in
    any case, however the grant is made; another user's, or a revoked one's, is no bar."""
    first = oauth_grant(db, agent="claude")
    for agent in ("claude", "Claude", "CLAUDE"):
        with pytest.raises(grants.AgentNameTaken, match="already acts for you") as info:
            oauth_grant(db, agent=agent)
        assert info.value.grant == first
        with pytest.raises(GrantError, match="revoke"):
            grants.personal_token(db, user_id="3", agent=agent)
    assert [g.id for g in grants.list_grants(db, "3")] == [first.id]
    assert oauth_grant(db, user="4", agent="claude").user_id == "4"
    assert grants.revoke(db, first.id)
    assert grants.personal_token(db, user_id="3", agent="Claude")[0].agent == "Claude"


def test_of_grants_made_at_once_under_one_name_exactly_one_is_made(db_url, clock):
    """Two consents under one name, traded at once, in several processes of the app: the
    check and the insert are one step, so exactly one live grant comes of it."""
    databases = [Database(db_url, clock=clock) for _ in range(8)]
    databases[0].open()

    def make(database: Database) -> str:
        try:
            return oauth_grant(database, agent="claude").id
        except grants.AgentNameTaken:
            return "refused"

    try:
        with ThreadPoolExecutor(8) as pool:
            made = list(pool.map(make, databases))
        [one] = [grant_id for grant_id in made if grant_id != "refused"]
        assert made.count("refused") == 7
        assert [g.id for g in grants.list_grants(databases[0], "3")] == [one]
    finally:
        for database in databases:
            database.dispose()


def test_a_database_holding_live_grants_of_one_name_is_upgraded_when_opened(db_url, clock):
    """The database holds it: one live grant per agent name per user is a unique index.
    A database made before it, holding such duplicates, opens all the same: the oldest
    keeps the name, the others take the first free ``name-N``, in any case."""
    db = Database(db_url, clock=clock)
    db.open()
    db.execute(f"DROP INDEX {grants.LIVE_NAME.name}")
    rows = [
        ("g1", "3", "claude", None),
        ("g2", "3", "Claude", None),
        ("g3", "3", "claude", None),
        ("g4", "3", "claude-2", None),
        ("g5", "3", "claude", "revoked"),
        ("g6", "4", "claude", None),
    ]
    for number, (grant_id, user, agent, revoked) in enumerate(rows):
        at = clock.now() + timedelta(seconds=number)
        db.execute(
            "INSERT INTO rastrillo_agent_grants (id, user_id, agent, client, created_at, "
            "revoked_at) VALUES (:i, :u, :a, 'c', :at, :r)",
            i=grant_id,
            u=user,
            a=agent,
            at=at,
            r=at if revoked else None,
        )
    db.dispose()
    again = Database(db_url, clock=clock)
    again.open()
    try:
        names = {g.id: g.agent for g in grants.list_grants(again, include_revoked=True)}
        assert names == {
            "g1": "claude",
            "g2": "Claude-3",
            "g3": "claude-4",
            "g4": "claude-2",
            "g5": "claude",
            "g6": "claude",
        }
        with pytest.raises(IntegrityError):
            again.execute(
                "INSERT INTO rastrillo_agent_grants (id, user_id, agent, client, created_at) "
                "VALUES ('g7', '3', 'claude', 'c', :at)",
                at=clock.now(),
            )
    finally:
        again.dispose()


@pytest.mark.parametrize(
    "not_an_id", ["\x00", "0" * 31 + "\x00", "0" * 32 + "\n", "A" * 32, "a" * 5000, "\ud800"]
)
def test_what_is_no_grant_or_approval_id_finds_nothing(db, not_an_id):
    """An id from outside (a page's path, a terminal, an app's own form) is full-matched
    before any lookup: PostgreSQL refuses a NUL in text, and no driver encodes a lone
    surrogate, so unmatched either would be a traceback, not the answer for no such id."""
    grant = oauth_grant(db)
    assert grants.revoke(db, not_an_id) is False
    assert grants.revoke(db, not_an_id, user_id="3") is False
    assert grants.get_grant(db, not_an_id) is None
    with pytest.raises(GrantError, match="does not exist"):
        grants.issue_tokens(db, not_an_id)
    with pytest.raises(ApprovalInvalid, match="no such approval"):
        consent.decide(db, "3", not_an_id, True)
    assert grants.get_grant(db, grant.id) == grant


@pytest.mark.parametrize("hidden", ["\u061c", "\u200e", "\u200f", "\u202e", "\x1b", "\t", "\n"])
def test_a_client_name_keeps_no_character_a_text_value_may_not_hold(db, hidden):
    """The one rule for hidden characters (``UNSAFE_TEXT``), and no tab or line break in a
    name listed on one line: each is stored as U+FFFD, which every page shows."""
    grant = grants.create_grant(
        db, user_id="3", agent="a", client=f"x{hidden}y", client_id="client-1"
    )
    assert grant.client == "x\ufffdy"
    assert grants.get_grant(db, grant.id).client == "x\ufffdy"
