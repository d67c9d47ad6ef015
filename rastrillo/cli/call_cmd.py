"""``rastrillo tools call``: act as an agent from a shell, through the app."""

from __future__ import annotations

import argparse
import logging
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rastrillo.cli import add_app_option
from rastrillo.errors import RastrilloError
from rastrillo.visible import for_terminal, json_line

if TYPE_CHECKING:
    from rastrillo.tools import Result

NEEDS_APPROVAL = 3
"""Exit status of ``tools call`` when the write waits for the user's approval."""


def add_call_parser(tsub: Any) -> None:
    p = tsub.add_parser(
        "call",
        help="call a tool as an agent for a user, through the app",
        description="Call TOOL through the app as agent AGENT acting for user USER. "
        f"A write prints its sentence and approval URL and exits {NEEDS_APPROVAL}; "
        "once the user approved, repeat the call with --approval ID.",
    )
    p.add_argument("tool")
    p.add_argument("args", nargs="*", metavar="key=value")
    p.add_argument(
        "--as", dest="agent", required=True, type=_agent_name, metavar="AGENT", help="its name"
    )
    p.add_argument("--user", required=True, help="the id of the user the agent acts for")
    p.add_argument("--approval", metavar="ID", help="the approval id of an approved write")
    add_app_option(p, db=True)
    p.set_defaults(func=_call, intermixed="args")


def _call(args: argparse.Namespace) -> int:
    from rastrillo.actor import Actor
    from rastrillo.app import handler
    from rastrillo.loader import load_options
    from rastrillo.logs import configure_logging
    from rastrillo.options import select_database
    from rastrillo.registry.validate import call_args as typed_args
    from rastrillo.sessions.store import create_session, delete_session
    from rastrillo.tools import Call, ConfirmRequired, dispatch_sync
    from rastrillo.tools.audit import flush

    # A handler's traceback reaches this terminal as the server's logs would: escaped.
    configure_logging(logging.WARNING)
    options = select_database(load_options(args.app), args.db)
    app = handler(options)
    defn = next((d for d in options.tools if d.id == args.tool), None)
    texts = _parse_args(args.args)
    call_args = typed_args(defn.args, texts) if defn is not None else texts
    session = create_session(app.db, args.user, agent_only=True)
    call = Call(
        tool=args.tool,
        args=call_args,
        actor=Actor.agent(args.agent),
        session=session,
        approval=args.approval,
    )
    try:
        result = dispatch_sync(app, options.tools, call)
    except ConfirmRequired as exc:
        again = shlex.join(["rastrillo", "tools", "call", *_argv_of(args), "--approval"])
        print(f"needs the approval of user {for_terminal(args.user)}:\n")
        print(f"  {for_terminal(exc.sentence)}\n")
        print(f"approve or decline at {exc.url}\nthen run: {for_terminal(again)} {exc.approval_id}")
        return NEEDS_APPROVAL
    finally:
        delete_session(app.db, session)
        flush(app.db)
        app.db.dispose()
    location = result.headers.get("location")
    print(f"{result.status} → {for_terminal(location)}" if location else result.status)
    if result.body:
        print(_shown(result))
    return 0 if result.status < 400 else 1


def _shown(result: Result) -> str:
    """A response body for the terminal, escaped once: a JSON body as its value's JSON on
    one line (:func:`visible.json_line`: JSON's escapes, not escaped again), any other
    body line by line (:func:`visible.for_terminal`)."""
    media = result.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        try:
            return json_line(result.json())
        except (ValueError, RecursionError):
            pass  # not JSON (or nested past Python's reach): shown as the text it is
    return "\n".join(for_terminal(line) for line in result.text.split("\n"))


def _agent_name(name: str) -> str:
    """``--as``: a name an agent may have, refused here with the rule rather than by dispatch."""
    from rastrillo.actor import AGENT_NAME_RULE, Actor

    if not Actor.agent(name).is_named_agent:
        raise argparse.ArgumentTypeError(
            f"'{for_terminal(name)}' is no agent name: an agent name is {AGENT_NAME_RULE}"
        )
    return name


def _parse_args(pairs: list[str]) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise RastrilloError(f"bad argument {pair!r}: write key=value")
        if key in parsed:
            raise RastrilloError(f"argument {key!r} given twice")
        parsed[key] = value
    return parsed


def _argv_of(args: argparse.Namespace) -> list[str]:
    argv = [args.tool, *args.args, "--as", args.agent, "--user", args.user]
    if args.app != Path("."):
        argv += ["--app", str(args.app)]
    return argv if args.db is None else [*argv, "--db", args.db]
