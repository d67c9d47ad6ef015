"""The ``rastrillo`` command."""

from __future__ import annotations

import argparse  # the command line's own parser: already imported by rastrillo.cli.main


def add_app_option(parser: argparse.ArgumentParser, *, db: bool = False) -> None:
    """``--app``, and with ``db`` ``--db``: how every command that reads an app's
    folder, or its database, is told which."""
    from pathlib import Path  # here: `rastrillo generate` imports no pathlib

    parser.add_argument("--app", default=".", type=Path, help="the app folder (default: .)")
    if db:
        parser.add_argument(
            "--db", help="the database (default: $RASTRILLO_DB, else the app's own)"
        )
