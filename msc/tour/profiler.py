"""``msc demo`` step: where a model's time goes -- ``vm.profile`` per joint of an ONNX model
imported by from_onnx, written as the overlay ``msc view --overlay`` draws."""

from __future__ import annotations

import os

import numpy as np

from .shared import banner


def _model():
    """Conv -> Relu -> Conv -> GlobalAveragePool -> Flatten -> Gemm, random weights."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype("float32") * 0.2, n)
             for n, s in (("w", (16, 3, 3, 3)), ("w2", (16, 16, 3, 3)), ("fc", (10, 16)))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c2"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def step_profile(out: str) -> None:
    """Profile a small ONNX CNN per joint, check the report adds up and names the graph's
    joints, and write ``profile.json`` under ``out`` for ``msc view --overlay``."""
    from msc.codegen import to_relax
    from msc.frontends import translate

    from .. import relax
    from ..viewer.overlay import load_overlay

    banner("vm.profile: time, calls and share per joint (kernels timed one by one)")
    graph, weights = translate.from_onnx(_model())
    vm = relax.VirtualMachine(relax.build(to_relax(graph, weights,
                                                   build_folder=os.path.join(out, "relax"))))
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype("float32")
    report = vm.profile(x, number=10)
    print(report.table())
    keys, joints = set(report.to_dict()), set(graph.node_names)
    share = sum(row.share for row in report.rows)
    if not keys or not keys <= joints or abs(share - 1) > 1e-6:
        raise SystemExit(f"profile keys {sorted(keys - joints)} are not joints, or shares "
                         f"sum to {share}")
    path = os.path.join(out, "profile.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(report.json(graph.node_names))
    overlay = load_overlay(path, graph.node_names)  # what `msc view --overlay` reads
    hottest = report.rows[0]
    print(f"hottest joint {hottest.joint!r}: {hottest.share:.0%} of the run; overlay of "
          f"{len(overlay.values)} joints saved to {path}")
    print(f"view it: msc view MODEL.onnx --overlay {path}")
