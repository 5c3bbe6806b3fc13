"""``msc demo`` step: translation cost grows linearly with the graph (issue #21, goal 5).
An Add/Relu chain of 1,000 and of 4,000 ONNX nodes goes through from_onnx; four times the
joints must cost about four times the CPU time (the quadratic importer took ~14x)."""

from __future__ import annotations

import time

import numpy as np

from .shared import banner


def _chain(size: int):
    """x -> Add(bias) -> Relu -> Add(bias) -> ... with ``size`` nodes, on a [1, 4] input."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(size):
        if i % 2 == 0:
            inits.append(numpy_helper.from_array(rng.standard_normal(4).astype("float32"),
                                                 f"b{i}"))
            nodes.append(helper.make_node("Add", [prev, f"b{i}"], [f"t{i}"]))
        else:
            nodes.append(helper.make_node("Relu", [prev], [f"t{i}"]))
        prev = f"t{i}"
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", prev)]
    graph = helper.make_graph(nodes, "chain", info[:1], info[1:], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _cpu_seconds(model) -> tuple[float, int]:
    """Best CPU seconds of from_onnx over two runs, and the joints of the graph."""
    from msc.frontends import translate

    best, joints = float("inf"), 0
    for _ in range(2):
        start = time.process_time()
        graph, _ = translate.from_onnx(model)
        best = min(best, time.process_time() - start)
        joints = graph.inspect()["nodes"]["total"]
    return best, joints


def step_translate_speed(out: str) -> None:
    """from_onnx on 1k and 4k-node chains: CPU seconds, microseconds per joint, growth."""
    banner("Translation grows linearly: from_onnx on Add/Relu chains (CPU time)")
    rows = {size: _cpu_seconds(_chain(size)) for size in (1000, 4000)}
    for size, (seconds, joints) in rows.items():
        print(f"{size:>5} ONNX nodes -> {joints:>5} joints: {seconds:.3f} s, "
              f"{1e6 * seconds / joints:.0f} us per joint")
    growth = rows[4000][0] / rows[1000][0]
    print(f"4x the nodes cost {growth:.1f}x the time (linear: ~4; benchmarks/scaling.py has "
          "1k-100k)")
    if growth > 8:
        raise SystemExit(f"from_onnx grew {growth:.1f}x for 4x the nodes: no longer linear")
