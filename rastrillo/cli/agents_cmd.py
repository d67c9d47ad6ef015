"""``rastrillo agents list|revoke``: an operator's view of who may act for whom."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import Any

from ..agents import grants
from ..app import handler
from ..errors import RastrilloError
from ..loader import load_options
from ..visible import for_terminal


def add_agents_parser(sub: Any) -> None:
    agents = sub.add_parser("agents", help="list or revoke the grants agents act under")
    asub = agents.add_subparsers(dest="agents_command", required=True, metavar="ACTION")

    p = asub.add_parser("list", help="grants, newest first: id, user, agent, client, dates")
    p.add_argument("--app", default=".", type=Path, help="the app folder (default: .)")
    p.add_argument("--user", help="only this user's grants")
    p.add_argument("--all", action="store_true", help="revoked grants too")
    p.set_defaults(func=_list)

    p = asub.add_parser("revoke", help="revoke a grant: its tokens fail from the next call on")
    p.add_argument("grant", help="the grant's id, as `agents list` prints it")
    p.add_argument("--app", default=".", type=Path, help="the app folder (default: .)")
    p.set_defaults(func=_revoke)


def _list(args: argparse.Namespace) -> int:
    app = handler(load_options(args.app))
    try:
        rows = grants.list_grants(app.db, args.user, include_revoked=args.all)
    finally:
        app.db.dispose()
    if not rows:
        print("no grants" if args.all else "no live grants")
    for g in rows:
        fields = [
            g.id,
            f"user {for_terminal(g.user_id)}",
            f"agent:{g.agent}",
            f'client "{for_terminal(g.client)}"',
            f"created {_when(g.created_at)}",
            f"last used {_when(g.last_used_at)}",
        ]
        if g.revoked_at is not None:
            fields.append(f"revoked {_when(g.revoked_at)}")
        print("  ".join(fields))
    return 0


def _revoke(args: argparse.Namespace) -> int:
    app = handler(load_options(args.app))
    try:
        grant = grants.get_grant(app.db, args.grant)
        if grant is None:
            raise RastrilloError(
                f"no grant '{for_terminal(args.grant)}': see rastrillo agents list"
            )
        if not grants.revoke(app.db, grant.id):
            raise RastrilloError(f"grant {grant.id} was already revoked")
    finally:
        app.db.dispose()
    print(f"revoked {grant.id}: agent:{grant.agent} for user {for_terminal(grant.user_id)}")
    return 0


def _when(at: datetime | None) -> str:
    return "never" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")
