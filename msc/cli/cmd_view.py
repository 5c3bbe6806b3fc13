"""``msc view MODEL``: write the graph as a self-contained HTML page (or SVG) and open it.

    msc view model.onnx                              # out/<model>.html, opened in the browser
    msc view model.onnx --overlay sqnr.json -o q.html --no-open
    msc view model.onnx --model-explorer             # opens Google's Model Explorer instead
"""

from __future__ import annotations

import os
import webbrowser

from ..errors import SerializationError
from . import options
from .loaders import load_model

HELP = ("open a model's graph in the browser: collapsible groups, search, details, overlays "
        "(example: msc view resnet50.onnx --overlay latency.json)")

VIEW_FORMATS = (".html", ".svg")


def add_arguments(p) -> None:
    p.epilog = ("examples:\n"
                "  msc view model.onnx                # writes out/model.html, opens the browser\n"
                "  msc view net.json --overlay sqnr.json --no-open -o out/net.html\n"
                "  msc view model.onnx --model-explorer   # needs pip install 'msc[explorer]'\n")
    options.add_model(p)
    options.add_input_info(p)
    p.add_argument("-o", "--output", help="file to write: .html (default out/<model>.html), "
                   ".svg, or with --model-explorer a .json (example: -o resnet50.html)")
    p.add_argument("--overlay", metavar="JSON", help="per-joint values {joint name: number} "
                   "(or the source model's node names) shown as colors and in the details "
                   "panel, on a log scale when they span decades; `msc run --check --layerwise "
                   "ERR.json` and `msc bench --profile-json` write them (example: --overlay "
                   "sqnr.json)")
    p.add_argument("--no-open", action="store_true",
                   help="write the file(s) only; with --model-explorer, print the command that "
                        "opens them")
    p.add_argument("--model-explorer", action="store_true",
                   help="export Model Explorer graph JSON (+ node data from --overlay) and open "
                        "it in Model Explorer (needs: pip install 'msc[explorer]')")


def _output(args) -> str:
    default_ext = ".json" if args.model_explorer else ".html"
    stem = os.path.splitext(os.path.basename(args.model))[0]
    path = args.output or os.path.join("out", stem + default_ext)
    ext = os.path.splitext(path)[1].lower()
    allowed = (".json",) if args.model_explorer else VIEW_FORMATS
    if ext not in allowed:
        raise SerializationError(f"cannot view as {ext or '(no extension)'!r}", file=path,
                                 hint=f"use {' or '.join(allowed)}")
    return path


def run(args) -> int:
    from ..viewer import model_explorer, write_html, write_svg
    from ..viewer.overlay import load_overlay

    path = _output(args)
    graph, weights = load_model(args.model, options.input_info(args))
    overlay = load_overlay(args.overlay, graph.node_names, graph.sources) \
        if args.overlay else None
    if overlay is not None and overlay.left_out:
        print(f"{len(overlay.left_out)} overlay key(s) name source nodes that became no joint "
              f"(constants, folded views), left out: {overlay.left_out[:5]}")
    if args.model_explorer:
        paths = model_explorer.write_model_explorer(graph, weights, path, overlay)
        print(f"wrote {', '.join(paths)} ({len(graph.node_names)} joints)")
        if args.no_open:
            print("open with: " + model_explorer.command_line(paths))
        else:
            model_explorer.open_model_explorer(paths)  # a local server, until Ctrl+C
        return 0
    writer = write_svg if path.lower().endswith(".svg") else write_html
    writer(graph, weights, path, overlay)
    print(f"wrote {path} ({len(graph.node_names)} joints)")
    if not args.no_open:
        webbrowser.open("file://" + os.path.abspath(path))
    return 0


COMMAND = (HELP, add_arguments, run)
