"""``msc export MODEL -o OUT``: write a model's graph in the format of OUT's extension."""

from __future__ import annotations

import os

from ..errors import SerializationError
from . import options
from .guard import check_writable, input_files
from .loaders import open_model

NAME = "export"
HELP = ("write a model's graph as MSC JSON (+ .npz weights), prototxt (Netron), DOT, SVG, "
        "a self-contained HTML viewer, or an ONNX model")


def _json(graph, weights, path: str) -> None:
    from msc.codegen.files import save_npz

    graph.to_json(path)
    if weights:
        save_npz(_sibling_npz(path), weights)


def _sibling_npz(path: str) -> str:
    return os.path.splitext(path)[0] + ".npz"


def _viewer(ext: str):
    def write(graph, weights, path: str) -> None:
        from ..viewer import EXPORTERS as VIEWS  # grandalf loads only for pictures

        VIEWS[ext](graph, weights, path)

    return write


def _onnx(graph, weights, path: str, opset=None, custom_domain=None) -> None:
    from msc.codegen import to_onnx  # onnx helpers load only for .onnx

    to_onnx(graph, weights, path, opset=opset, custom_domain=custom_domain)


# Output formats by extension: fn(graph, weights, path); the viewer writes the pictures and
# the ONNX codegen the model.
EXPORTERS = {
    ".json": _json,
    ".prototxt": lambda graph, weights, path: graph.visualize(path),
    ".dot": lambda graph, weights, path: graph.to_dot(path),
    ".svg": _viewer(".svg"),
    ".html": _viewer(".html"),
    ".onnx": _onnx,
}
# Files an exporter writes next to OUT: ext -> fn(path, weights) -> [paths].
SIDE_FILES = {".json": lambda path, weights: [_sibling_npz(path)] if weights else []}

EPILOG = """examples:
  msc export model.onnx -o out/model.json       # graph JSON + out/model.npz (weights)
  msc export model.onnx -o out/model.prototxt   # open it in Netron
  msc export model.onnx -o out/model.html       # offline viewer: groups, search, details
  msc export net.json -o out/net.onnx           # an ONNX model onnxruntime runs
  msc export net.json -o out/net.onnx --opset 13 --custom-domain   # multi-op joints: ai.msc
  msc export net.py:make_model --input-info "x:1,3,32,32" -o net.dot
An existing output is never replaced without --force, and the input never at all.
"""


def add_arguments(p) -> None:
    p.epilog = EPILOG
    options.add_model(p)
    options.add_input_info(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help=f"output file; its extension picks the format: {', '.join(EXPORTERS)}")
    p.add_argument("--force", action="store_true", help="replace existing output files")
    p.add_argument("--opset", type=int, help="ONNX only: the default-domain opset (13 up to "
                   "the installed onnx's newest; default 21)")
    p.add_argument("--custom-domain", nargs="?", const=True, metavar="DOMAIN",
                   help="ONNX only: write each joint with no single ONNX operator as one node "
                   "of DOMAIN (default ai.msc) backed by a model-local ONNX function")


def run(args) -> int:
    ext = os.path.splitext(args.output)[1].lower()
    if ext not in EXPORTERS:
        raise SerializationError(f"unknown output format {ext or '(none)'!r}", file=args.output,
                                 hint=f"use one of {', '.join(EXPORTERS)}")
    inputs = input_files(args.model)
    check_writable([args.output], inputs, args.force)  # fail before a long load
    model = open_model(args.model, options.input_info(args))
    side = SIDE_FILES.get(ext, lambda path, weights: [])(args.output, model.weights)
    check_writable(side, inputs, args.force)
    folder = os.path.dirname(args.output)
    if folder:
        os.makedirs(folder, exist_ok=True)
    options_of = {".onnx": {"opset": args.opset, "custom_domain": args.custom_domain}}
    EXPORTERS[ext](model.graph, model.weights, args.output, **options_of.get(ext, {}))
    extra = f" + {', '.join(side)}" if side else ""
    print(f"wrote {args.output}{extra} ({len(model.graph.node_names)} joints)")
    return 0
