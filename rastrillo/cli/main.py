"""``rastrillo``: new, generate, dev, tools, audit, agents.

A user's mistake is printed as one message on stderr with a non-zero exit;
a traceback only with ``--traceback``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence

from rastrillo.errors import GenerateError, RastrilloError

_COMMANDS = ("new", "generate", "dev", "tools", "audit", "agents")
_SIGPIPE_STATUS = 128 + 13  # as a shell reports a tool SIGPIPE ended; no `signal` import


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone when it is one.

    ``rastrillo generate`` thus builds and imports nothing of the commands it
    does not run; ``rastrillo --help`` and a mistyped command get them all.
    """
    parser = argparse.ArgumentParser(
        prog="rastrillo", description="Rastrillo: actions an AI agent can call, safely."
    )
    parser.add_argument("--traceback", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = (command,) if command in _COMMANDS else _COMMANDS

    if "new" in wanted:
        p = sub.add_parser("new", help="scaffold a new app")
        p.add_argument("name")
        p.set_defaults(func=_new)

    if "generate" in wanted:
        p = sub.add_parser("generate", help="write gen/ from actions/")
        p.add_argument("dir", nargs="?", default=".")
        p.add_argument("--check", action="store_true", help="write nothing; fail if gen/ is stale")
        p.set_defaults(func=_generate)

    if "dev" in wanted:
        p = sub.add_parser("dev", help="serve, regenerating and restarting on change")
        p.add_argument("dir", nargs="?", default=".")
        p.add_argument("--addr", default="127.0.0.1:8000")
        p.set_defaults(func=_dev)

    if "tools" in wanted:
        from rastrillo.cli.tools_cmd import add_tools_parser

        add_tools_parser(sub)
    if "audit" in wanted:
        from rastrillo.cli.audit_cmd import add_audit_parser

        add_audit_parser(sub)
    if "agents" in wanted:
        from rastrillo.cli.agents_cmd import add_agents_parser

        add_agents_parser(sub)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names before any help option, if it names one first."""
    for arg in argv:
        if arg in ("-h", "--help"):
            return None
        if not arg.startswith("-"):
            return arg
    return None


def _new(args: argparse.Namespace) -> int:
    from pathlib import Path  # here: `rastrillo generate` imports no pathlib

    from rastrillo.cli.new import scaffold

    target = scaffold(Path(args.name))
    print(f"created {target}\nnext: cd {target} && python app.py")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from rastrillo.generate import generate

    changed = generate(args.dir, check=args.check)
    if args.check:
        if changed:
            print(f"gen/ is stale: {', '.join(changed)} (run rastrillo generate)", file=sys.stderr)
            return 1
        print("gen/ is up to date")
    else:
        print(f"wrote {', '.join('gen/' + n for n in changed)}" if changed else "gen/ unchanged")
    return 0


def _dev(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rastrillo.cli.dev import run_dev

    return run_dev(Path(args.dir), args.addr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names; its exit status.

    Output into a pipe whose reader has gone (``| head -1``) ends the command as
    ``SIGPIPE`` ends a Unix tool: quietly, status 141. stdout is flushed inside,
    and pointed at /dev/null after, so the interpreter's own flush at exit cannot
    fail again (the Python docs' "Note on SIGPIPE").

    Run as the process's own command line (``argv`` None), it first freezes what the
    interpreter and the command line have loaded out of the cycle collector's way, as
    `rastrillo.serve` does after start-up: that lives as long as the process, and the
    collector's passes, the one at exit included, would look it all over again (a
    fiftieth of ``rastrillo generate``).
    """
    if argv is None:
        gc.freeze()
    try:
        status = _run(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _SIGPIPE_STATUS
    return status


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed, a command's ``key=value`` list taken wherever it stands.

    argparse fills a ``nargs="*"`` positional only where it first meets it, so in
    ``tools call TOOL --as A id=7`` the ``id=7`` after an option would be a usage
    error; a command whose defaults name such a list (``intermixed``) gets the
    words left over after its options appended to it, in order.
    """
    parser = build_parser(_command(argv))
    args, extra = parser.parse_known_args(argv)
    intermixed = getattr(args, "intermixed", None)
    if intermixed is not None:
        getattr(args, intermixed).extend(word for word in extra if not word.startswith("-"))
        extra = [word for word in extra if word.startswith("-")]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _run(argv: Sequence[str]) -> int:
    args = _parse(argv)
    try:
        return int(args.func(args))
    except GenerateError as exc:
        count = len(exc.problems)
        print(f"{exc}\n{count} problem{'s' * (count != 1)}; gen/ left as it was", file=sys.stderr)
        return 1
    except RastrilloError as exc:
        if args.traceback:
            import traceback  # only here: importing it is 5 % of the command line's start

            traceback.print_exc()
        from rastrillo.visible import for_terminal  # only here: it imports `typing`

        print(f"error: {for_terminal(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
