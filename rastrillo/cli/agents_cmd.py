"""``rastrillo agents list|revoke``: an operator's view of who may act for whom.

Neither migrates nor seeds the app's database, and neither creates one that
is not there: an app that never served MCP simply has no grants.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rastrillo.cli import add_app_option
from rastrillo.cli.audit_cmd import may_exist
from rastrillo.errors import RastrilloError
from rastrillo.visible import field, quoted

if TYPE_CHECKING:
    from rastrillo.storage import Database


def add_agents_parser(sub: Any) -> None:
    agents = sub.add_parser("agents", help="list or revoke the grants agents act under")
    asub = agents.add_subparsers(dest="agents_command", required=True, metavar="ACTION")

    p = asub.add_parser("list", help="grants, newest first: id, user, agent, client, dates")
    add_app_option(p, db=True)
    p.add_argument("--user", help="only this user's grants")
    p.add_argument("--all", action="store_true", help="revoked grants too")
    p.set_defaults(func=_list)

    p = asub.add_parser("revoke", help="revoke a grant: its tokens fail from the next call on")
    p.add_argument("grant", help="the grant's id, as `agents list` prints it")
    add_app_option(p, db=True)
    p.set_defaults(func=_revoke)


def _list(args: argparse.Namespace) -> int:
    from rastrillo.agents import grants

    with _grants_db(args.app, args.db) as db:
        rows = [] if db is None else grants.list_grants(db, args.user, include_revoked=args.all)
    if not rows:
        print("no grants" if args.all else "no live grants")
    for g in rows:
        fields = [
            g.id,
            f"user {field(g.user_id)}",
            f"agent:{g.agent}",
            f"client {quoted(g.client)}",
            f"created {_when(g.created_at)}",
            f"last used {_when(g.last_used_at)}",
        ]
        if g.revoked_at is not None:
            fields.append(f"revoked {_when(g.revoked_at)}")
        print("  ".join(fields))
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from rastrillo.agents import grants

    with _grants_db(args.app, args.db) as db:
        grant = None if db is None else grants.get_grant(db, args.grant)
        if db is None or grant is None:
            raise RastrilloError(f"no grant '{args.grant}': see rastrillo agents list")
        if not grants.revoke(db, grant.id):
            raise RastrilloError(f"grant {grant.id} was already revoked")
    print(f"revoked {grant.id}: agent:{grant.agent} for user {field(grant.user_id)}")
    return 0


@contextmanager
def _grants_db(app_dir: Path, flag: str | None) -> Iterator[Database | None]:
    """The app's database (``--db``, else ``RASTRILLO_DB``, else the app's own), or None
    when it (or its grants table) does not exist yet."""
    from sqlalchemy import inspect

    from rastrillo.agents import grants
    from rastrillo.loader import load_options
    from rastrillo.options import select_database
    from rastrillo.storage import Database

    url = select_database(load_options(app_dir), flag).database_url()
    if not may_exist(url):
        yield None
        return
    db = Database(url)
    try:
        yield db if inspect(db.engine).has_table(grants.grants_table.name) else None
    finally:
        db.dispose()


def _when(at: datetime | None) -> str:
    return "never" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")
