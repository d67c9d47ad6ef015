"""Many server processes on one PostgreSQL: what holds in one process holds across all.

Four "hosts" — each a ``python app.py`` of the tickets demo on its own loopback
port — share one database, as replicas behind a load balancer would. Agents
call tools through the tool console over HTTP (a real agent's path: the
user's session, consent, audit), users approve on the approval page over
HTTP, and every step of one call lands on a different process.
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from rastrillo.storage import Database
from tests.support import LIGHT, Server, free_port, until

pytestmark = [pytest.mark.postgres, pytest.mark.processes]

TICKETS = Path(__file__).resolve().parent.parent / "examples" / "tickets"
ORIGIN = "http://tickets.test"  # one public origin for every host, as behind a proxy
HOSTS = 4
CONSOLE = "/_rastrillo/console"
PASSWORD = "tickets-demo"
USERS = {"1": "alice@example.com", "2": "bob@example.com"}
APPROVAL = re.compile(r'href="/_rastrillo/approvals/([A-Za-z0-9_-]+)"')
STATUS = re.compile(r'<strong class="status">(\d{3})</strong>')
REFUSED = re.compile(r'<p class="refused">Refused: ([^<]*)</p>')


@pytest.fixture(scope="module")
def hosts(module_pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    app_dir = tmp_path_factory.mktemp("hosts") / "tickets"
    shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("*.db*", "__pycache__"))
    env = {"RASTRILLO_DEV": "1", "RASTRILLO_ORIGIN": ORIGIN}  # the console is on under dev
    servers: list[Server] = []
    try:
        for n in range(HOSTS):
            port = free_port()
            servers.append(
                Server(
                    app_dir,
                    ["--addr", f"127.0.0.1:{port}", "--db", module_pg_url],
                    f"http://127.0.0.1:{port}",
                    env=env,
                    log=app_dir / f"host{n}.log",
                )
            )
        # The demo's users signed in against a light hash (tests.support.LIGHT): these tests
        # are about many processes, not about argon2's cost. An unknown account's guesses
        # are still checked against the framework's own dummy hash.
        seeded = Database(module_pg_url)
        seeded.execute("UPDATE users SET password_hash = :h", h=LIGHT.hash(PASSWORD))
        seeded.dispose()
        yield servers
    finally:
        for server in servers:
            assert server.stop() == 0, server.log.read_text()


@pytest.fixture(scope="module")
def db(module_pg_url: str) -> Iterator[Database]:
    database = Database(module_pg_url)
    yield database
    database.dispose()


def browser(server: Server, session: str | None = None) -> httpx.Client:
    """A client of ``server`` that sends the public origin, with the user's session cookie."""
    cookies = {"rastrillo_session": session} if session else None
    return server.client(headers={"Origin": ORIGIN}, cookies=cookies, timeout=30)


def sign_in(server: Server, user_id: str) -> str:
    with browser(server) as c:
        response = c.post("/signin", data={"email": USERS[user_id], "password": PASSWORD})
    assert response.status_code == 303, response.text
    return response.cookies["rastrillo_session"]


def propose(server: Server, session: str, event: int) -> str:
    """An agent's write through the console (``agent:console``): it waits for approval;
    return the approval id."""
    with browser(server, session) as c:
        page = c.post(
            CONSOLE, data={"tool": "events_id_buy_post", "arg.id": str(event), "arg.quantity": "1"}
        )
    assert page.status_code == 200, page.text
    found = APPROVAL.search(page.text)
    assert found, page.text
    return found[1]


def redeem(server: Server, session: str, approval: str) -> str:
    """Run the approved call from the console: its status, or ``refused: <why>``."""
    with browser(server, session) as c:
        page = c.post(CONSOLE, data={"approval": approval})
    assert page.status_code == 200, page.text
    status, refused = STATUS.search(page.text), REFUSED.search(page.text)
    assert status or refused, page.text
    return status[1] if status else f"refused: {refused[1]}"


def decide(server: Server, session: str, approval: str, decision: str = "approve") -> None:
    with browser(server, session) as c:
        response = c.post(f"/_rastrillo/approvals/{approval}", data={"decision": decision})
    assert response.status_code == 303, response.text


def runs_of(db: Database, approval: str) -> int:
    """Audit rows of the approval's call having run (a status, not a refusal)."""
    return db.query_one(
        "SELECT COUNT(*) AS n FROM rastrillo_audit WHERE approval_id = :a AND status < 400",
        a=approval,
    ).n


def test_200_agent_writes_each_approved_and_redeemed_on_other_processes_run_once(hosts, db):
    sessions = {user: sign_in(hosts[0], user) for user in USERS}
    db.execute("UPDATE events SET tickets_left = tickets_left + 1000")
    left_before = {r.id: r.tickets_left for r in db.query("SELECT id, tickets_left FROM events")}
    orders_before = db.query_one("SELECT COUNT(*) AS n FROM orders").n
    # One client per (user, event): a call is never proposed while an identical one is
    # approved and unused (the identical call would redeem it: see docs/agents.md).
    keys = [(user, event) for user in USERS for event in (1, 2, 3)]

    def one_call(i: int, user: str, event: int) -> tuple[str, str, str]:
        made, early, approves, runs = (hosts[(i + k) % HOSTS] for k in range(4))
        approval = propose(made, sessions[user], event)
        before = redeem(early, sessions[user], approval)  # not approved yet: must not run
        decide(approves, sessions[user], approval)
        return approval, before, redeem(runs, sessions[user], approval)

    def client(k: int) -> list[tuple[str, str, str]]:
        user, event = keys[k]
        return [one_call(i, user, event) for i in range(k, 200, len(keys))]

    with ThreadPoolExecutor(len(keys)) as pool:
        outcomes = [o for part in pool.map(client, range(len(keys))) for o in part]

    assert len(outcomes) == 200
    assert all(
        before.startswith("refused") and "has not decided yet" in before
        for _, before, _ in outcomes
    )
    assert [ran for _, _, ran in outcomes] == ["201"] * 200
    assert db.query_one("SELECT COUNT(*) AS n FROM orders").n == orders_before + 200
    left_after = {r.id: r.tickets_left for r in db.query("SELECT id, tickets_left FROM events")}
    assert sum(left_before[e] - left_after[e] for e in left_before) == 200
    # Every run has its audit row, naming who approved it; none ran twice.
    approvals = [a for a, _, _ in outcomes]
    until(lambda: all(runs_of(db, a) == 1 for a in approvals), "an audit row for every run")
    rows = db.query(
        "SELECT approved_by, user_id FROM rastrillo_audit WHERE status < 400"
        " AND approval_id IN (SELECT id FROM rastrillo_approvals)"
    )
    assert all(r.approved_by == r.user_id for r in rows)


def test_one_approval_redeemed_from_every_process_at_once_runs_once(hosts, db):
    session = sign_in(hosts[1], "1")
    approval = propose(hosts[2], session, 1)
    decide(hosts[3], session, approval)
    orders_before = db.query_one("SELECT COUNT(*) AS n FROM orders").n
    start = threading.Barrier(HOSTS * 4)

    def attempt(n: int) -> str:
        start.wait()
        return redeem(hosts[n % HOSTS], session, approval)

    with ThreadPoolExecutor(HOSTS * 4) as pool:
        outcomes = list(pool.map(attempt, range(HOSTS * 4)))
    assert outcomes.count("201") == 1
    assert all(o == "201" or (o.startswith("refused") and "already used" in o) for o in outcomes)
    until(lambda: runs_of(db, approval) == 1, "the run's audit row")
    assert db.query_one("SELECT COUNT(*) AS n FROM orders").n == orders_before + 1


def test_a_session_signed_out_on_one_process_is_refused_on_every_other_at_once(hosts):
    session = sign_in(hosts[0], "2")
    for server in hosts:
        with browser(server, session) as c:
            assert c.get("/orders").status_code == 200
    with browser(hosts[2], session) as c:
        assert c.post("/signout").status_code == 303
    for server in hosts:  # at once: no process may still trust its own idea of the session
        with browser(server, session) as c:
            response = c.get("/orders")
        assert response.status_code in (302, 303), server.base_url
        assert response.headers["location"].startswith("/signin")


def test_the_sign_in_throttle_counts_attempts_from_every_process(hosts):
    # 5 failures per account per window (RateLimit's default), wherever they land.
    attempts = 4 * HOSTS
    start = threading.Barrier(attempts)

    def guess(n: int) -> int:
        start.wait()
        with browser(hosts[n % HOSTS]) as c:
            return c.post(
                "/signin", data={"email": "carol@example.com", "password": f"guess-{n}"}
            ).status_code

    with ThreadPoolExecutor(attempts) as pool:
        statuses = list(pool.map(guess, range(attempts)))
    assert sorted(statuses) == [400] * 5 + [429] * (attempts - 5)
    for server in hosts:  # the limit now holds everywhere, for the right password too
        with browser(server) as c:
            late = c.post("/signin", data={"email": "carol@example.com", "password": "x"})
        assert late.status_code == 429 and int(late.headers["retry-after"]) > 0
