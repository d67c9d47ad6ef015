"""Storage: migrations applied once and in order; concurrent writers never hit "locked"."""

import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import (
    Boolean,
    Column,
    Enum,
    ForeignKey,
    Integer,
    MetaData,
    Sequence,
    String,
    Table,
    bindparam,
    event,
    inspect,
    select,
)
from sqlalchemy.exc import (
    IntegrityError,
    InternalError,
    OperationalError,
    ProgrammingError,
    ResourceClosedError,
    StatementError,
)

from rastrillo.errors import ConfigError
from rastrillo.storage import (
    Database,
    DatabaseUnavailable,
    Instant,
    MigrationError,
    Prepared,
    is_unavailable,
    split_sql,
)
from rastrillo.testing import TestApp


def test_migrations_apply_once_in_order(tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0002_more.sql").write_text("INSERT INTO log (step) VALUES ('second');\n")
    (migrations / "0001_init.sql").write_text(
        "-- the table\nCREATE TABLE log (id INTEGER PRIMARY KEY, step TEXT);\n"
        "INSERT INTO log (step) VALUES ('first');\n"
    )
    db = Database(str(tmp_path / "app.db"))
    db.open(migrations)
    db.open(migrations)
    assert [r.step for r in db.query("SELECT step FROM log ORDER BY id")] == ["first", "second"]
    (migrations / "0003_third.sql").write_text("INSERT INTO log (step) VALUES ('third');")
    assert Database(str(tmp_path / "app.db")).migrate(migrations) == ["0003_third.sql"]
    names = [r.name for r in db.query("SELECT name FROM rastrillo_migrations ORDER BY name")]
    assert names == ["0001_init.sql", "0002_more.sql", "0003_third.sql"]


def test_a_failing_migration_applies_nothing_and_names_its_file_and_line(db_url, tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_ok.sql").write_text("CREATE TABLE a (x INT);\n")
    (migrations / "0002_bad.sql").write_text("-- two tables\nCREATE TABLE b (x INT);\n\nNOT SQL;\n")
    db = Database(db_url)
    with pytest.raises(MigrationError) as failed:
        db.open(migrations)
    message = str(failed.value)
    assert message.startswith("migrations/0002_bad.sql:4: ")
    assert "syntax error" in message
    assert message.endswith("no migration was applied; fix the file and start again")
    tables = {"a", "b"} & set(inspect(db.engine).get_table_names())
    assert tables == set()
    assert db.query("SELECT * FROM rastrillo_migrations") == []
    db.dispose()


def test_badly_named_migration_is_a_clear_error(tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "init.sql").write_text("SELECT 1;")
    with pytest.raises(ConfigError, match=r"NNNN_name\.sql"):
        Database(str(tmp_path / "app.db")).open(migrations)


def test_sqlite_settings(tmp_path):
    db = Database(str(tmp_path / "app.db"))
    with db.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000


def test_concurrent_read_modify_write_never_locks_or_loses(tmp_path):
    db = Database(str(tmp_path / "app.db"))
    db.execute("CREATE TABLE counter (n INTEGER)")
    db.execute("INSERT INTO counter VALUES (0)")
    other = Database(str(tmp_path / "app.db"))  # a second engine, as a second process has
    errors: list[BaseException] = []

    def bump(database: Database) -> None:
        try:
            for _ in range(25):
                with database.write() as conn:
                    n = conn.exec_driver_sql("SELECT n FROM counter").scalar()
                    conn.exec_driver_sql(f"UPDATE counter SET n = {n + 1}")
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=bump, args=(d,)) for d in (db, other) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert db.query_one("SELECT n FROM counter").n == 8 * 25


def test_split_sql_keeps_semicolons_inside_lines():
    script = "CREATE TABLE t (a TEXT DEFAULT 'x;y');\n-- comment only;\nINSERT INTO t VALUES ('1');"
    assert split_sql(script) == [
        "CREATE TABLE t (a TEXT DEFAULT 'x;y');",
        "-- comment only;\nINSERT INTO t VALUES ('1');",
    ]


def test_per_dialect_migrations_run_the_file_for_the_database(tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_log.sqlite.sql").write_text("CREATE TABLE log (id INTEGER PRIMARY KEY);")
    (migrations / "0001_log.postgresql.sql").write_text("NOT SQLITE AT ALL;")
    (migrations / "0002_step.sql").write_text("ALTER TABLE log ADD COLUMN step TEXT;")
    db = Database(str(tmp_path / "app.db"))
    db.open(migrations)
    db.execute("INSERT INTO log (step) VALUES ('one')")
    assert db.query_one("SELECT id FROM log").id == 1
    names = [r.name for r in db.query("SELECT name FROM rastrillo_migrations ORDER BY name")]
    assert names == ["0001_log.sql", "0002_step.sql"]
    # A database migrated from the plain 0001_log.sql does not run a dialect file again.
    (migrations / "0001_log.sqlite.sql").write_text("NOT SQL;")
    assert db.migrate(migrations) == []


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"0001_a.postgresql.sql": "x"}, r"0001_a\.sql: no file for sqlite \(add 0001_a\.sqlite"),
        ({"0001_a.sql": "x", "0001_a.sqlite.sql": "x"}, r"both a plain file and per-dialect"),
        ({"0001_a.postgres.sql": "x"}, r"'postgres' is not a dialect"),
        ({"1_a.sql": "x"}, r"1_a\.sql: migration files are named NNNN_name\.sql"),
    ],
)
def test_migration_files_that_cannot_be_chosen_are_clear_errors(tmp_path, files, message):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    for name, sql in files.items():
        (migrations / name).write_text(sql)
    db = Database(str(tmp_path / "app.db"))
    with pytest.raises(ConfigError, match=message):
        db.open(migrations)
    assert db.query("SELECT name FROM sqlite_master") == []  # refused before anything ran


def test_split_sql_drops_what_holds_no_statement():
    assert split_sql("-- only a comment;\n/* and; another */\n;\n") == []


NOTES = """\
CREATE TABLE notes (
  id INTEGER PRIMARY KEY, -- the key;
  body TEXT NOT NULL,
  edits INTEGER NOT NULL DEFAULT 0
);
INSERT INTO notes (id, body) VALUES (1, 'one;
two');
"""

# A trigger body holds statements of its own, each ending in `;`.
TRIGGER = {
    "sqlite": """\
CREATE TRIGGER notes_edited AFTER UPDATE OF body ON notes
BEGIN
  UPDATE notes SET edits = edits + 1 WHERE id = NEW.id;
  SELECT 1;
END;
""",
    "postgres": """\
CREATE FUNCTION notes_edited() RETURNS trigger AS $$
BEGIN
  NEW.edits := OLD.edits + 1;
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER notes_edited BEFORE UPDATE OF body ON notes
  FOR EACH ROW EXECUTE FUNCTION notes_edited();
""",
}


def test_a_comment_ending_in_a_semicolon_and_a_string_holding_one_migrate(db_url, tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_notes.sql").write_text(NOTES)
    db = Database(db_url)
    db.open(migrations)
    assert [tuple(r) for r in db.query("SELECT id, body FROM notes")] == [(1, "one;\ntwo")]
    db.dispose()


def test_a_trigger_body_migrates_as_one_statement(db_url, tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_notes.sql").write_text(NOTES)
    db = Database(db_url)
    (migrations / "0002_trigger.sql").write_text(TRIGGER["sqlite" if db.is_sqlite else "postgres"])
    db.open(migrations)
    db.execute("UPDATE notes SET body = 'three' WHERE id = 1")
    assert db.query_one("SELECT edits FROM notes WHERE id = 1").edits == 1
    db.dispose()


def test_a_process_starts_while_another_holds_the_write_lock(tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_notes.sql").write_text(NOTES)
    path = tmp_path / "app.db"
    Database(str(path)).open(migrations)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a long write elsewhere: a sidecar's catch-up pass, say
    try:
        starting = Database(str(path))
        starting.open(migrations)  # nothing to create or apply: reads only, so no wait
        assert starting.query_one("SELECT body FROM notes").body == "one;\ntwo"
    finally:
        holder.rollback()
        holder.close()


def test_a_pending_migration_is_still_applied_when_the_rest_is_current(tmp_path):
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_notes.sql").write_text(NOTES)
    Database(str(tmp_path / "app.db")).open(migrations)
    (migrations / "0002_more.sql").write_text("INSERT INTO notes (id, body) VALUES (2, 'b');")
    db = Database(str(tmp_path / "app.db"))
    db.open(migrations)
    assert [r.id for r in db.query("SELECT id FROM notes ORDER BY id")] == [1, 2]


def test_a_framework_table_made_by_an_earlier_version_gains_the_indexes_added_since(tmp_path):
    path = tmp_path / "app.db"
    Database(str(path)).open()
    old = sqlite3.connect(path)
    old.execute("DROP INDEX ix_rastrillo_approvals_waiting")
    old.commit()
    old.close()
    db = Database(str(path))
    db.open()
    names = [r.name for r in db.query("SELECT name FROM sqlite_master WHERE type = 'index'")]
    assert "ix_rastrillo_approvals_waiting" in names


def test_a_database_missing_a_table_and_an_index_gets_both_and_keeps_its_rows(db_url, tmp_path):
    """A table made whole at the open, and one an earlier version left an index short, in one
    database: the one is made with its indexes, the other only gains what it lacks."""
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_notes.sql").write_text(NOTES)
    Database(db_url).open(migrations)
    old = Database(db_url)
    old.execute("DROP TABLE rastrillo_audit")
    old.execute("DROP INDEX ix_rastrillo_approvals_waiting")
    old.dispose()
    db = Database(db_url)
    db.open(migrations)
    found = inspect(db.engine)
    assert {i["name"] for i in found.get_indexes("rastrillo_audit")} == {
        "ix_rastrillo_audit_user_id"
    }
    assert "ix_rastrillo_approvals_waiting" in {
        i["name"] for i in found.get_indexes("rastrillo_approvals")
    }
    assert [tuple(r) for r in db.query("SELECT id, body FROM notes")] == [(1, "one;\ntwo")]
    db.dispose()


_SCHEMA = {
    "sqlite": [
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name",
    ],
    "postgresql": [
        "SELECT relname, relkind FROM pg_class"
        " WHERE relnamespace = 'public'::regnamespace ORDER BY relname",
        "SELECT table_name, ordinal_position, column_name, data_type, character_maximum_length,"
        " is_nullable, column_default FROM information_schema.columns"
        " WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
        "SELECT tablename, indexname, indexdef FROM pg_indexes"
        " WHERE schemaname = 'public' ORDER BY tablename, indexname",
        "SELECT c.relname, d.objsubid, d.description FROM pg_description d"
        " JOIN pg_class c ON c.oid = d.objoid"
        " WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1, 2",
        "SELECT typname, typtype FROM pg_type"
        " WHERE typnamespace = 'public'::regnamespace ORDER BY typname",
    ],
}


def _schema(db: Database) -> list[list[tuple[object, ...]]]:
    """The schema as the database itself reads it back: every table's, index's and
    constraint's definition, and on PostgreSQL every column, comment and type too."""
    return [[tuple(r) for r in db.query(q)] for q in _SCHEMA[db.engine.dialect.name]]


def test_a_new_databases_tables_are_the_tables_create_all_makes(db_url, monkeypatch):
    """The start runs each table's and index's DDL compiled once a process, with the DDL
    events fired as ``create_all`` fires them (``grants.LIVE_NAME``'s partial index is one
    they make): the schema it makes, compiled and then replayed, is ``create_all``'s."""
    import rastrillo.agents.tables  # noqa: F401  (every framework table on METADATA)
    from rastrillo.agents.grants import LIVE_NAME
    from rastrillo.storage import METADATA, migrations

    db = Database(db_url)
    METADATA.create_all(db.engine)
    made = _schema(db)
    assert "revoked_at IS NULL" in str(made)  # LIVE_NAME's, which its listener makes partial
    # As in a new process: nothing compiled, and the listener's option not yet on the index.
    monkeypatch.setattr(migrations, "_CREATE", {})
    monkeypatch.delitem(LIVE_NAME.dialect_options[db.engine.dialect.name], "where")
    for _compiled_then_replayed in range(2):
        METADATA.drop_all(db.engine)
        assert not inspect(db.engine).get_table_names()
        db.open()
        assert _schema(db) == made
    assert migrations._CREATE
    db.dispose()


def test_a_table_create_all_makes_with_statements_of_its_own_is_not_replayed() -> None:
    """What ``create_all`` makes beside CREATE TABLE and CREATE INDEX (a sequence, a comment,
    an enum's type, a foreign key added after the tables) the replay would leave out: such
    a table is made by ``create_all``. Every framework table today is replayed."""
    import rastrillo.agents.tables  # noqa: F401  (every framework table on METADATA)
    from rastrillo.storage import METADATA
    from rastrillo.storage.migrations import replayable

    assert all(replayable(table) for table in METADATA.sorted_tables)
    kinds = MetaData()
    plain = Table("plain", kinds, Column("id", Integer, primary_key=True), Column("b", Boolean))
    assert replayable(plain)
    own = [
        Table("c1", kinds, Column("id", Integer, primary_key=True), comment="why"),
        Table("c2", kinds, Column("id", Integer, primary_key=True, comment="why")),
        Table("s", kinds, Column("id", Integer, Sequence("s_id"), primary_key=True)),
        Table("e", kinds, Column("id", Integer, primary_key=True), Column("k", Enum("a", "b"))),
        Table(
            "f",
            kinds,
            Column("id", Integer, primary_key=True),
            Column("p", Integer, ForeignKey("plain.id", use_alter=True)),
        ),
    ]
    assert not any(replayable(table) for table in own)


def test_the_demo_app_starts_while_another_process_holds_the_write_lock(tmp_path):
    tickets = Path(__file__).resolve().parent.parent / "examples" / "tickets"
    TestApp(tickets, tmp_path)  # creates, migrates and seeds
    holder = sqlite3.connect(tmp_path / "test.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        again = TestApp(tickets, tmp_path)
        assert again.client.get("/healthz").status_code == 200
    finally:
        holder.rollback()
        holder.close()


def test_a_framework_table_from_an_earlier_version_is_refused_at_start_saying_so(tmp_path):
    path = tmp_path / "app.db"
    Database(str(path)).open()
    old = sqlite3.connect(path)
    old.executescript(  # the sessions table as it was, instants as floats
        "DROP TABLE rastrillo_sessions;"
        "CREATE TABLE rastrillo_sessions (id_digest VARCHAR(64) PRIMARY KEY,"
        " user_id VARCHAR(255) NOT NULL, created FLOAT NOT NULL, expires FLOAT NOT NULL,"
        " idle_seconds FLOAT NOT NULL, idle_expires FLOAT NOT NULL);"
    )
    old.close()
    with pytest.raises(ConfigError, match=r"changed since: its table rastrillo_sessions"):
        Database(str(path)).open()


def test_a_load_of_every_worker_thread_reuses_the_pools_sqlite_connections(tmp_path):
    """Starlette runs sync work in up to 40 threads: each holding a connection at once,
    twice over, opens connections the first time only."""
    db = Database(str(tmp_path / "app.db"))
    db.open()
    opened: list[object] = []
    failed: list[BaseException] = []
    event.listen(db.engine, "connect", lambda conn, record: opened.append(conn))

    def load() -> None:
        together = threading.Barrier(40, timeout=30)

        def hold() -> None:
            try:
                with db.read() as conn:
                    conn.exec_driver_sql("SELECT 1")
                    together.wait()
            except BaseException as exc:
                failed.append(exc)

        threads = [threading.Thread(target=hold) for _ in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    load()
    first = len(opened)
    assert first >= 39  # one may be left open by open()
    load()
    assert (len(opened), failed) == (first, [])


def test_a_one_statement_read_on_sqlite_sends_only_its_statement_and_sees_every_commit(
    tmp_path,
):
    """``query``/``query_one`` run with no BEGIN and ROLLBACK around them on SQLite (a single
    statement reads one snapshot anyway), yet see a row deleted a moment before by another
    connection: what a session's revocation relies on. ``read()`` keeps its transaction, so
    several statements in it read one snapshot. What SQLite is sent is traced by SQLite."""
    db = Database(str(tmp_path / "app.db"))
    sent: list[str] = []
    event.listen(db.engine, "connect", lambda conn, _record: conn.set_trace_callback(sent.append))
    db.open()
    db.execute("CREATE TABLE grants (id INTEGER PRIMARY KEY)")
    db.execute("INSERT INTO grants (id) VALUES (1)")
    sent.clear()

    assert db.query_one("SELECT id FROM grants WHERE id = :id", id=1) == (1,)
    assert [row.id for row in db.query("SELECT id FROM grants")] == [1]
    assert sent == ["SELECT id FROM grants WHERE id = 1", "SELECT id FROM grants"]

    other = sqlite3.connect(tmp_path / "app.db")
    other.execute("DELETE FROM grants WHERE id = 1")
    other.commit()
    other.close()
    assert db.query_one("SELECT id FROM grants WHERE id = :id", id=1) is None

    sent.clear()
    with db.read() as conn:
        conn.exec_driver_sql("SELECT count(*) FROM grants")
        conn.exec_driver_sql("SELECT count(*) FROM grants")
    assert sent[0] == "BEGIN"
    db.dispose()


_NOTES = Table(
    "driver_notes",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("at", Instant, nullable=False),
)
_ADD = Prepared(_NOTES.insert(), columns=("id", "at"))
_AT = Prepared(select(_NOTES.c.at).where(_NOTES.c.id == bindparam("id")))
_WHEN = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


@pytest.fixture
def notes_db(db_url: str) -> Iterator[Database]:
    """A database with the empty table ``driver_notes``."""
    db = Database(db_url)
    try:
        with db.write() as conn:
            _NOTES.create(conn)
        yield db
    finally:
        db.dispose()


def test_a_driver_write_commits_rolls_back_and_keeps_instants_as_core_does(notes_db):
    """``Database.driver_write`` with `Prepared` statements: what ``write`` promises, the
    instants stored and read back exactly as SQLAlchemy's own statements store them."""
    db = notes_db
    with db.driver_write() as tx:
        assert tx.run(_ADD, id=1, at=_WHEN) == []
    with db.driver_write() as tx:
        assert tx.run(_AT, id=1) == [(_WHEN,)]
    with db.read() as conn:
        assert conn.execute(select(_NOTES.c.at)).scalar_one() == _WHEN
    with pytest.raises(RuntimeError), db.driver_write() as tx:
        tx.run(_ADD, id=2, at=_WHEN)
        raise RuntimeError("the caller's own failure")
    with pytest.raises(IntegrityError), db.driver_write() as tx:
        tx.run(_ADD, id=3, at=_WHEN)
        tx.run(_ADD, id=1, at=_WHEN)  # the driver's error, raised as SQLAlchemy's
    assert [row.id for row in db.query("SELECT id FROM driver_notes")] == [1]


_LOG = Table(
    "driver_log",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("at", Instant, nullable=False),
    Column("note", String(20)),
    Column("kind", String(20), server_default="plain"),
    Column("until", Instant),
)
_LOG_ADD = Prepared(_LOG.insert(), columns=("id", "at", "note", "kind", "until"))


def test_a_batch_of_rows_keeps_each_value_and_each_null_whatever_the_columns_default(db_url):
    """``run_many`` writes a NULL by leaving its column out of the INSERT only where the
    column's default is NULL: rows of different shapes in one batch each come back as given,
    and a None for a column with another default is still stored as NULL."""
    db = Database(db_url)
    try:
        with db.write() as conn:
            _LOG.create(conn)
        rows = [
            [1, _WHEN, "first", "loud", _WHEN],
            [2, _WHEN, None, None, None],
            [3, _WHEN, "third", None, None],
            [4, _WHEN, None, "quiet", _WHEN],
            [5, _WHEN, None, None, None],
        ]
        with db.driver_write() as tx:
            tx.run_many(_LOG_ADD, [list(row) for row in rows])
        with db.read() as conn:
            found = conn.execute(select(_LOG).order_by(_LOG.c.id)).all()
        assert [list(row) for row in found] == rows
    finally:
        db.dispose()


def test_a_driver_write_refuses_a_database_file_deleted_while_in_use(tmp_path):
    db = Database(str(tmp_path / "app.db"))
    try:
        db.open()
        (tmp_path / "app.db").unlink()
        with pytest.raises(DatabaseUnavailable, match="deleted"), db.driver_write():
            pass
    finally:
        db.dispose()


def test_query_rows_are_sqlalchemys_rows_with_instants_converted(notes_db):
    """SQL text, a `Prepared` statement and a built one give the same `Row`s on SQLite and
    PostgreSQL: by position, by name, as a mapping, ``_asdict``; an `Instant` column read
    back as an aware datetime; ``IN`` a list expanded; no row is ``[]`` / None."""
    db = notes_db
    with db.driver_write() as tx:
        tx.run(_ADD, id=1, at=_WHEN)
        tx.run(_ADD, id=2, at=_WHEN)
    text_row = db.query_one("SELECT id, 'x' AS tag FROM driver_notes WHERE id = :id", id=2)
    assert text_row == (2, "x") and text_row.tag == "x" and text_row._mapping["id"] == 2
    assert text_row._asdict() == {"id": 2, "tag": "x"}
    assert db.query_one(_AT, id=1).at == _WHEN
    assert db.query_one(_AT.statement, id=1).at == _WHEN
    assert db.query(_AT, id=3) == [] and db.query_one(_AT, id=3) is None
    listed = select(_NOTES.c.id).where(_NOTES.c.id.in_(bindparam("ids", expanding=True)))
    assert [row.id for row in db.query(Prepared(listed), ids=[1, 2])] == [1, 2]
    assert db.query("SELECT id FROM driver_notes ORDER BY id") == [(1,), (2,)]


def test_a_failing_query_raises_sqlalchemys_errors(db_url):
    """A bind given no value, SQL the database refuses: the errors SQLAlchemy's own
    statements raise, naming the bind or the statement, and the pool still serves."""
    db = Database(db_url)
    try:
        db.open()
        with pytest.raises(StatementError, match="A value is required for bind parameter 'id'"):
            db.query_one("SELECT :id AS id")
        with pytest.raises(ProgrammingError if "postgresql" in db_url else OperationalError) as bad:
            db.query("SELECT nothing FROM no_such_table")
        assert "no_such_table" in str(bad.value)
        with db.write() as conn:
            conn.exec_driver_sql("CREATE TABLE marks (id INTEGER)")
        # A write given as a query: refused by PostgreSQL's read-only statements; on SQLite
        # it returns no rows, which SQLAlchemy's result refuses.
        with pytest.raises(InternalError if "postgresql" in db_url else ResourceClosedError):
            db.query("UPDATE marks SET id = 1")
        assert db.query_one("SELECT 1 AS one").one == 1
    finally:
        db.dispose()


def test_a_query_on_a_locked_sqlite_database_is_unavailable_not_an_error(tmp_path):
    """A read that SQLite answers "locked" (an exclusive lock held elsewhere past the busy
    timeout) raises what `is_unavailable` reads as a 503, as SQLAlchemy's statements do."""
    db = Database(str(tmp_path / "app.db"))
    event.listen(db.engine, "connect", lambda conn, _r: conn.execute("PRAGMA busy_timeout=50"))
    try:
        db.open()
        db.execute("CREATE TABLE t (id INTEGER)")
        db.engine.dispose()  # a new connection must read the file, which the holder locks
        holder = sqlite3.connect(tmp_path / "app.db", isolation_level=None)
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(OperationalError) as locked:
            db.query("SELECT id FROM t")
        assert is_unavailable(locked.value)
        holder.rollback()
        holder.close()
    finally:
        db.dispose()
