"""``rastrillo audit``: print the log of what agents did, newest first."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_audit_parser(sub: Any) -> None:
    p = sub.add_parser("audit", help="print the latest tool calls, newest first")
    p.add_argument("--app", default=".", type=Path, help="the app folder (default: .)")
    p.add_argument("--limit", default=20, type=int, metavar="N", help="how many rows (20)")
    p.add_argument("--user", help="only calls made for this user")
    p.set_defaults(func=_audit)


def _audit(args: argparse.Namespace) -> int:
    from ..app import handler
    from ..loader import load_options
    from ..tools.audit import latest

    app = handler(load_options(args.app))
    rows = latest(app.db, limit=args.limit, user_id=args.user)
    app.db.dispose()
    if not rows:
        print("no tool calls yet")
    for row in rows:
        print(row)
    return 0
