"""``msc`` command line: one table of subcommands (``commands.COMMANDS``), one exit-status rule.

    msc inspect model.onnx
    msc run model.onnx --check
    msc CMD --help                    # every option, with examples
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

from ..errors import MSCError
from ..progress import set_quiet
from . import commands

# Exit statuses. The rule: a command that ran to its end and answers "no" (a check failed,
# outputs mismatched, graphs differ) exits 1; a command that could not do its work because of
# what it was given (usage, a missing/unreadable/invalid file, a bad spec, an unsupported
# format or op: every msc.errors.MSCError and OSError) exits 2; anything else is a bug in msc.
OK, FAILED, INPUT_ERROR, INTERNAL_ERROR = 0, 1, 2, 3

EPILOG = """MODEL is one of:
  model.onnx             an ONNX file
  graph.json             an MSCGraph (weights from a sibling graph.npz / .safetensors)
  module.py              a TVMScript Relax module (parsed, never executed)
  file.py:factory        a torch model: file.py is executed and factory() returns an
                         nn.Module; give its inputs with --input-info "x:1,3,224,224:float32"

exit status:
  0  success
  1  the command ran and the answer is no: a --check or --test mismatch, graphs that differ
  2  usage or input error: bad arguments, a missing/unreadable/invalid file, a bad shape
     spec, an unsupported format or op (the message on stderr names the input)
  3  internal error in msc (a traceback follows; please report it)

examples:
  msc inspect model.onnx
  msc export model.onnx -o out/model.json
  msc run model.onnx --check
  msc codegen model.onnx --to torch -o out/torch --test
  msc bench model.onnx --threads 1
  msc diff model.onnx other.onnx
  msc cache prune --max-mb 200     # the kernel cache: size, prune, clear

Progress bars go to stderr when it is a terminal; --quiet (or MSC_QUIET=1) turns them off.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="msc", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="msc: inspect, convert, run, compare and export models through one "
                    "MSCGraph.")
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars (they go to stderr, and only to a terminal)")
    parser.add_argument("--traceback", action="store_true",
                        help="on an input error, show the Python traceback too")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, add_args, _) in commands.COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        add_args(p)
        # also after the command (`msc run m.onnx -q`); SUPPRESS keeps the global value
        p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                       help="no progress bars")
    return parser


def _version() -> str:
    from .. import __version__

    return f"msc {__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: 2 on a usage error, 0 after --help / --version
        return exit_.code if isinstance(exit_.code, int) else INPUT_ERROR
    if not args.command:
        parser.print_help(sys.stderr)
        return INPUT_ERROR
    set_quiet(args.quiet)
    _printable_paths()
    return _run(args)


def _printable_paths() -> None:
    """A file name that is not UTF-8 reaches Python as surrogates (``\udcff``); stdout prints
    them back as the bytes they were instead of failing after the work is done."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None and getattr(sys.stdout, "errors", "") == "strict":
        reconfigure(errors="surrogateescape")


def _run(args) -> int:
    run = commands.COMMANDS[args.command][2]
    try:
        return run(args) or OK
    except BrokenPipeError:  # `msc inspect ... | head`: BrokenPipeError is an OSError
        return OK
    except (MSCError, OSError) as err:
        if args.traceback:
            traceback.print_exc()
        print(f"msc {args.command}: error: {_message(err)}", file=sys.stderr)
        return INPUT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception:  # noqa: BLE001 - a bug: exit 3, not 1 (which means 'check failed')
        traceback.print_exc()
        print(f"msc {args.command}: internal error (a bug in msc; please report it with the "
              "traceback above)", file=sys.stderr)
        return INTERNAL_ERROR


def _message(err: Exception) -> str:
    """The error as text whose first line is whole: a name holding a newline or another
    control character (a file called ``a\nb``) is shown escaped, as Python writes it."""
    if isinstance(err, OSError) and err.filename:
        return f"{_escaped(str(err.filename))}: {err.strerror or err}"
    text = str(err)
    for value in getattr(err, "context", {}).values():
        if isinstance(value, str) and _escaped(value) != value:
            text = text.replace(value, _escaped(value))
    return text


def _escaped(name: str) -> str:
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in name)


def print_json(data) -> None:
    print(json.dumps(data, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
