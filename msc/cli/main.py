"""``msc`` command line: one table of subcommands, each a small module-level function.

    msc inspect model.json            # summary dict + printed graph
    msc export model.json -o g.prototxt
    msc demo                          # the end-to-end tour
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import MSCError
from . import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="msc", description="msc: inspect, convert and export models through one MSCGraph.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, add_args, _) in commands.COMMANDS.items():
        add_args(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def _version() -> str:
    from .. import __version__

    return f"msc {__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    run = commands.COMMANDS[args.command][2]
    try:
        return run(args) or 0
    except MSCError as err:
        print(f"msc {args.command}: error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `msc inspect ... | head`
        return 0


def print_json(data) -> None:
    print(json.dumps(data, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
