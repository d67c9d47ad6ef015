"""``rastrillo audit``: print the log of what agents did, newest first.

It only reads: the app's database is neither migrated nor seeded, and a
database that does not exist yet is not created.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rastrillo.cli import add_app_option


def add_audit_parser(sub: Any) -> None:
    p = sub.add_parser("audit", help="print the latest tool calls, newest first")
    add_app_option(p, db=True)
    p.add_argument("--limit", default=20, type=_row_count, metavar="N", help="how many rows (20)")
    p.add_argument("--user", help="only calls made for this user")
    p.set_defaults(func=_audit)


def _row_count(text: str) -> int:
    """``--limit``: a whole number of rows from 1, in ASCII digits (SQLite reads a
    negative ``LIMIT`` as none at all)."""
    from rastrillo.registry.validate import parse_int

    count = parse_int(text)
    if count is None or count < 1:
        raise argparse.ArgumentTypeError(f"wants a number of rows from 1, got {text!r}")
    return count


def _audit(args: argparse.Namespace) -> int:
    from rastrillo.loader import load_options
    from rastrillo.options import select_database
    from rastrillo.storage import Database
    from rastrillo.tools.audit import latest

    url = select_database(load_options(args.app), args.db).database_url()
    rows = []
    if may_exist(url):
        db = Database(url)
        try:
            rows = latest(db, limit=args.limit, user_id=args.user)
        finally:
            db.dispose()
    if not rows:
        print("no tool calls yet")
    for row in rows:
        print(row)
    return 0


def may_exist(url: str) -> bool:
    """False for a SQLite file that is not there (opening it would create it); a URL
    the framework cannot run on raises `ConfigError`, as opening it would."""
    from rastrillo.storage import supported_url

    parsed = supported_url(url)
    if parsed.get_backend_name() != "sqlite":
        return True
    assert parsed.database  # supported_url refused a database in memory
    return Path(parsed.database).is_file()
