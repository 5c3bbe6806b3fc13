"""Subcommands of ``msc``: name -> (help, add_arguments, run)."""

from __future__ import annotations

import json
import os

from ..errors import SerializationError
from .loaders import load_graph


def _add_model_arg(p) -> None:
    p.add_argument("model", help="model file: MSCGraph .json, ONNX .onnx, or TVMScript .py / "
                               ".tvmscript (Relax module text; parsed, never executed)")


def _add_inspect(p) -> None:
    _add_model_arg(p)
    p.add_argument("--json", action="store_true", help="print only the inspect() dict as JSON")


def _run_inspect(args) -> int:
    graph = load_graph(args.model)
    summary = graph.inspect()
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(graph)
    print(json.dumps(summary, indent=2))
    return 0


# Output formats of `msc export`, chosen by the output file's extension.
EXPORTERS = {
    ".json": lambda g, path: g.to_json(path),
    ".prototxt": lambda g, path: g.visualize(path),
    ".dot": lambda g, path: g.to_dot(path),
}


def _add_export(p) -> None:
    _add_model_arg(p)
    p.add_argument("-o", "--output", required=True,
                   help=f"output file; format from the extension: {', '.join(EXPORTERS)}")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")


def _run_export(args) -> int:
    ext = os.path.splitext(args.output)[1].lower()
    if ext not in EXPORTERS:
        raise SerializationError(f"unknown output format {ext or '(none)'!r}", file=args.output,
                                 hint=f"use one of {', '.join(EXPORTERS)}")
    if os.path.exists(args.output) and os.path.exists(args.model) and \
            os.path.samefile(args.output, args.model):  # --force never replaces the input
        raise SerializationError("output file is the input model; not overwriting it",
                                 file=args.output, hint="write to another file")
    if os.path.exists(args.output) and not args.force:
        raise SerializationError("output file exists; not overwriting it", file=args.output,
                                 hint="pass --force to replace it")
    graph = load_graph(args.model)
    EXPORTERS[ext](graph, args.output)
    print(f"wrote {args.output} ({len(graph.node_names)} nodes)")
    return 0


def _add_demo(p) -> None:
    p.add_argument("--out", default="out/demo", help="folder for the demo's files")


def _run_demo(args) -> int:
    from .demo import run_demo

    return run_demo(args.out)


COMMANDS = {
    "inspect": ("print a model's graph and its inspect() summary", _add_inspect, _run_inspect),
    "export": ("write a model's graph as JSON, prototxt (Netron) or DOT", _add_export,
               _run_export),
    "demo": ("run the end-to-end tour of msc", _add_demo, _run_demo),
}
