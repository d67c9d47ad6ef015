"""``rastrillo tools list|schemas|call``: the registry of an app folder, and calling it."""

from __future__ import annotations

import argparse
from typing import Any

from rastrillo.cli import add_app_option
from rastrillo.cli.call_cmd import add_call_parser
from rastrillo.registry.schemas import FORMATS
from rastrillo.visible import for_terminal


def add_tools_parser(sub: Any) -> None:
    tools = sub.add_parser("tools", help="list, render or call an app's tools")
    tsub = tools.add_subparsers(dest="tools_command", required=True, metavar="ACTION")

    p = tsub.add_parser("list", help="id, access, method and path, description")
    add_app_option(p)
    p.set_defaults(func=_list)

    p = tsub.add_parser("schemas", help="tool schemas as JSON on stdout")
    add_app_option(p)
    p.add_argument("--format", default="anthropic", choices=FORMATS)
    p.set_defaults(func=_schemas)

    add_call_parser(tsub)


def _list(args: argparse.Namespace) -> int:
    from rastrillo.loader import load_options

    defs = load_options(args.app).tools
    if not defs:
        print("no tools: declare TOOL = rastrillo.Tool(...) next to a handle")
        return 0
    width = max(len(d.id) for d in defs)
    for d in defs:
        line = f"{d.id:<{width}}  {d.access.value:<5}  {d.method} {d.path}  {d.description}"
        print(for_terminal(line))
    return 0


def _schemas(args: argparse.Namespace) -> int:
    from rastrillo.loader import load_options
    from rastrillo.registry.schemas import schemas_json

    print(schemas_json(load_options(args.app).tools, format=args.format))
    return 0
