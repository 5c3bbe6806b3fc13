"""``msc diff A B``: the structural diff of two models' graphs (msc.graph.diff)."""

from __future__ import annotations

import json

from ..graph.diff import diff_graphs
from . import options
from .loaders import open_model

NAME = "diff"
HELP = "structural diff of two graphs: joints added, removed, changed (exit 1 when they differ)"
EPILOG = """examples:
  msc diff model.onnx pruned.json                   # before / after a compression
  msc diff model.onnx net.py:make_model --input-info-b "x:1,3,224,224"   # ONNX vs torch import
  msc diff a.json b.json --json
  msc diff a.json b.json --brief                    # the verdict line only
Joints pair by their place in the graph (inputs by position, then each joint with a joint of
the same optype below its matched parents), names breaking ties, so graphs whose names differ
still pair up; renames alone do not make graphs differ.
Exit status as diff(1): 0 same structure, 1 the graphs differ, 2 trouble (bad input).
"""


def add_arguments(p) -> None:
    p.epilog = EPILOG
    options.add_model(p, "a", "the first model (any MODEL form, see msc inspect --help)")
    options.add_model(p, "b", "the second model")
    p.add_argument("--input-info-a", action="append", metavar="SPEC", dest="input_info",
                   help="--input-info of A (torch or ONNX model)")
    p.add_argument("--input-info-b", action="append", metavar="SPEC",
                   help="--input-info of B (torch or ONNX model)")
    p.add_argument("--json", action="store_true", help="print the diff as JSON")
    p.add_argument("--brief", action="store_true",
                   help="print only the verdict line (counts of added, removed, changed...)")


def run(args) -> int:
    from .specs import parse_input_info

    a = open_model(args.a, options.input_info(args))
    b = open_model(args.b, parse_input_info(args.input_info_b))
    result = diff_graphs(a.graph, b.graph)
    result.a_name, result.b_name = args.a, args.b
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    elif args.brief:
        print(result.format().splitlines()[-1])
    else:
        print(f"--- {args.a} ({len(a.graph.node_names)} joints)")
        print(f"+++ {args.b} ({len(b.graph.node_names)} joints)")
        print(result.format())
    return 0 if result.identical else 1
