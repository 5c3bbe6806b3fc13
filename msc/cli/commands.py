"""Subcommands of ``msc``: one table, name -> (help, add_arguments, run).

Each command lives in its own module (``cmd_<name>.py``) with ``NAME``, ``HELP``,
``add_arguments(parser)`` (which also sets the parser's ``epilog`` of examples) and
``run(args) -> exit status``. Another package adds a command by adding a row here. The
contract of a row (``main.py`` holds the rule):

- ``run`` returns 0, or 1 when it ran and the answer is no (a failed check, a difference);
- bad input is an ``msc.errors`` error (naming the file, node, key...) raised out of ``run``:
  main prints it on stderr and exits 2; anything else is a bug (exit 3);
- models are read with ``loaders.open_model`` (every MODEL form, ``--input-info``) and
  arguments shared with other commands come from ``options`` (``add_model``,
  ``add_input_info``, ``add_inputs``, ``add_tolerances``, ``add_threads``).

Export formats are the other table: ``cmd_export.EXPORTERS[".ext"] = fn(graph, weights, path)``.
"""

from __future__ import annotations

from . import (  # their COMMAND rows, below
    cmd_bench,
    cmd_cache,
    cmd_codegen,
    cmd_diff,
    cmd_export,
    cmd_generate,
    cmd_inspect,
    cmd_prune,
    cmd_quantize,
    cmd_run,
    cmd_view,
)
from .cmd_export import EXPORTERS  # noqa: F401  (the export formats, by extension)


def _add_demo(p) -> None:
    p.epilog = "example:\n  msc demo --out out/demo\n"
    p.add_argument("--out", default="out/demo", help="folder for the demo's files")


def _run_demo(args) -> int:
    # The tour (msc/tour/) is a showcase, not a command's code: loaded only when it runs, so
    # `import msc.cli` and `msc --help` stay free of it. It runs `msc` as a child process and
    # imports nothing from msc.cli, so this is the one edge between the two.
    from ..tour.steps import run_demo

    return run_demo(args.out)


COMMANDS = {m.NAME: (m.HELP, m.add_arguments, m.run)
            for m in (cmd_inspect, cmd_export, cmd_codegen, cmd_run, cmd_bench, cmd_diff,
                      cmd_generate)}
COMMANDS["view"] = cmd_view.COMMAND
COMMANDS["prune"] = cmd_prune.COMMAND
COMMANDS["quantize"] = cmd_quantize.COMMAND
COMMANDS["cache"] = (cmd_cache.HELP, cmd_cache.add_arguments, cmd_cache.run)
COMMANDS["demo"] = ("run the end-to-end tour of msc", _add_demo, _run_demo)
