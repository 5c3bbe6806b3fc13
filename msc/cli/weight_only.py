"""``msc quantize --weight-only int4|int8``: the weight-only branch of the quantize command.

Every linear layer gets a packed weight (a ``matmul_nbits`` joint: int4 two per byte per
group, or int8 per channel); ``--awq`` searches activation-aware scales on the ``--calib``
batches (RTN otherwise, the batches then measure each layer's output SQNR), ``--eval`` names
held-out inputs on which the report compares the logits with the float model's. Writes the
graph JSON, its ``.npz`` (the packed bytes as uint8, no pickles), ``.plan.json`` (per layer:
format and AWQ scale, for ``apply_weight_plan``) and ``.report.json``.
"""

from __future__ import annotations

import os

__all__ = ["add_arguments", "run_weight_only"]


def add_arguments(p) -> None:
    g = p.add_argument_group("weight-only (LLM decode): pack linear weights, activations float")
    g.add_argument("--weight-only", choices=["int8", "int4"], default=None,
                   help="int8 per output channel or int4 per group (matmul_nbits joints)")
    g.add_argument("--group-size", type=int, default=128,
                   help="int4 group: 32, 64 or 128 input channels per scale (default 128)")
    g.add_argument("--asym", action="store_true",
                   help="asymmetric groups (a zero point each); default symmetric")
    g.add_argument("--awq", action="store_true",
                   help="activation-aware scale search on the --calib batches (else RTN)")
    g.add_argument("--eval", default=None, metavar="NPZ",
                   help="held-out inputs (.npz as --calib) for logits SQNR and top-1 agreement")


def run_weight_only(args, graph, weights, batches: list, held: list | None, paths: dict) -> int:
    from msc.codegen.files import save_npz
    from msc.codegen.qweight import pack_weights
    from msc.compression.weight_only import quantize_weights, save_weight_plan

    bits = 8 if args.weight_only == "int8" else 4
    config = {"bits": bits, "group_size": None if bits == 8 else args.group_size,
              "symmetric": not args.asym, "method": "awq" if args.awq else "rtn",
              "executor": args.executor,
              "exclude": {"names": args.exclude, "regex": args.exclude_regex}}
    qgraph, qweights, report = quantize_weights(graph, weights, batches, config, held)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    qgraph.to_json(paths["graph"])
    save_npz(paths["weights"], pack_weights(qweights))
    save_weight_plan(report.plan, paths["plan"])
    report.save(paths["report"])
    print(report.table())
    print(f"\nwrote {paths['graph']} ({len(qgraph.node_names)} nodes), {paths['weights']}, "
          f"{paths['plan']}, {paths['report']}")
    return 0
